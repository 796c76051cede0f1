"""HEAD of GET routes and Allow on 405 (services/web/methods.py), on a small app with
included routers like the services'."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import APIRouter, Request

from services.errors import MethodNotAllowed, NotFound
from services.web.app import new_app
from services.web.errors import install_error_handlers
from services.web.methods import MethodsMiddleware, allowed_methods, fallback_route

seen: list[str] = []
router = APIRouter(prefix="/v1")


@router.get("/things/{thing_id}")
async def get_thing(thing_id: str, request: Request) -> dict:
    seen.append(request.method)
    return {"thing": thing_id}


@router.delete("/things/{thing_id}")
async def delete_thing(thing_id: str) -> dict:
    return {}


@router.post("/things/{thing_id}/close")
async def close_thing(thing_id: str) -> dict:
    return {}


@router.api_route("/things/{rest:path}", methods=["GET", "PUT", "POST", "DELETE"])
@fallback_route
async def no_such_thing(rest: str) -> dict:
    """Like the gateway's logs catch-all: whatever the routes above did not match."""
    if rest.count("/") > 1:  # deeper than any route above
        raise NotFound("no such route")
    raise MethodNotAllowed("method not allowed on this route")


def make_app() -> MethodsMiddleware:
    app = new_app()
    install_error_handlers(app)
    app.include_router(router)
    return MethodsMiddleware(app, app.router.routes)


def call(method: str, path: str) -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=make_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.request(method, path)

    return asyncio.run(main())


def test_allowed_methods_sees_included_routes() -> None:
    """Every method of every route of a path, HEAD wherever GET; none for no route."""
    app = make_app()
    assert allowed_methods(app.routes, "/v1/things/7") == {"GET", "HEAD", "DELETE"}
    assert allowed_methods(app.routes, "/v1/things/7/close") == {"POST"}
    assert allowed_methods(app.routes, "/v1/nothing") == set()


def test_head_runs_the_get_route() -> None:
    """HEAD of a GET route is the GET (200), not 405."""
    seen.clear()
    r = call("HEAD", "/v1/things/7")
    assert r.status_code == 200
    assert seen == ["GET"]


def test_405_carries_allow() -> None:
    """A 405 lists the path's methods in Allow, with the docs/api.md error body; HEAD of a
    POST-only route stays 405."""
    r = call("PUT", "/v1/things/7")
    assert r.status_code == 405 and r.json()["error"] == "method_not_allowed"
    assert r.headers["allow"] == "DELETE, GET, HEAD"
    r = call("HEAD", "/v1/things/7/close")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_unknown_route_is_404_for_head_too() -> None:
    """HEAD of a path with no route is 404 like GET."""
    assert call("HEAD", "/v1/nothing").status_code == 404


def test_a_fallback_route_allows_nothing() -> None:
    """A catch-all that only answers errors adds none of its methods to Allow, and does
    not turn HEAD into GET: a POST-only path under it says Allow: POST."""
    app = make_app()
    assert allowed_methods(app.routes, "/v1/things/7/close") == {"POST"}
    for method in ("GET", "PUT", "DELETE", "HEAD"):
        r = call(method, "/v1/things/7/close")
        assert r.status_code == 405, (method, r.text)
        assert r.headers["allow"] == "POST", method


def test_head_under_a_fallback_answers_like_get() -> None:
    """HEAD of a path only the fallback takes is what GET is there (a 404 here, not a 405
    with an empty Allow)."""
    assert call("GET", "/v1/things/7/nothing/here").status_code == 404
    assert call("HEAD", "/v1/things/7/nothing/here").status_code == 404
