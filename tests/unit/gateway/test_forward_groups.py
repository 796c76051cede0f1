"""Single records forwarded together (gateway/logs/grouping.py), against a fake writer
gateway: a lone record goes at once and alone; records arriving while groups are in
flight leave together, each answered its own position; an error is every record's;
a record whose caller left is not sent."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pybase64
import pytest
from prometheus_client import CollectorRegistry, Counter

from gateway.limits import FORWARD_GROUPS_IN_FLIGHT_MAX
from gateway.logs.grouping import RecordGroups
from services.errors import QuorumTimeout


class FakeWriter:
    """Answers each forwarded body when the test releases it; keeps what it got."""

    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []
        self.release = asyncio.Event()
        self.error: Exception | None = None
        self.next_entry = 0

    async def send(
        self, target: str, name: str, body: bytes, batch: bool, token: str | None
    ) -> dict[str, Any] | None:
        records = [pybase64.b64decode(e) for e in json.loads(body)["entries"]] if batch else [body]
        self.sent.append(records)
        await self.release.wait()
        if self.error is not None:
            raise self.error
        first = self.next_entry
        self.next_entry += len(records)
        position = {"ledger_id": 7, "entry_id": first}
        if batch:
            last = {"ledger_id": 7, "entry_id": first + len(records) - 1}
            return {"first_position": position, "last_position": last}
        return {"position": position}


async def turns() -> None:
    """Let the callers queue their records and the groups' tasks start."""
    for _ in range(3):
        await asyncio.sleep(0)


def groups(writer: FakeWriter) -> RecordGroups:
    return RecordGroups(writer.send, Counter("c", "c", registry=CollectorRegistry()))


def test_records_waiting_behind_groups_in_flight_leave_together() -> None:
    async def body() -> None:
        writer = FakeWriter()
        forward = groups(writer)
        calls = [
            asyncio.ensure_future(forward.forward("g:1", "log", b"r%d" % i, None))
            for i in range(10)
        ]
        await turns()
        # The first records go at once, one request each, until the bound; the rest wait.
        assert writer.sent == [[b"r%d" % i] for i in range(FORWARD_GROUPS_IN_FLIGHT_MAX)]
        writer.release.set()
        answers = await asyncio.gather(*calls)
        assert writer.sent[FORWARD_GROUPS_IN_FLIGHT_MAX:] == [
            [b"r%d" % i for i in range(FORWARD_GROUPS_IN_FLIGHT_MAX, 10)]
        ]
        entries = [a["position"]["entry_id"] for a in answers if a is not None]
        assert sorted(entries) == list(range(10))

    asyncio.run(body())


def test_an_error_is_every_records_and_a_record_whose_caller_left_is_not_sent() -> None:
    async def body() -> None:
        writer = FakeWriter()
        forward = groups(writer)
        first = [
            asyncio.ensure_future(forward.forward("g:1", "log", b"x%d" % i, None))
            for i in range(FORWARD_GROUPS_IN_FLIGHT_MAX)
        ]
        waiting = [
            asyncio.ensure_future(forward.forward("g:1", "log", b"w%d" % i, None)) for i in range(3)
        ]
        await turns()
        waiting[1].cancel()
        writer.error = QuorumTimeout("lost")
        writer.release.set()
        for call in [*first, waiting[0], waiting[2]]:
            with pytest.raises(QuorumTimeout):
                await call
        assert [b"w1"] not in writer.sent and [b"w0", b"w2"] in writer.sent

    asyncio.run(body())
