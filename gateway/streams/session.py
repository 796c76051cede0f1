"""Streaming appends: many records in flight on one WebSocket connection.

The message protocol (docs/streaming.md; the routes are in
``gateway/streams/routes.py``, the targets in ``gateway/streams/targets.py``):

- After the connection is authorized (the token and the ledger password in the
  headers, or in a first text message ``{"token": "...", "password": "..."}``), the
  gateway sends ``{"credits": N}``: the client may have N records in flight (sent and
  not acknowledged). Every acknowledgement gives one credit back; the gateway may also
  send ``{"credits": k}`` later to grant k more.
- The client sends each record as one binary message. On a log, a text message
  ``{"key": "..."}`` sets the Idempotency-Key of the next record.
- The gateway answers every record, in the order they were sent, once it has its ack
  quorum (with every record before it): ``{"seq", "entry_id", "last_add_confirmed"}``
  on a ledger, ``{"seq", "position": {"ledger_id", "entry_id"}}`` on a log, where
  ``seq`` counts the stream's records from 0.
- ``{"end": true}`` from the client: the gateway reads nothing more, acknowledges what
  it has, and closes with 1000.
- Any error: ``{"error": CODE, "message": TEXT}`` (docs/api.md's codes), then the gateway
  closes with ``4000 + HTTP status`` (4400, 4401, 4404, 4409, 4413, 4503, 4504; 1011 for
  a bug). Records sent and not acknowledged by then have an unknown outcome, as an add
  whose answer was lost: a log append retried with its key is answered once.
- The gateway shuts down (SIGTERM): it takes no more records, acknowledges those it
  took, and closes with 1012 (service restart), as an HTTP request in progress is still
  answered; after ``DRAIN_WAIT_S`` (services/web/websocket.py) the connection is closed
  with 1012 whatever is left. Records after the last acknowledgement: unknown outcome.

How one stream runs (``StreamSession``): three tasks share its state. The reader takes
messages from the connection into ``pending`` (it refuses a record past the credits and
stops reading while the records in flight hold ``bytes_in_flight_max``: the server then
reads no more from the socket, so memory stays bounded even for a client that ignores
its credits; and it takes each record's bytes from the gateway's budget of all streams,
``streams_bytes_in_flight_max`` (services/budget.py), waiting in turn while that is
spent, so many streams together stay bounded too: by the budget, one stream's bound (the
oldest stream never waits) and one message per connection); the submitter hands groups
of pending records to the target in order and each group's future to ``flying`` (a group
is one add: the records read while the last group was being submitted, so the write
handle sees batches when records come fast); the acknowledger awaits ``flying`` in order
and sends the acknowledgements. The first error ends all three.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.http.json_input import parse_json
from gateway.limits import (
    STREAM_AUTH_WAIT_MS,
    STREAM_CONTROL_MAX_BYTES,
    STREAM_GROUP_BYTES_MAX,
    STREAM_GROUP_ENTRIES_MAX,
)
from services.budget import ByteBudget
from services.errors import InvalidArgument, PayloadTooLarge, QuireError, Unauthorized
from services.limits import ENTRY_SIZE_MAX_BYTES
from services.protocol.log_records import check_key
from services.web.websocket import DRAIN, send_texts

log = logging.getLogger(__name__)


CLOSE_NORMAL = 1000
CLOSE_INTERNAL = 1011
CLOSE_SERVICE_RESTART = 1012  # the gateway shuts down (its records acknowledged first)


def close_code(error: QuireError) -> int:
    """The WebSocket close code of an error: 4000 + its HTTP status (1011: our bug)."""
    status = error.http_status
    return 4000 + status if 400 <= status < 600 else CLOSE_INTERNAL


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """One record a stream's client sent: its number in the stream, its bytes and, on a
    log, its Idempotency-Key."""

    seq: int
    payload: bytes
    key: str | None = None


class Target(Protocol):
    """Where a stream's records go: a ledger's write handle or a log's writer."""

    accepts_keys: bool

    async def submit(self, records: list[StreamRecord]) -> asyncio.Future[list[str]]:
        """Hand ``records`` to the write path; return once they are fed in order (the
        next group's entries come after theirs), with the future of their
        acknowledgements (one JSON text per record, in order: ``ledger_ack_json``,
        ``log_ack_json``)."""

    async def late_auth(self, doc: dict[str, Any]) -> None:
        """Check an auth message that came when the headers were enough (401)."""


def ledger_ack_json(seq: int, entry_id: int, lac: int) -> str:
    """A ledger stream's acknowledgement, as ``json.dumps`` with compact separators
    writes it, built with one format: every record is acknowledged, and ``json.dumps``
    of a small dict cost about ten times as much (benchmarks/README.md, "Measured choices")."""
    return f'{{"seq":{seq:d},"entry_id":{entry_id:d},"last_add_confirmed":{lac:d}}}'


def log_ack_json(seq: int, ledger_id: int, entry_id: int) -> str:
    """A log stream's acknowledgement (as ``ledger_ack_json``)."""
    return f'{{"seq":{seq:d},"position":{{"ledger_id":{ledger_id:d},"entry_id":{entry_id:d}}}}}'


def take_group(pending: collections.deque[StreamRecord]) -> list[StreamRecord]:
    """The next group of records (one add) taken from ``pending`` (not empty): a record
    with an idempotency key alone (the key is the whole append's), else the keyless
    records in a row, up to ``STREAM_GROUP_ENTRIES_MAX`` records and
    ``STREAM_GROUP_BYTES_MAX`` bytes."""
    first = pending.popleft()
    group, size = [first], len(first.payload)
    if first.key is not None:
        return group
    while pending and len(group) < STREAM_GROUP_ENTRIES_MAX and pending[0].key is None:
        size += len(pending[0].payload)
        if size > STREAM_GROUP_BYTES_MAX:
            break
        group.append(pending.popleft())
    return group


class _End(enum.Enum):
    ENDED = "ended"  # the client sent {"end": true}, or the gateway shuts down
    GONE = "gone"  # the client went away


class Draining(Exception):
    """The gateway shuts down before the stream started (``quire.websocket.drain``)."""


async def receive_auth(ws: WebSocket) -> dict[str, Any]:
    """The client's auth message ``{"token"?: str, "password"?: str}``, awaited for
    ``STREAM_AUTH_WAIT_MS``: 401 when it does not come in time or is not one."""
    try:
        async with asyncio.timeout(STREAM_AUTH_WAIT_MS / 1000):
            message = await ws.receive()
    except TimeoutError:
        raise _unauthorized(f"no auth message within {STREAM_AUTH_WAIT_MS} ms") from None
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", CLOSE_NORMAL))
    if message.get(DRAIN):
        raise Draining
    doc = auth_doc(message.get("text"))
    if doc is None:
        raise _unauthorized("the first message must be the auth message")
    return doc


def auth_doc(text: str | None) -> dict[str, Any] | None:
    """``text`` as an auth message, or None when it is not one."""
    if text is None or len(text) > STREAM_CONTROL_MAX_BYTES:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not doc or not set(doc) <= {"token", "password"}:
        return None
    if not all(isinstance(v, str) for v in doc.values()):
        return None
    return doc


def _unauthorized(why: str) -> QuireError:
    return Unauthorized(f"{why}: send the API token (and the ledger password) in the "
                        'headers or first, as {"token": "...", "password": "..."}')  # fmt: skip


class StreamSession:
    """One authorized stream to ``target`` (see the module docstring)."""

    def __init__(
        self,
        ws: WebSocket,
        target: Target,
        credits: int,
        bytes_in_flight_max: int,
        budget: ByteBudget | None = None,
    ) -> None:
        """``budget``: the gateway's, shared by all its streams (None: this one only)."""
        self.ws = ws
        self.target = target
        self.credits = credits
        self.bytes_in_flight_max = bytes_in_flight_max
        if budget is None:
            budget = ByteBudget(bytes_in_flight_max)
        self.share = budget.open()
        self.pending: collections.deque[StreamRecord] = collections.deque()
        self.flying: collections.deque[tuple[list[StreamRecord], asyncio.Future[list[str]]]] = (
            collections.deque()
        )
        self.unacked = 0  # records read and not acknowledged (credits in use)
        self.bytes_in_flight = 0
        self.next_seq = 0
        self.next_key: str | None = None
        self.ended = False
        self.draining = False  # the gateway shuts down: no more records are taken
        self.controls_seen = 0
        self._changed = asyncio.Event()  # any of the above changed

    async def run(self) -> None:
        """Serve the stream until the client ends it, goes away, or an error; close it.
        Its share of the budget is given back however it ends."""
        try:
            outcome = await self._serve()
        finally:
            self.share.close()
        await self._finish(outcome)

    async def _serve(self) -> _End | BaseException | None:
        await self._send({"credits": self.credits})
        acknowledger = asyncio.create_task(self._acknowledge())
        reader = asyncio.create_task(self._read())
        tasks = {reader, asyncio.create_task(self._submit()), acknowledger}
        outcome: _End | BaseException | None = None
        try:
            while outcome is None and tasks:
                done, tasks = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    error = task.exception()
                    if error is not None:
                        outcome = error
                        break
                    result = task.result()
                    # The reader ends on {"end": true}; the stream ends when the last
                    # acknowledgement went.
                    if result is _End.GONE or (result is _End.ENDED and task is acknowledger):
                        outcome = result
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return outcome

    async def _finish(self, outcome: _End | BaseException | None) -> None:
        if outcome is _End.GONE or isinstance(outcome, WebSocketDisconnect):
            return
        if outcome is _End.ENDED or outcome is None:
            if self.draining:
                await self._close(CLOSE_SERVICE_RESTART, "service restart")
            else:
                await self._close(CLOSE_NORMAL, "end")
            return
        await send_error(self.ws, outcome)

    # ------------------------------------------------------------ the three tasks

    async def _read(self) -> _End:
        while True:
            while self.bytes_in_flight >= self.bytes_in_flight_max and not self.draining:
                await self._wait_change()
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return _End.GONE
            if self.draining:
                continue  # not taken, never acknowledged; read on to see the client go
            if message.get(DRAIN):
                # The acknowledger ends the stream once what was taken is acknowledged.
                self.draining = self.ended = True
                self._changed.set()
                continue
            data = message.get("bytes")
            if data is not None:
                if not self.share.try_take(len(data)):
                    await self.share.take(len(data))  # in turn, while all streams' is spent
                self._take_record(data)
            elif await self._take_control(message.get("text")):
                return _End.ENDED

    def _take_record(self, data: bytes) -> None:
        if len(data) > ENTRY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(f"record {self.next_seq} of {len(data)} bytes over "
                                  f"{ENTRY_SIZE_MAX_BYTES}")  # fmt: skip
        if self.unacked >= self.credits:
            raise InvalidArgument(f"record {self.next_seq} sent without a credit "
                                  f"({self.credits} records in flight at most)")  # fmt: skip
        self.pending.append(StreamRecord(self.next_seq, data, self.next_key))
        self.next_seq += 1
        self.next_key = None
        self.unacked += 1
        self.bytes_in_flight += len(data)
        self._changed.set()

    async def _take_control(self, text: str | None) -> bool:
        """Apply a text message; True when it ends the stream."""
        first = self.next_seq == 0 and self.controls_seen == 0
        self.controls_seen += 1
        if text is None or len(text) > STREAM_CONTROL_MAX_BYTES:
            raise InvalidArgument(f"a text message holds at most {STREAM_CONTROL_MAX_BYTES} "
                                  "bytes of JSON")  # fmt: skip
        if first:
            auth = auth_doc(text)
            if auth is not None:
                await self.target.late_auth(auth)
                return False
        doc = parse_json(text.encode("utf-8", "surrogatepass"))
        if not isinstance(doc, dict) or len(doc) != 1:
            raise InvalidArgument('a text message is {"key": "..."} or {"end": true}')
        if doc.get("end") is True:
            if self.next_key is not None:
                raise InvalidArgument("the stream ended after a key with no record")
            self.ended = True
            self._changed.set()
            return True
        key = doc.get("key")
        if isinstance(key, str) and self.target.accepts_keys:
            if self.next_key is not None:
                raise InvalidArgument("two keys in a row: a key applies to the next record")
            self.next_key = check_key(key)
            return False
        if "key" in doc and not self.target.accepts_keys:
            raise InvalidArgument("idempotency keys are for log streams")
        raise InvalidArgument('a text message is {"key": "..."} or {"end": true}')

    async def _submit(self) -> None:
        while True:
            while not self.pending:
                await self._wait_change()
            group = take_group(self.pending)
            future = await self.target.submit(group)
            self.flying.append((group, future))
            self._changed.set()

    async def _acknowledge(self) -> _End:
        # A group's acknowledgements leave in one message to the server when it can
        # take them so (services/web/websocket.py), else one by one.
        send_many, send_text = send_texts(self.ws), self.ws.send_text
        while True:
            while not self.flying:
                if self.ended and self.unacked == 0:
                    return _End.ENDED
                await self._wait_change()
            group, future = self.flying[0]
            acks = await future
            self.flying.popleft()
            if len(acks) != len(group):
                raise RuntimeError(f"{len(acks)} acknowledgements for {len(group)} records")
            self.unacked -= len(group)
            size = sum(len(record.payload) for record in group)
            self.bytes_in_flight -= size
            self.share.give(size)
            if send_many is not None:
                await send_many(acks)
            else:
                for ack in acks:
                    await send_text(ack)
            self._changed.set()

    # ------------------------------------------------------------ helpers

    async def _wait_change(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    async def _send(self, doc: dict[str, Any]) -> None:
        await self.ws.send_text(json.dumps(doc, separators=(",", ":")))

    async def _close(self, code: int, reason: str) -> None:
        try:
            await self.ws.close(code, reason)
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client is gone already


async def send_error(ws: WebSocket, error: BaseException) -> None:
    """Send the error message and close with its code (the client may be gone)."""
    if not isinstance(error, QuireError):
        log.error("a stream failed", exc_info=error)
        code, doc = CLOSE_INTERNAL, {"error": "internal", "message": "internal error"}
    else:
        code, doc = close_code(error), error.to_json()
    try:
        await ws.send_text(json.dumps(doc, separators=(",", ":")))
        await ws.close(code, str(doc["error"]))
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


def retrieve(future: asyncio.Future[Any]) -> None:
    """A done-callback that retrieves a future's error (the stream may have stopped
    awaiting it), so that asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()
