"""Acks to a durable cursor (gateway/logs/cursors.py ``Cursors.ack``; docs/logs.md
"Durable cursors"), in process over an in-memory cursor znode: acks to one cursor are
merged (the highest wins) into at most one write per ``cursor_flush_ms``, each ack is
answered only once a write covering it is done, and the cursor only moves forward, also
past a higher position another gateway stored meanwhile."""

from __future__ import annotations

import asyncio
import time
from typing import cast

import pytest

from gateway.logs.cursors import serve_cursors
from gateway.logs.writers import serve_logs
from gateway.metrics import GatewayMetrics
from gateway.service import Gateway
from services.errors import CursorNotFound, InvalidArgument, MetadataConflict, Unavailable
from services.protocol.cursors import CursorState
from services.protocol.logs import LogMetadata, Position
from services.settings import GatewaySettings
from services.zk.cursor_store import CursorStore, VersionedCursor
from services.zk.log_store import LogStore
from tests.unit.gateway.test_stream_log_order import POOL, HeldLogs, until
from tests.unit.ledger_client.fakes import FakeBookies, FakeLedgerStore, make_context

FLUSH_MS = 60


class MemoryCursor:
    """Cursor ``c`` of log ``s`` in memory. ``gate`` (when set) holds each write until
    the test opens it; ``elsewhere`` is stored, as by another gateway, just before the
    next write, which then conflicts; while ``broken`` a write fails as a bug would."""

    def __init__(self) -> None:
        self.current = VersionedCursor(CursorState(None, None, 0), 0)
        self.writes: list[tuple[float, Position | None]] = []
        self.gate: asyncio.Event | None = None
        self.elsewhere: Position | None = None
        self.broken = False

    async def get(self, log: str, name: str) -> VersionedCursor:
        if name != "c":
            raise CursorNotFound(f"log {log} has no cursor {name!r}")
        return self.current

    async def compare_and_set(
        self, log: str, name: str, cursor: CursorState, version: int
    ) -> VersionedCursor:
        if self.gate is not None:
            await self.gate.wait()
        if self.broken:
            raise RuntimeError("a bug in the store")
        if self.elsewhere is not None:
            moved = self.current.cursor.acked(self.elsewhere, 1)
            self.current, self.elsewhere = VersionedCursor(moved, self.current.version + 1), None
        if version != self.current.version:
            raise MetadataConflict(f"cursor {name} is at {self.current.version}")
        self.current = VersionedCursor(cursor, version + 1)
        self.writes.append((time.monotonic(), cursor.position))
        return self.current


def gateway(memory: MemoryCursor) -> Gateway:
    settings = GatewaySettings(cursor_flush_ms=FLUSH_MS)
    gw = Gateway.build(
        settings, GatewayMetrics(), make_context(FakeBookies(POOL), FakeLedgerStore())
    )
    serve_logs(gw, cast(LogStore, HeldLogs(LogMetadata("s", ledgers=(5, 6, 7)))))
    return serve_cursors(gw, cast(CursorStore, memory))


def test_acks_are_merged_answered_once_written_and_only_move_forward() -> None:
    """The first ack is written at once; the acks arriving during its write wait, none
    answered before its write, and go in ONE write of the highest, a flush period later.
    Each answer says whether its position was past the one stored before; an older ack
    afterwards writes nothing and answers moved false."""

    async def body() -> None:
        memory = MemoryCursor()
        gw = gateway(memory)
        memory.gate = asyncio.Event()
        first = asyncio.create_task(gw.cursors.ack("s", "c", Position(5, 1)))
        await until(lambda: bool(gw.cursors._pending), "the first write under way")
        later = [
            asyncio.create_task(gw.cursors.ack("s", "c", Position(*p)))
            for p in ((5, 3), (6, 0), (5, 2))
        ]
        await until(
            lambda: waiting(gw) == [Position(5, 3), Position(6, 0), Position(5, 2)],
            "the later acks waiting behind the first write",
        )
        assert not first.done() and not any(t.done() for t in later)  # nothing written yet
        memory.gate.set()
        state, moved = await first
        assert (state.position, moved) == (Position(5, 1), True)
        answers = await asyncio.gather(*later)
        assert [(s.position, m) for s, m in answers] == [(Position(6, 0), True)] * 3
        assert [p for _, p in memory.writes] == [Position(5, 1), Position(6, 0)]
        assert memory.writes[1][0] - memory.writes[0][0] >= FLUSH_MS / 1000 * 0.9

        state, moved = await gw.cursors.ack("s", "c", Position(5, 7))
        assert (state.position, moved) == (Position(6, 0), False)
        assert len(memory.writes) == 2  # an older ack writes nothing
        await gw.aclose()

    asyncio.run(body())


def test_a_higher_position_stored_by_another_gateway_is_kept() -> None:
    """The write is a compare-and-set: when another gateway stored 7:0 meanwhile, the
    ack of 6:0 reads again and leaves 7:0 (moved false)."""

    async def body() -> None:
        memory = MemoryCursor()
        gw = gateway(memory)
        memory.elsewhere = Position(7, 0)
        state, moved = await gw.cursors.ack("s", "c", Position(6, 0))
        assert (state.position, moved) == (Position(7, 0), False)
        assert memory.current.cursor.position == Position(7, 0)
        await gw.aclose()

    asyncio.run(body())


def test_an_ack_outside_the_log_or_to_no_cursor_is_refused() -> None:
    """A position in a ledger the log does not list is 400 and is not merged with the
    others; an unknown cursor is cursor_not_found (docs/api.md "Logs: cursors")."""

    async def body() -> None:
        memory = MemoryCursor()
        gw = gateway(memory)
        bad = asyncio.create_task(gw.cursors.ack("s", "c", Position(99, 0)))
        good = asyncio.create_task(gw.cursors.ack("s", "c", Position(5, 0)))
        with pytest.raises(InvalidArgument):
            await bad
        assert (await good)[0].position == Position(5, 0)
        with pytest.raises(CursorNotFound):
            await gw.cursors.ack("s", "other", Position(5, 0))
        with pytest.raises(InvalidArgument):
            await gw.cursors.ack("s", "a/b", Position(5, 0))
        await gw.aclose()

    asyncio.run(body())


def test_a_caller_gone_or_a_broken_write_leaves_no_ack_unanswered() -> None:
    """A caller that goes away while its ack waits changes nothing for the others (its
    position is still merged into the write); a write that breaks off with an unexpected
    error answers its acks 503 unavailable, and the next ack is written as usual."""

    async def body() -> None:
        memory = MemoryCursor()
        gw = gateway(memory)
        memory.gate = asyncio.Event()
        first = asyncio.create_task(gw.cursors.ack("s", "c", Position(5, 1)))
        await until(lambda: bool(gw.cursors._pending), "the first write under way")
        gone = asyncio.create_task(gw.cursors.ack("s", "c", Position(6, 0)))
        other = asyncio.create_task(gw.cursors.ack("s", "c", Position(5, 3)))
        await until(
            lambda: waiting(gw) == [Position(6, 0), Position(5, 3)],
            "both acks waiting behind the first write",
        )
        gone.cancel()
        memory.gate.set()
        assert (await first)[0].position == Position(5, 1)
        assert await other == (memory.current.cursor, True)
        assert memory.current.cursor.position == Position(6, 0)
        memory.broken = True
        with pytest.raises(Unavailable):
            await gw.cursors.ack("s", "c", Position(7, 0))
        memory.broken = False
        await until(lambda: not gw.cursors._pending, "the flush task to end")
        assert (await gw.cursors.ack("s", "c", Position(7, 0)))[1] is True
        await gw.aclose()

    asyncio.run(body())


def waiting(gw: Gateway) -> list[Position]:
    """The positions of cursor ``c``'s acks waiting for the next write."""
    pending = gw.cursors._pending.get(("s", "c"))
    return [position for position, _ in pending.acks] if pending is not None else []
