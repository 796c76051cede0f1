"""Durable cursors of logs (docs/logs.md "Durable cursors"; docs/api.md "Logs: cursors"):
where a new cursor starts, its lag, the start of a read through it, and the acks that
move it.

Acks (``Cursors.ack``). Acks to one cursor on this gateway are merged: the first ack
after a quiet spell is written at once; acks arriving while a write is under way, or
within ``--cursor-flush-ms`` after it, wait and go together in the next write, which
stores the highest of them. A write is a compare-and-set on the cursor's znode: it
reads the stored position and writes only a higher one, so a position stored by
another gateway is never moved back, and a conflict reads again. Each ack is answered
once the write that covers it is done (ZooKeeper acknowledged it: it survives this
gateway's kill and a ZooKeeper leader change), with ``moved`` false when its position
was at or below the position stored before that write. So at most one write per
cursor per gateway per ``--cursor-flush-ms`` (plus the write's own round trip), and no
acknowledged ack is ever lost; the price is an ack's wait of up to one flush period.

An ack's position must be in a ledger the log lists (checked against the log read
once per write) and, in a CLOSED ledger, not past its last entry (else 400); in the
open ledger it is not checked against the LAC, which this gateway may see behind the
reader: a reader acks what it read.

Lag (``lag_of``) comes from ledger metadata (services/protocol/cursors.py ``lag``):
one metadata look-up per ledger from the cursor's ledger to the end of the log (closed
ledgers' kept by ``MetadataCache``), and one LAC read for an open last ledger this
gateway does not write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.limits import CURSOR_CAS_ATTEMPTS_MAX
from gateway.logs import operations as log_ops
from gateway.logs import reads as log_reads
from services.clock import wall_ms
from services.errors import (
    CursorNotFound,
    InvalidArgument,
    LedgerNotFound,
    MetadataConflict,
    QuireError,
    Unavailable,
    present,
)
from services.protocol.cursors import (
    CursorStart,
    CursorState,
    LedgerSpan,
    check_cursor_name,
    lag,
    merged,
)
from services.protocol.logs import LogMetadata, Position, check_log_name
from services.protocol.metadata import LedgerState
from services.zk.cursor_store import CursorStore

if TYPE_CHECKING:  # the gateway serves cursors with itself (gateway/app.py)
    from gateway.service import Gateway

# A time past every stamp: a search from it finds the end of the log (time_search.py).
_AFTER_EVERY_STAMP_MS = 2**63 - 1

# What an ack answers: the cursor after the write that covered it, and whether the ack
# moved it (its position was past the one stored before).
Acked = tuple[CursorState, bool]


@dataclass(slots=True)
class _Pending:
    """The acks of one cursor waiting for their write, and the task writing them."""

    acks: list[tuple[Position, asyncio.Future[Acked]]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class Cursors:
    """The durable cursors this gateway serves: their store and the acks being merged."""

    def __init__(self, gw: Gateway, store: CursorStore) -> None:
        self.gw = gw
        self.store = store
        self._pending: dict[tuple[str, str], _Pending] = {}

    async def ack(self, log: str, name: str, position: Position) -> Acked:
        """Move cursor ``name`` of ``log`` to ``position`` unless it is there or past it;
        answered once written (see the module docstring)."""
        check_log_name(log)
        check_cursor_name(name)
        self.gw.metrics.cursor_acks.inc()
        key = (log, name)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending()
            pending.task = asyncio.create_task(self._flush(key, pending), name="cursor-acks")
        done: asyncio.Future[Acked] = asyncio.get_running_loop().create_future()
        pending.acks.append((position, done))
        # A caller that goes away cancels ``done``; its position still goes in the write.
        return await done

    async def _flush(self, key: tuple[str, str], pending: _Pending) -> None:
        """Write the cursor's waiting acks, one merged write at a time, at most one per
        ``cursor_flush_ms``; ends (and forgets the cursor) once no ack waits."""
        try:
            while pending.acks:
                batch, pending.acks = pending.acks, []
                try:
                    await self._write(key, batch)
                finally:  # every ack of the batch is answered, also if the write broke off
                    _settle_all(batch, Unavailable("the ack's write did not finish"))
                await asyncio.sleep(self.gw.settings.cursor_flush_ms / 1000)
        finally:
            if self._pending.get(key) is pending:
                del self._pending[key]
            _settle_all(pending.acks, Unavailable("the gateway stopped before the ack was written"))

    async def _write(
        self, key: tuple[str, str], batch: list[tuple[Position, asyncio.Future[Acked]]]
    ) -> None:
        log, name = key
        try:
            listed = set((await log_ops.get(self.gw, log)).log.ledgers)
            ends: dict[int, int | None] = {}
            acks = []
            for position, done in batch:
                try:
                    await _check_in_log(self.gw, log, listed, position, ends)
                except InvalidArgument as exc:
                    _settle(done, exc)
                else:
                    acks.append((position, done))
            for _ in range(CURSOR_CAS_ATTEMPTS_MAX):
                current = await self.store.get(log, name)
                before = current.cursor.position
                highest = merged(before, [p for p, _ in acks])
                stored = current.cursor
                if highest is not None:
                    stored = current.cursor.acked(highest, wall_ms())
                    try:
                        await self.store.compare_and_set(log, name, stored, current.version)
                    except MetadataConflict:
                        continue  # another gateway wrote it: read it again
                    self.gw.metrics.cursor_writes.inc()
                for position, done in acks:
                    _settle(done, (stored, before is None or position > before))
                return
            raise MetadataConflict(f"cursor {name} of log {log} kept changing; ack again")
        except QuireError as exc:
            _settle_all(batch, exc)

    async def aclose(self) -> None:
        tasks = [p.task for p in self._pending.values() if p.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _check_in_log(
    gw: Gateway, log: str, listed: Container[int], position: Position, ends: dict[int, int | None]
) -> None:
    """``InvalidArgument`` unless ``position``'s ledger is in the log's list (``listed``)
    and, when that ledger is CLOSED, its entry is not past the ledger's last (an open
    ledger's end is not checked: this gateway's view of it may trail the reader's).
    ``ends`` keeps the closed ends looked up (None: open, or gone)."""
    lid = position.ledger_id
    if lid not in listed:
        raise InvalidArgument(f"position {position} is not in log {log}")
    if lid not in ends:
        try:
            metadata = await gw.metadata.ledger(lid)
        except LedgerNotFound:
            ends[lid] = None  # truncated meanwhile: the list read before still named it
        else:
            closed = metadata.state is LedgerState.CLOSED
            ends[lid] = metadata.last_entry_id if closed else None
    end = ends[lid]
    if end is not None and position.entry_id > end:
        raise InvalidArgument(
            f"position {position} is past the end of ledger {lid} (last entry {end})"
        )


def _settle(done: asyncio.Future[Acked], outcome: Acked | QuireError) -> None:
    if done.done():
        return
    if isinstance(outcome, QuireError):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)


def _settle_all(acks: list[tuple[Position, asyncio.Future[Acked]]], error: QuireError) -> None:
    """``error`` for every ack of ``acks`` not answered yet."""
    for _, done in acks:
        _settle(done, error)


def serve_cursors(gateway: Gateway, store: CursorStore) -> Gateway:
    """``gateway`` serves the durable cursors of ``store`` (``Gateway.cursors``)."""
    gateway.log_cursors[:] = [Cursors(gateway, store)]
    return gateway


async def create(gw: Gateway, log: str, name: str, start: CursorStart) -> tuple[CursorState, bool]:
    """Create cursor ``name`` of ``log`` at ``start`` unless it exists: (the cursor,
    whether it was created); an existing cursor is answered unchanged."""
    check_log_name(log)
    check_cursor_name(name)
    store = gw.cursors.store
    try:
        return (await store.get(log, name)).cursor, False
    except CursorNotFound:
        pass
    position = await _start_position(gw, log, start)
    stored, created = await store.create(log, name, CursorState(position, None, wall_ms()))
    return stored.cursor, created


async def _start_position(gw: Gateway, log: str, start: CursorStart) -> Position | None:
    """The position a new cursor stores: None for ``earliest`` (before the first
    record); the record before where a read from the time would start for a time, and
    for ``latest`` (a time past every record: the log's last record)."""
    if start.kind == "earliest":
        return None
    if start.kind == "position":
        position = present(start.position, "a start at a position names it")
        current = await log_ops.get_for_read(gw, log)
        await _check_in_log(gw, log, current.ledgers, position, {})
        return position
    at_ms = _AFTER_EVERY_STAMP_MS if start.kind == "latest" else start.time_ms
    found = await log_reads.start_at_time(gw, log, at_ms if at_ms is not None else 0)
    return await _record_before(gw, await log_ops.get_for_read(gw, log), found)


async def _record_before(gw: Gateway, log: LogMetadata, found: Position | None) -> Position | None:
    """The record just before position ``found`` (None: there is none): the entry
    before it, or the last entry of the closest earlier ledger that holds one."""
    if found is None:
        return None
    if found.entry_id > 0:
        return Position(found.ledger_id, found.entry_id - 1)
    index = log.index_of(found.ledger_id)
    for ledger_id in reversed(log.ledgers[: index or 0]):
        part = await log_reads.readable(gw, ledger_id, False)
        if part is not None and part.end >= 0:
            return Position(ledger_id, part.end)
    return None


async def get(gw: Gateway, log: str, name: str) -> CursorState:
    check_log_name(log)
    check_cursor_name(name)
    return (await gw.cursors.store.get(log, name)).cursor


async def delete(gw: Gateway, log: str, name: str) -> None:
    check_log_name(log)
    check_cursor_name(name)
    await gw.cursors.store.delete(log, name)


async def list_all(gw: Gateway, log: str) -> list[tuple[str, CursorState]]:
    """The log's cursors in name order (one gone meanwhile is left out)."""
    check_log_name(log)
    return await gw.cursors.store.get_all(log)


async def read_start(gw: Gateway, log: str, name: str) -> Position | None:
    """Where a read through cursor ``name`` starts: just after its position (None: the
    log's first record, also when the cursor's ledger was truncated away since)."""
    cursor = await get(gw, log, name)
    start = cursor.next()
    if start is None:
        return None
    current = await log_ops.get_for_read(gw, log)
    return start if start.ledger_id in current.ledgers else None


async def lags(
    gw: Gateway, log: str, positions: Sequence[Position | None]
) -> list[tuple[int, int]]:
    """(records, bytes) after each of ``positions`` to the end of ``log`` (a position
    in a ledger no longer listed counts the whole log), from one look at its ledgers."""
    current = await log_ops.get_for_read(gw, log)
    ledgers = current.ledgers

    def index_of(position: Position | None) -> int:
        found = current.index_of(position.ledger_id) if position is not None else None
        return found if found is not None else 0

    first = min((index_of(p) for p in positions), default=len(ledgers))
    spans: list[LedgerSpan] = []
    for index in range(first, len(ledgers)):
        part = await log_reads.readable(gw, ledgers[index], index == len(ledgers) - 1)
        if part is None:  # truncated meanwhile: it holds nothing after the rest
            spans.append(LedgerSpan(ledgers[index], -1, 0))
        else:
            spans.append(LedgerSpan(ledgers[index], part.end, part.length))
    answers = []
    for position in positions:
        listed = position is not None and current.index_of(position.ledger_id) is not None
        start = index_of(position) - first
        answers.append(lag(position if listed else None, spans[start:]))
    return answers
