"""Reading request bodies: bounded, and told apart as JSON or raw."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from fastapi import Request

from services.budget import BudgetShare, ByteBudget
from services.errors import InvalidArgument, PayloadTooLarge
from services.limits import SMALL_BODY_MAX_BYTES
from services.web.limits import CONTENT_LENGTH_DIGITS_MAX

# The scope extension through which an application stops its request's body time-out
# while it waits for something other than the client (``BodyTimer``).
BODY_TIMER = "quire.body_timer"


def content_length(declared: str, limit: int) -> int:
    """A request's declared Content-Length: 400 unless it is ASCII digits (``str.isdigit``
    alone accepts "²", which int() refuses), 413 when over ``limit``.

    The HTTP parser (llhttp) already refuses such headers; this keeps the rule in one
    place and never raises anything but those two errors, whatever the text."""
    if not (declared.isascii() and declared.isdigit()):
        raise InvalidArgument("bad Content-Length")
    digits = declared.lstrip("0") or "0"
    if len(digits) > CONTENT_LENGTH_DIGITS_MAX or int(digits) > limit:
        raise PayloadTooLarge(
            f"body of {digits[:CONTENT_LENGTH_DIGITS_MAX]}... bytes over the limit of {limit}"
            if len(digits) > CONTENT_LENGTH_DIGITS_MAX
            else f"body of {digits} bytes over the limit of {limit}"
        )
    return int(digits)


async def read_body(request: Request, limit: int, share: BudgetShare | None = None) -> bytes:
    """The whole request body, refused with 413 as soon as it passes ``limit`` bytes.
    With a ``share`` of a byte budget (services/budget.py), budget is taken for each
    piece as it arrives; while it waits, the server stops reading the socket."""
    declared = request.headers.get("content-length")
    if declared is not None:
        content_length(declared, limit)
        if share is None:
            return await request.body()
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(f"body over the limit of {limit} bytes")
        if share is not None and chunk:
            await take_untimed(share, len(chunk), request.scope)
        chunks.append(chunk)
    return b"".join(chunks)


class BodyTimer:
    """The body time-out of one request on the ASGI path, as its application sees it
    (``scope["extensions"][BODY_TIMER]``, set by services/web/server.py's protocol):
    ``pause`` it while the application waits for something other than the client (a
    body budget: its socket is not read meanwhile), ``resume`` it with the time that was
    left. Only while that request's body is still being read; else both do nothing."""

    __slots__ = ("_protocol", "_cycle")

    def __init__(self, protocol: Any, cycle: Any) -> None:
        self._protocol = protocol
        self._cycle = cycle

    def pause(self) -> float | None:
        """Stop the time-out; the seconds it had left (None: it was not running)."""
        left: float | None = self._protocol.pause_body_timer(self._cycle)
        return left

    def resume(self, left: float | None) -> None:
        """Start it again with ``left`` seconds (``pause``'s answer)."""
        self._protocol.resume_body_timer(self._cycle, left)


async def take_untimed(share: BudgetShare, size: int, scope: Mapping[str, Any]) -> None:
    """Take budget for ``size`` bytes of a request's body; while it waits, the request's
    body time-out stops (``BodyTimer``, when the server set one): the wait is the
    server's, not the client's."""
    if share.try_take(size):
        return
    timer = scope.get("extensions", {}).get(BODY_TIMER)
    left = timer.pause() if timer is not None else None
    try:
        await share.take(size)
    finally:
        if timer is not None:
            timer.resume(left)


@contextmanager
def body_share(request: Request) -> Iterator[BudgetShare | None]:
    """A share of the application's ``body_budget`` (``app.state``; None when it has
    none) for one request, given back when the request is done with its body."""
    budget: ByteBudget | None = getattr(request.app.state, "body_budget", None)
    if budget is None:
        yield None
        return
    share = budget.open()
    try:
        yield share
    finally:
        share.close()


async def read_small_body(request: Request, limit: int = SMALL_BODY_MAX_BYTES) -> bytes:
    """``read_body`` of a small JSON body (a create's, an attach's), under the
    application's ``body_budget`` as the large ones."""
    with body_share(request) as share:
        return await read_body(request, limit, share)


def is_json(request: Request) -> bool:
    """docs/api.md: a request with ``Content-Type: application/json`` (any parameters) is JSON."""
    return is_json_type(request.headers.get("content-type"))


def is_json_type(content_type: str | None) -> bool:
    """``is_json`` of a Content-Type header's value (the gateway's fast path has no Request)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"
