"""A log stream's groups after a fence, in process: the real ``LogTarget`` and
``LogWriter`` (gateway/streams/targets.py, gateway/logs/writer.py) with real write
handles over fake bookies and an in-memory ledger store (tests/unit/ledger_client/fakes.py),
an in-memory log znode whose reads the test holds and lets go in the order it
chooses, and another gateway that recovers the log's ledger under the stream. Each
group settles its failed add on its own and appends again on the new ledger; the
records must still land in the order they were sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, cast

from gateway.logs import steps
from gateway.logs.writer import LogWriter
from gateway.logs.writers import serve_logs
from gateway.metrics import GatewayMetrics
from gateway.service import Gateway
from gateway.streams.session import StreamRecord
from gateway.streams.targets import LogTarget
from services.errors import LogNotFound, MetadataConflict, NodeNotFound
from services.protocol.logs import LogMetadata
from services.settings import GatewaySettings
from services.zk.log_store import LogStore, VersionedLog
from tests.unit.ledger_client.fakes import FakeBookies, FakeLedgerStore, make_context

POOL = ["b0:1", "b1:1", "b2:1"]
LOOP_TURNS = 200
WAIT_S = 10.0  # bound of every wait on a condition (the settle polls in real time)


class NoWatch:
    """The log znode's watch: it never fires (the fence is how the writer learns); and
    no keys saved beside the log (a new writer's window reads the ledgers, and a save
    finds the log gone)."""

    async def exists_once(self, path: str, callback: Callable[[], None]) -> bool:
        return True

    async def children(self, path: str) -> list[str]:
        raise NodeNotFound(path)

    async def create(self, path: str, data: bytes = b"", makepath: bool = False) -> None:
        raise NodeNotFound(path)


class HeldLogs:
    """One log znode in memory. While ``holding``, a read from an append's task waits
    until the test lets it go (``release``): the writer reads the log after a failed add
    to learn whether it still holds the role, so the test decides which group settles
    first."""

    def __init__(self, log: LogMetadata) -> None:
        self.current = VersionedLog(log, 0)
        self.store = NoWatch()
        self.holding = False
        self.held: dict[asyncio.Task[Any], asyncio.Future[None]] = {}

    async def get(self, name: str) -> VersionedLog:
        if name != self.current.log.name:
            raise LogNotFound(f"no log {name!r}")
        task = asyncio.current_task()
        if self.holding and task is not None:
            gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.held[task] = gate
            await gate
        return self.current

    async def compare_and_set(self, log: LogMetadata, version: int) -> VersionedLog:
        if version != self.current.version:
            raise MetadataConflict(f"log {log.name} is at {self.current.version}")
        self.current = VersionedLog(log, version + 1)
        return self.current

    def release(self, task: asyncio.Task[Any]) -> None:
        self.held.pop(task).set_result(None)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Let the loop run (real time too: settling polls the ledger) until ``condition``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def turns(count: int = LOOP_TURNS) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def positions(acks: list[str]) -> list[tuple[int, int]]:
    docs = [json.loads(ack)["position"] for ack in acks]
    return [(doc["ledger_id"], doc["entry_id"]) for doc in docs]


def records(first_seq: int, count: int) -> list[StreamRecord]:
    return [StreamRecord(seq, b"record-%d" % seq) for seq in range(first_seq, first_seq + count)]


def test_groups_settling_out_of_order_land_in_the_order_sent() -> None:
    """The records of a log stream land in the order sent, and its acknowledgements'
    positions ascend, when the ledger is fenced under two groups in flight and the
    later group settles first: it appends on the new ledger only after the earlier one,
    and so does a group sent once the writer rolled."""

    async def body() -> None:
        bookies, ledgers = FakeBookies(POOL), FakeLedgerStore()
        gw = Gateway.build(GatewaySettings(), GatewayMetrics(), make_context(bookies, ledgers))
        other = Gateway.build(  # another gateway
            GatewaySettings(), GatewayMetrics(), make_context(bookies, ledgers)
        )
        logs = HeldLogs(LogMetadata("s"))
        serve_logs(gw, cast(LogStore, logs))
        writer: LogWriter = await gw.logs.acquire("s")
        target = LogTarget(gw, "s", writer, lambda _: None)
        first_ledger = writer.ledger_id

        acked_before = await (await target.submit(records(0, 2)))
        assert positions(acked_before) == [(first_ledger, 0), (first_ledger, 1)]

        # Two groups in flight (fed, held by the bookies) when the fence lands.
        gates = [asyncio.Event() for _ in POOL]
        for bookie, gate in zip(bookies.bookies.values(), gates, strict=True):
            bookie.gate = gate
        earlier = await target.submit(records(2, 3))
        later = await target.submit(records(5, 3))
        for bookie in bookies.bookies.values():
            bookie.fenced.add(first_ledger)
        logs.holding = True
        for gate in gates:
            gate.set()
        await steps.close_for_good(other, first_ledger)  # recovered: CLOSED at entry 1

        tasks = cast(list[asyncio.Task[list[str]]], [earlier, later])
        await until(lambda: all(t in logs.held for t in tasks), "both groups to settle")
        logs.holding = False
        logs.release(tasks[1])  # the later group learns first that it still writes
        await until(lambda: writer.ledger_id != first_ledger, "the roll")
        await turns()
        # The stream's next group, sent while the earlier one has not appended again.
        after_roll = asyncio.ensure_future(target.submit(records(8, 2)))
        await turns()
        logs.release(tasks[0])
        acks = [*await earlier, *await later, *await (await after_roll)]

        sent = positions(acked_before + acks)
        assert sent == sorted(sent), sent
        second_ledger = writer.ledger_id
        assert [p for p in sent if p[0] == second_ledger] == [(second_ledger, i) for i in range(8)]
        await gw.aclose()
        await other.aclose()

    asyncio.run(body())
