"""Single records forwarded together (docs/logs.md "Any gateway appends").

A gateway that forwards appends pays a request of its own for each one, and on the
writer's gateway each is an append of its own. Single records without an
``Idempotency-Key`` or an ``Expected-Last-Position`` are independent of one another, so
those bound for the same gateway, log and token are forwarded together: a record is
sent at once while fewer than ``FORWARD_GROUPS_IN_FLIGHT_MAX`` groups are in flight for
them, else it waits for one to come back and leaves with the others that waited, as
one batch (at most ``FORWARD_GROUP_RECORDS_MAX`` records and about
``FORWARD_GROUP_BYTES_MAX`` bytes). Group commit, as the bookie's journal does it: a
lone record is never held back, and under load the groups grow.

A batch lands whole in one ledger at consecutive positions (docs/api.md), so the i-th
record of a group is answered the batch's first position plus i, as the writer would
have answered it alone; an error, or the outcome being unknown, is every record's.
Records with a key or a condition, and batches, are forwarded one request each: a key
names one request, a condition holds for one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import pybase64
from prometheus_client import Counter

from gateway.limits import (
    FORWARD_GROUP_BYTES_MAX,
    FORWARD_GROUP_RECORDS_MAX,
    FORWARD_GROUPS_IN_FLIGHT_MAX,
)
from services.errors import QuireError, Unavailable, error_from_json

# Forward a body to (gateway, log): the writer's answer, None to route again.
Send = Callable[[str, str, bytes, bool, str | None], Awaitable[dict[str, Any] | None]]
_Lane = tuple[str, str, str | None]  # gateway, log, the callers' token


class _Queue:
    __slots__ = ("records", "in_flight")

    def __init__(self) -> None:
        self.records: deque[tuple[bytes, asyncio.Future[dict[str, Any] | None]]] = deque()
        self.in_flight = 0


class RecordGroups:
    """The single records waiting to be forwarded, by gateway, log and token."""

    def __init__(self, send: Send, records: Counter) -> None:
        self._send = send
        self._records = records  # client records sent (several per request)
        self._queues: dict[_Lane, _Queue] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def forward(
        self, target: str, name: str, payload: bytes, authorization: str | None
    ) -> dict[str, Any] | None:
        """Forward one raw record to ``target``, the gateway writing ``name``, with the
        others going there: its answer (``{"position"}``), or None to route it again."""
        lane = (target, name, authorization)
        queue = self._queues.get(lane)
        if queue is None:
            queue = self._queues[lane] = _Queue()
        answered: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        queue.records.append((payload, answered))
        self._pump(lane, queue)
        return await answered

    def _pump(self, lane: _Lane, queue: _Queue) -> None:
        while queue.records and queue.in_flight < FORWARD_GROUPS_IN_FLIGHT_MAX:
            group = _take(queue)
            if not group:
                break
            queue.in_flight += 1
            task = asyncio.ensure_future(self._run(lane, queue, group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(
        self,
        lane: _Lane,
        queue: _Queue,
        group: list[tuple[bytes, asyncio.Future[dict[str, Any] | None]]],
    ) -> None:
        target, name, authorization = lane
        try:
            self._records.inc(len(group))
            if len(group) == 1:
                body, batch = group[0][0], False
            else:
                body, batch = _batch_body([payload for payload, _ in group]), True
            try:
                answer = await self._send(target, name, body, batch, authorization)
            except QuireError as exc:
                for _, answered in group:
                    _settle_error(answered, error_from_json(exc.to_json()))
                return
            except asyncio.CancelledError:
                for _, answered in group:
                    _settle_error(answered, Unavailable("the gateway is stopping"))
                raise
            for index, (_, answered) in enumerate(group):
                if not answered.done():
                    answered.set_result(_member(answer, index, batch))
        finally:
            queue.in_flight -= 1
            if not queue.records and queue.in_flight == 0:
                if self._queues.get(lane) is queue:
                    del self._queues[lane]
            else:
                self._pump(lane, queue)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _take(queue: _Queue) -> list[tuple[bytes, asyncio.Future[dict[str, Any] | None]]]:
    """The next group: the records that waited, up to the bounds (the first always);
    records whose callers left are dropped unsent."""
    group: list[tuple[bytes, asyncio.Future[dict[str, Any] | None]]] = []
    size = 0
    records = queue.records
    while records and len(group) < FORWARD_GROUP_RECORDS_MAX:
        payload, answered = records[0]
        if answered.done():  # cancelled while it waited
            records.popleft()
            continue
        if group and size + len(payload) > FORWARD_GROUP_BYTES_MAX:
            break
        records.popleft()
        group.append((payload, answered))
        size += len(payload)
    return group


def _batch_body(payloads: list[bytes]) -> bytes:
    """``{"entries": [base64...]}`` of ``payloads``, built without ``json.dumps``."""
    return b'{"entries":["' + b'","'.join(map(pybase64.b64encode, payloads)) + b'"]}'


def _member(answer: dict[str, Any] | None, index: int, batch: bool) -> dict[str, Any] | None:
    """The answer of the ``index``-th record of a group from the group's answer."""
    if answer is None or not batch:
        return answer
    first = answer["first_position"]
    return {"position": {"ledger_id": first["ledger_id"], "entry_id": first["entry_id"] + index}}


def _settle_error(answered: asyncio.Future[dict[str, Any] | None], error: QuireError) -> None:
    if not answered.done():
        answered.set_exception(error)
