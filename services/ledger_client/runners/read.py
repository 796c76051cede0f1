"""The asyncio runner of reads: carries out the effects of the protocol core's ``ReadOp``
(a page or one entry) and ``LacOp`` (a LAC read or long poll) with real bookie clients
and feeds the answers back (docs/style.md §1; the algorithm is in services/protocol/reads.py
and reads_lac.py, the effects in reads_messages.py).

Reads never fence. An OPEN (or IN_RECOVERY) ledger is read up to its LAC: the
writer gateway knows it exactly; any other gateway asks the bookies of the last
fragment (``bookies_lac``, ``wait_bookies_lac``) and never reports less than the
highest LAC it learnt before (``ctx.lacs_seen``, bounded; reads_lac.py says why:
a bookie that just joined may report a lower one). A CLOSED ledger is read up to
its last entry (``reads.readable_end`` decides).

A bookie that hangs (stopped, overloaded) must not stall reads for the bookie
client's whole time-out per request. So reads are speculative, as in
BookKeeper: a replica that has not answered within ``speculative_read_ms`` (a
setting) gets the next replica asked in parallel (the first valid answer wins);
a cover bookie whose range read has not answered by then is given up for the
page and its entries are read from their other replicas, the slow bookie last;
and a LAC read uses the bookies that answered by then (any bookie's LAC is a
lower bound of the writer's). A long poll re-polls a bookie that answered early
after ``lac_repoll_delay_ms`` (a setting).

Times fed to the core are integer milliseconds of the event loop's clock; the
runner arms one timer at the core's ``next_deadline()`` and feeds ``Tick``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from services.errors import InvariantViolation, QuireError, invariant
from services.ledger_client.context import LedgerClientContext
from services.limits import PAGE_ENTRIES_MAX
from services.protocol.limits import LacLimits, ReadLimits
from services.protocol.messages import Tick
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import ReadOp
from services.protocol.reads_lac import LacOp
from services.protocol.reads_messages import (
    CancelRequests,
    EntryAnswered,
    LacAnswered,
    LacDone,
    RangeAnswered,
    ReadDone,
    ReadEffect,
    ReadEntry,
    ReadEvent,
    ReadFailed,
    ReadLac,
    ReadRange,
    ReplicaCorrupt,
    RequestFailed,
)

log = logging.getLogger(__name__)

Page = ReadDone  # a page of a range read: entries and where the next page starts


class _Op(Protocol):
    def start(self, now: int) -> list[ReadEffect]: ...
    def handle(self, event: ReadEvent) -> list[ReadEffect]: ...
    def next_deadline(self) -> int | None: ...


def read_limits(ctx: LedgerClientContext, page_entries_max: int = PAGE_ENTRIES_MAX) -> ReadLimits:
    return ReadLimits(
        speculative_read_ms=ctx.settings.speculative_read_ms, page_entries_max=page_entries_max
    )


def lac_limits(ctx: LedgerClientContext) -> LacLimits:
    return LacLimits(
        speculative_read_ms=ctx.settings.speculative_read_ms,
        lac_repoll_delay_ms=ctx.settings.lac_repoll_delay_ms,
    )


class ReadRunner:
    """Runs one read operation to its result: one task per bookie request, one timer."""

    def __init__(self, ctx: LedgerClientContext, op: _Op) -> None:
        self.ctx = ctx
        self.op = op
        self._loop = asyncio.get_running_loop()
        self._result: asyncio.Future[ReadDone | LacDone] = self._loop.create_future()
        self._requests: dict[int, asyncio.Task[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    def _now(self) -> int:
        return int(self._loop.time() * 1000)

    async def run(self) -> ReadDone | LacDone:
        self._carry_out(self.op.start(self._now()))
        try:
            return await self._result
        finally:
            if self._timer is not None:
                self._timer.cancel()
            tasks = list(self._requests.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _feed(self, event: ReadEvent) -> None:
        if not self._result.done():
            self._carry_out(self.op.handle(event))

    def _carry_out(self, effects: list[ReadEffect]) -> None:
        for effect in effects:
            if isinstance(effect, ReadRange | ReadEntry | ReadLac):
                self._request(effect)
            elif isinstance(effect, CancelRequests):
                for request_id in effect.request_ids:
                    task = self._requests.pop(request_id, None)
                    if task is not None:
                        task.cancel()
            elif isinstance(effect, ReplicaCorrupt):
                log.warning(
                    "corrupt replica skipped",
                    extra={"fields": {"ledger_id": effect.ledger_id,
                                      "entry_id": effect.entry_id, "bookie": effect.bookie}},
                )  # fmt: skip
            elif isinstance(effect, ReadDone | LacDone):
                if not self._result.done():
                    self._result.set_result(effect)
            elif isinstance(effect, ReadFailed):
                if not self._result.done():
                    self._result.set_exception(effect.exception())
            else:
                invariant(False, f"unknown read effect {effect!r}")
        self._arm_timer()

    def _arm_timer(self) -> None:
        deadline = None if self._result.done() else self.op.next_deadline()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, deadline
        if deadline is not None:
            self._timer = self._loop.call_at(deadline / 1000, self._on_timer, deadline)

    def _on_timer(self, deadline: int) -> None:
        self._timer, self._timer_at = None, None
        # The loop may run a timer a hair early; it is run for this deadline.
        self._feed(Tick(max(self._now(), deadline)))

    def _request(self, effect: ReadRange | ReadEntry | ReadLac) -> None:
        """Start the bookie request of ``effect``; its answer or failure is fed back."""

        async def run() -> None:
            rid, client = effect.request_id, self.ctx.bookie(effect.bookie)
            try:
                if isinstance(effect, ReadRange):
                    answer = await client.read_range(
                        effect.ledger_id,
                        effect.first,
                        effect.last,
                        max_entries=effect.entries_max,
                        max_bytes=effect.bytes_max,
                        stride=effect.stride,
                        residues=effect.residues,
                    )
                    event: ReadEvent = RangeAnswered(rid, tuple(answer.records), self._now())
                elif isinstance(effect, ReadEntry):
                    record = await client.read_entry(effect.ledger_id, effect.entry_id)
                    event = EntryAnswered(rid, record, self._now())
                else:
                    info = await client.read_lac(effect.ledger_id, effect.after, effect.wait_ms)
                    event = LacAnswered(rid, info.lac, self._now())
            except QuireError as exc:
                event = RequestFailed(rid, exc.code, self._now())
            except Exception as exc:  # a bug of ours (clients raise QuireError): the read fails
                if not self._result.done():
                    self._result.set_exception(exc)
                return
            finally:
                self._requests.pop(rid, None)
            self._feed(event)

        self._requests[effect.request_id] = self._loop.create_task(run())


async def _lac(ctx: LedgerClientContext, op: LacOp) -> LacDone:
    result = await ReadRunner(ctx, op).run()
    if not isinstance(result, LacDone):
        raise InvariantViolation(f"a LAC read answered {result!r}")
    lac = ctx.lacs_seen.observe(op.ledger_id, result.lac)
    return result if lac == result.lac else LacDone(lac, result.known_nowhere)


async def bookies_lac(ctx: LedgerClientContext, metadata: LedgerMetadata) -> int:
    """The highest LAC the bookies of the last fragment report (-1 if none knows any), or
    the highest this gateway saw before if that is higher: it never goes backwards."""
    known = ctx.lacs_seen.get(metadata.ledger_id)
    return (await _lac(ctx, LacOp(metadata, known=known, limits=lac_limits(ctx)))).lac


async def wait_bookies_lac(
    ctx: LedgerClientContext, metadata: LedgerMetadata, after: int, wait_ms: int
) -> LacDone:
    """Long poll: the first LAC above ``after`` any bookie reports within ``wait_ms``,
    else the highest LAC known when the time is up (at once when this gateway already
    saw one above ``after``); ``known_nowhere`` when no bookie knew the ledger at the
    end (the bookies end their polls when it is deleted)."""
    known = ctx.lacs_seen.get(metadata.ledger_id)
    op = LacOp(metadata, after=after, wait_ms=wait_ms, known=known, limits=lac_limits(ctx))
    return await _lac(ctx, op)


def forget_lac(ctx: LedgerClientContext, ledger_id: int) -> None:
    """Drop what this gateway remembers of a deleted ledger's LAC."""
    ctx.lacs_seen.forget(ledger_id)


async def _read(ctx: LedgerClientContext, op: ReadOp) -> ReadDone:
    try:
        result = await ReadRunner(ctx, op).run()
    finally:
        ctx.metrics.read_failovers.inc(op.failovers)
    if not isinstance(result, ReadDone):
        raise InvariantViolation(f"a read answered {result!r}")
    ctx.metrics.entries_read.inc(len(result.entries))
    return result


async def read_page(
    ctx: LedgerClientContext,
    metadata: LedgerMetadata,
    first: int,
    last: int,
    key: bytes,
    entries_max: int = PAGE_ENTRIES_MAX,
) -> Page:
    """Entries ``first``..``last`` (already cut at the readable end), at most
    ``entries_max`` and ``PAGE_BYTES_MAX`` of payload (the first entry is always
    returned); ``next_entry_id`` is where to go on."""
    limits = read_limits(ctx, entries_max)
    return await _read(ctx, ReadOp.page(metadata, first, last, digest_key=key, limits=limits))


async def read_single(
    ctx: LedgerClientContext, metadata: LedgerMetadata, entry_id: int, end: int, key: bytes
) -> bytes:
    """Entry ``entry_id`` of a ledger readable up to ``end`` (``EntryNotFound`` past it)."""
    page = await _read(
        ctx, ReadOp.entry(metadata, entry_id, end, digest_key=key, limits=read_limits(ctx))
    )
    return page.entries[0][1]
