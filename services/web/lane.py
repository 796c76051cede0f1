"""A lane below ASGI for a service's hottest calls: the HTTP protocol hands a plain
request (head parsed, body complete) to a ``Lane`` call and writes its answer itself.

Under the application's ASGI stack (services/web/app.py's ``front`` fast paths
included), every request still pays for uvicorn's request/answer cycle: the ASGI scope
finished, a ``receive`` and two ``send`` messages as dicts, header validation, then the
proxy-header, access and methods middlewares, each with its own ``send`` wrapper. For
a single-entry add at 64 clients that was about a fifth of the gateway's event loop
(py-spy, benchmarks/README.md). A lane serves the same calls with the same answers:

- the service's ``Lane`` says which requests it takes (``take``: from the request's
  scope, with method, path, headers and client), and the call it returns turns the
  complete body into (status, body, headers);
- the protocol (services/web/server.py) offers it only a plain request: ``HTTP/1.1``,
  an origin-form path with no query, no percent-escapes and no root path, a
  ``Content-Length`` of at most ``body_max_bytes`` (no chunked body), no
  ``Expect: 100-continue``, no ``X-Forwarded-*`` header (the proxy-header middleware's
  business), no upgrade, no other request of the connection in progress or queued, and
  room under the in-flight bound. Everything else goes to the ASGI application, which
  answers it as it always did;
- the answer is written in one write, with the server's default headers (``date``,
  ``server``), ``content-length``, the call's headers and ``x-request-id``, in the
  order the ASGI path writes them; ``connection: close`` when the request asked for it
  or the server is shutting down;
- the request id and the access log are the access middleware's (``REQUEST_ID`` set
  while the call runs, services/web/access.py's ``AccessLog``); the head and body
  timers, the connection table and pipelining are the protocol's, as for any request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

# An answer: the status, the body and the headers after content-length (content-type...).
Answer = tuple[int, bytes, tuple[tuple[bytes, bytes], ...]]
LaneCall = Callable[[bytes], Awaitable[Answer]]


class Lane(Protocol):
    """The calls a service serves below ASGI (the module docstring)."""

    # Bodies up to this size may be taken (a larger one goes to the application, which
    # refuses it with its own 413).
    body_max_bytes: int

    def take(self, scope: dict[str, Any]) -> LaneCall | None:
        """The call that serves the request of ``scope`` (method, path, headers and
        client set; its body still to come), or None to leave it to the application."""
        ...


class _NoEvent:
    """What the protocol sets on a cycle when something arrives: a lane cycle waits
    for nothing (its call starts once the body is complete)."""

    __slots__ = ()

    def set(self) -> None:
        pass


_NO_EVENT = _NoEvent()


class LaneCycle:
    """The protocol's current cycle while a lane serves the request: the attributes
    uvicorn's protocol and ours read and set on a cycle, the body as it arrives, and
    the call that will serve it."""

    __slots__ = (
        "scope",
        "call",
        "keep_alive",
        "body",
        "more_body",
        "message_event",
        "disconnected",
        "response_started",
        "response_complete",
    )

    def __init__(self, scope: dict[str, Any], call: LaneCall, keep_alive: bool) -> None:
        self.scope = scope
        self.call = call
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.more_body = True
        self.message_event = _NO_EVENT
        self.disconnected = False
        self.response_started = False
        self.response_complete = False


def answer_bytes(
    answer: Answer,
    default_headers: list[tuple[bytes, bytes]],
    request_id: bytes,
    keep_alive: bool,
) -> bytes:
    """The whole HTTP/1.1 answer, head and body, as the ASGI path writes it."""
    status, body, headers = answer
    parts = [STATUS_LINE[status]]
    for name, value in default_headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"content-length: %d\r\n" % len(body))
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts += (b"x-request-id: ", request_id, b"\r\n")
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    parts += (b"\r\n", body)
    return b"".join(parts)
