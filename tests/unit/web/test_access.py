"""Request ids, access lines and slow requests (services/web/access.py) on a small app
built like the services' (error handlers, a token check before routing, HEAD/Allow):
every answer carries ``X-Request-Id`` (errors, 401s, unknown routes, 500s included),
the route and its log lines see the same id, and the slow-request warning follows the
threshold and a request's own wait."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter

from gateway.http.auth import TokenMiddleware, TokenPolicy
from services.errors import LedgerNotFound
from services.json_logging import JsonFormatter, RequestIdFilter
from services.request_ids import current_request_id
from services.web.access import AccessMiddleware, wait_allowance_ms
from services.web.app import new_app
from services.web.errors import install_error_handlers, unavailable_app
from services.web.methods import MethodsMiddleware

NEW_ID = re.compile(r"[0-9a-f]{32}")
TOKEN = "tok-123"
router = APIRouter(prefix="/v1")
route_log = logging.getLogger("tests.access.route")


@router.get("/things/{thing_id}")
async def get_thing(thing_id: int) -> dict[str, Any]:
    route_log.info("serving a thing", extra={"fields": {"thing": thing_id}})
    if thing_id == 404:
        raise LedgerNotFound(f"no ledger {thing_id}")
    if thing_id == 500:
        raise RuntimeError("a bug")
    return {"thing": thing_id, "seen_request_id": current_request_id()}


class Clock:
    """A fake clock that moves ``step_s`` seconds at each read: a request (read at its
    start and its end) takes ``step_s``."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.now = 0.0

    def __call__(self) -> float:
        now = self.now
        self.now += self.step_s
        return now


def make_app(slow_request_ms: int = 1_000, clock: Callable[[], float] | None = None) -> Any:
    app = new_app()
    install_error_handlers(app)
    app.include_router(router)
    app.add_middleware(TokenMiddleware, policy=TokenPolicy(TOKEN, None))
    kwargs: dict[str, Any] = {"slow_request_ms": slow_request_ms}
    if clock is not None:
        kwargs["clock"] = clock
    return AccessMiddleware(MethodsMiddleware(app, app.router.routes), **kwargs)


def call(app: Any, method: str, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.request(method, path, headers=headers)

    return asyncio.run(main())


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """JSON log lines of the access logger and the test route, at debug level."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter("test"))
    handler.addFilter(RequestIdFilter())
    loggers = [logging.getLogger("quire.access"), route_log]
    saved = [(lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
    try:
        yield out
    finally:
        for lg, (level, propagate) in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate


def parsed(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_sane_id_is_returned_and_seen_by_the_route_and_its_logs(lines: io.StringIO) -> None:
    """The client's id comes back as X-Request-Id; the route sees it in the context
    variable; the route's line and the access line carry it."""
    r = call(make_app(), "GET", "/v1/things/7", {**AUTH, "X-Request-Id": "client-id.1"})
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "client-id.1"
    assert r.json() == {"thing": 7, "seen_request_id": "client-id.1"}
    logged = parsed(lines)
    route_line = next(line for line in logged if line["msg"] == "serving a thing")
    assert route_line["request_id"] == "client-id.1"
    access = next(line for line in logged if line["msg"] == "request")
    assert access["level"] == "debug"
    assert access["request_id"] == "client-id.1"
    assert (access["method"], access["path"], access["status"]) == ("GET", "/v1/things/7", 200)
    assert isinstance(access["duration_ms"], float)
    assert current_request_id() is None  # reset after the request


def test_no_id_gets_a_new_one_and_a_bad_one_is_replaced() -> None:
    """Without the header the answer has a new id; a bad id (too long, odd characters)
    is replaced, never reflected."""
    app = make_app()
    fresh = call(app, "GET", "/v1/things/1", AUTH)
    assert NEW_ID.fullmatch(fresh.headers["x-request-id"])
    assert fresh.json()["seen_request_id"] == fresh.headers["x-request-id"]
    for bad in ("x" * 129, "a b", "<script>", "semi;colon"):
        r = call(app, "GET", "/v1/things/1", {**AUTH, "X-Request-Id": bad})
        assert NEW_ID.fullmatch(r.headers["x-request-id"]), bad
        assert bad not in r.text
    assert len(fresh.headers.get_list("x-request-id")) == 1


@pytest.mark.parametrize(
    ("method", "path", "headers", "status", "code"),
    [
        ("GET", "/v1/things/404", AUTH, 404, "ledger_not_found"),
        ("GET", "/v1/nowhere", AUTH, 404, "not_found"),
        ("GET", "/nowhere", {}, 404, "not_found"),
        ("GET", "/v1/things/1", {}, 401, "unauthorized"),
        ("GET", "/v1/unknown-route", {}, 401, "unauthorized"),
        ("DELETE", "/v1/things/1", AUTH, 405, "method_not_allowed"),
        ("GET", "/v1/things/not-a-number", AUTH, 400, "invalid_argument"),
        ("GET", "/v1/things/500", AUTH, 500, "internal"),
    ],
)
def test_error_answers_carry_the_id(
    method: str, path: str, headers: dict[str, str], status: int, code: str
) -> None:
    """Every error answer (route errors, unknown routes, 401 before routing, 405,
    validation, an unexpected exception's 500) carries the request's id."""
    r = call(make_app(), method, path, {**headers, "X-Request-Id": "err-trace"})
    assert r.status_code == status, r.text
    assert r.json()["error"] == code
    assert r.headers["x-request-id"] == "err-trace"


def test_head_carries_the_id() -> None:
    """HEAD of a GET route (answered without a body) carries the id too."""
    r = call(make_app(), "HEAD", "/v1/things/1", {**AUTH, "X-Request-Id": "head-1"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "head-1"


def test_slow_request_warning_follows_the_threshold(lines: io.StringIO) -> None:
    """A request over ``slow_request_ms`` logs a warning with its id, status and
    duration; one under it does not; 0 turns the warning off."""
    call(make_app(1_000, Clock(2.0)), "GET", "/v1/things/3", {**AUTH, "X-Request-Id": "slow-1"})
    call(make_app(1_000, Clock(0.5)), "GET", "/v1/things/3", {**AUTH, "X-Request-Id": "fast-1"})
    call(make_app(0, Clock(60.0)), "GET", "/v1/things/3", {**AUTH, "X-Request-Id": "off-1"})
    warnings = [line for line in parsed(lines) if line["level"] == "warning"]
    assert len(warnings) == 1, warnings
    slow = warnings[0]
    assert slow["msg"] == "slow request"
    assert slow["request_id"] == "slow-1"
    assert (slow["status"], slow["duration_ms"], slow["slow_request_ms"]) == (200, 2000.0, 1000)
    access = [line["request_id"] for line in parsed(lines) if line["msg"] == "request"]
    assert access == ["slow-1", "fast-1", "off-1"]


def test_a_requested_wait_is_not_slow(lines: io.StringIO) -> None:
    """A long-poll that asked to wait 5 s and took 2 s is not slow; one that took longer
    than its wait plus the threshold is."""
    call(make_app(1_000, Clock(2.0)), "GET", "/v1/things/3?after=1&wait_ms=5000", AUTH)
    call(make_app(1_000, Clock(7.0)), "GET", "/v1/things/3?wait_ms=5000", AUTH)
    warnings = [line for line in parsed(lines) if line["level"] == "warning"]
    assert [w["duration_ms"] for w in warnings] == [7000.0]


def test_wait_allowance() -> None:
    """``wait_ms`` read from the query, clamped to 30 s; 0 when absent or not a number."""
    assert wait_allowance_ms(b"") == 0
    assert wait_allowance_ms(b"after=3&wait_ms=2500") == 2500
    assert wait_allowance_ms(b"wait_ms=999999") == 30_000
    assert wait_allowance_ms(b"wait_ms=-1") == 0
    assert wait_allowance_ms(b"wait_ms=soon") == 0


def test_overload_answer_carries_the_id() -> None:
    """The server's own 503 (too many requests in flight, answered instead of the whole
    app) carries the request's sane id, or a new one."""
    app = unavailable_app("busy")
    given = call(app, "GET", "/v1/things/1", {"X-Request-Id": "busy-1"})
    assert given.status_code == 503 and given.headers["x-request-id"] == "busy-1"
    bad = call(app, "GET", "/v1/things/1", {"X-Request-Id": "bad id"})
    assert NEW_ID.fullmatch(bad.headers["x-request-id"])
