"""HTTP method details every service gets from its server: ``HEAD`` and ``Allow``.

FastAPI routes list only the methods they were declared with, so ``HEAD`` of a GET
route was 405, and a 405 said nothing of what is allowed. ``MethodsMiddleware`` wraps
the whole application (outside every other middleware, so a token or secret is still
checked first):

- ``HEAD`` on a path that has a GET route runs that GET; the server (uvicorn, whose own
  request scope still says HEAD) sends its status and headers without the body;
- a 405 answer carries ``Allow`` with every method of every route of that path.

A catch-all route that only sorts out what no other route matched (``fallback_route``:
it answers 400, 404 or 405 itself) serves no method: it is left out of ``Allow``. A HEAD
it would take as GET still goes to it, so that HEAD answers what GET answers there (404,
or a 405 whose ``Allow`` names the methods of the other routes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The methods a path is probed with to learn what it allows.
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_FALLBACK = "_quire_fallback_route"

E = TypeVar("E", bound=Callable[..., Any])


def fallback_route(endpoint: E) -> E:
    """Mark the endpoint of a catch-all route that answers only errors: its methods are
    not methods its paths allow (put it under the route decorator)."""
    setattr(endpoint, _FALLBACK, True)
    return endpoint


def _is_fallback(route: Any) -> bool:
    return getattr(getattr(route, "endpoint", None), _FALLBACK, False) is True


def _leaves(routes: list[Any], path: str) -> Iterator[tuple[Any, str]]:
    """Every route of ``routes`` that may serve ``path``, with the path as it sees it: the
    routes of an included router (FastAPI 0.16x keeps it whole, as one route whose
    ``matches`` hides which of its routes matched) are looked at one by one."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is None:
            yield route, path
            continue
        prefix = getattr(getattr(route, "include_context", None), "prefix", "") or ""
        if path.startswith(prefix):
            yield from _leaves(inner.routes, path[len(prefix) :])


def accepts(routes: list[Any], path: str, method: str, fallbacks: bool = False) -> bool:
    """Whether some route of ``routes`` (a fallback only if ``fallbacks``) takes ``method``
    on ``path``, asking each route's own ``matches``."""
    for route, seen_path in _leaves(routes, path):
        scope = {"type": "http", "path": seen_path, "root_path": "", "method": method}
        if (fallbacks or not _is_fallback(route)) and route.matches(scope)[0] == Match.FULL:
            return True
    return False


def allowed_methods(routes: list[Any], path: str) -> set[str]:
    """Every method some route of ``routes`` serves on ``path`` (HEAD wherever GET).
    About a millisecond: done only for a 405."""
    methods = {method for method in _METHODS if accepts(routes, path, method)}
    if "GET" in methods:
        methods.add("HEAD")
    return methods


class MethodsMiddleware:
    """``HEAD`` of GET routes and ``Allow`` on 405 (see the module docstring)."""

    def __init__(self, app: ASGIApp, routes: list[Any]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if scope["method"] == "HEAD" and accepts(self.routes, path, "GET", fallbacks=True):
            scope = dict(scope)
            scope["method"] = "GET"

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"allow" for name, _ in headers):
                    allow = ", ".join(sorted(allowed_methods(self.routes, path)))
                    headers.append((b"allow", allow.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_allow)
