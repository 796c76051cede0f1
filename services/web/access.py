"""Request ids, the access log and slow requests, for every service.

``AccessMiddleware`` wraps a service's whole application (outside the token, secret
and method handling, so every answer passes through it: errors, 401s, 404s of
unknown routes and the 500 of an unexpected error included). Per request it:

- takes the request's id (services/request_ids.py: the ``X-Request-Id`` header when
  sane, else a new one), puts it in ``REQUEST_ID`` for the log lines and bookie calls
  made while serving, and in the scope as ``quire.request_id``;
- returns the id as ``X-Request-Id`` on the answer;
- logs one debug line per request (``quire.access``: method, path, status,
  duration_ms, request_id) and a warning ``slow request`` when the request took longer
  than ``slow_request_ms`` (0: never). A request that asks to wait (``wait_ms``, a
  long-poll) is slow only past that wait plus the threshold.

It is a bare ASGI middleware, not Starlette's ``BaseHTTPMiddleware``: the add path is
hot, and per request this costs a header scan, a context variable, two clock reads and
one wrapped ``send``. The duration runs until the answer's last byte was handed to the
server, so a long streamed answer counts whole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.limits import LAC_WAIT_MAX_MS
from services.request_ids import (
    REQUEST_ID,
    REQUEST_ID_HEADER_RAW,
    REQUEST_ID_SCOPE_KEY,
    request_id_from,
)
from services.web.limits import PATH_LOGGED_MAX_CHARS, SLOW_REQUEST_MS

log = logging.getLogger("quire.access")


def wait_allowance_ms(query_string: bytes) -> int:
    """The wait a request asked for with ``wait_ms`` (clamped like the API clamps it;
    0 when absent or not a number)."""
    if b"wait_ms" not in query_string:
        return 0
    for name, value in parse_qsl(query_string.decode("latin-1")):
        if name == "wait_ms" and value.isdigit():
            return min(int(value), LAC_WAIT_MAX_MS)
    return 0


class AccessLog:
    """A service's access lines and slow-request warnings (the module docstring), for
    the access middleware and for the protocol's lane (services/web/lane.py)."""

    def __init__(self, slow_request_ms: int = SLOW_REQUEST_MS) -> None:
        self.slow_request_ms = slow_request_ms

    def record(self, scope: Scope, status: int, duration_ms: float) -> None:
        """Log one request of ``scope`` answered with ``status`` after ``duration_ms``."""
        slow = self.slow_request_ms > 0 and duration_ms > self.slow_request_ms
        if slow:
            allowance = wait_allowance_ms(scope.get("query_string", b""))
            slow = duration_ms > self.slow_request_ms + allowance
        if not slow and not log.isEnabledFor(logging.DEBUG):
            return
        fields = {
            "method": scope["method"],
            "path": scope["path"][:PATH_LOGGED_MAX_CHARS],
            "status": status,
            "duration_ms": round(duration_ms, 3),
        }
        log.debug("request", extra={"fields": fields})
        if slow:
            fields["slow_request_ms"] = self.slow_request_ms
            log.warning("slow request", extra={"fields": fields})


class AccessMiddleware:
    """Request ids, access lines and slow-request warnings (see the module docstring).
    ``clock`` returns seconds (tests pass a fake one)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        slow_request_ms: int = SLOW_REQUEST_MS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.app = app
        self.access = AccessLog(slow_request_ms)
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = None
        for name, value in scope["headers"]:
            if name == REQUEST_ID_HEADER_RAW:
                raw = value
                break
        request_id = request_id_from(raw)
        scope[REQUEST_ID_SCOPE_KEY] = request_id
        header = (REQUEST_ID_HEADER_RAW, request_id.encode("ascii"))
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        token = REQUEST_ID.set(request_id)
        started = self.clock()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            duration_ms = (self.clock() - started) * 1000
            try:
                self.access.record(scope, status, duration_ms)
            finally:
                REQUEST_ID.reset(token)
