"""Carrying out a state machine's effects over the simulated network: what the
gateway's asyncio runners do with real clients (services/ledger_client/runners/). The requests
themselves (time-outs, duplicates, shared per-bookie batches) are in ``calls``.
A bookie's answer to an add becomes ``BookieAddsDone`` through the gateway's own
``answer_for``, so per-record refusals (``ledger_fenced``, ``entry_exists``) mean
to the core what they mean in the gateway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from services.errors import BookieUnavailable
from services.ledger_client.senders import answer_for
from services.protocol.messages import (
    BookieAddsDone,
    BookieFailed,
    Effect,
    EntryRead,
    Event,
    FenceDone,
    FenceFailed,
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    ReadEntries,
    ReadMetadata,
    ReadOutcome,
    ReadWritableBookies,
    SendAdds,
    SendFence,
    SendLac,
    Tick,
    WritableBookies,
    WriteMetadata,
)
from services.protocol.reads_messages import (
    CancelRequests,
    EntryAnswered,
    LacAnswered,
    RangeAnswered,
    ReadEntry,
    ReadLac,
    ReadRange,
    ReplicaCorrupt,
    RequestFailed,
)
from tests.simulation.bookie import BookieDown, SimBookie
from tests.simulation.calls import Done, as_add_answer, bookie_call, failure_code
from tests.simulation.world import corrupted

if TYPE_CHECKING:
    from tests.simulation.scenario import LedgerSim


class Runner:
    """Feeds events to one state machine of one ledger and carries out its effects."""

    def __init__(
        self,
        sim: LedgerSim,
        gateway: str,
        machine: Any,
        on_result: Callable[[Effect], None],
        *,
        stale_reads: bool = False,
    ) -> None:
        self.sim = sim
        self.gateway = gateway
        self.machine = machine
        self.on_result = on_result
        self.stale_reads = stale_reads  # a recoverer or reader: its metadata reads may lag
        self.dead = False  # a crashed gateway: no more events or effects
        self._ticks: set[int] = set()
        self._next_deadline: Callable[[], int | None] = getattr(
            machine, "next_deadline", lambda: None
        )

    def feed(self, event: Any) -> None:
        if self.dead:
            return
        self.execute(self.machine.handle(event))

    def execute(self, effects: list[Any]) -> None:
        for effect in effects:
            self._carry_out(effect)
        deadline = self._next_deadline()
        if deadline is not None and deadline not in self._ticks:
            self._ticks.add(deadline)
            self.sim.scheduler.at(deadline, lambda: self._tick(deadline))

    def _tick(self, deadline: int) -> None:
        self._ticks.discard(deadline)
        self.feed(Tick(self.sim.scheduler.now))

    def _call(self, bookie: str, op: Callable[[SimBookie, Done], None], done: Done,
              duplicable: bool = False) -> None:  # fmt: skip
        bookie_call(self.sim.world, self.gateway, bookie, op, done, duplicable=duplicable)

    # ------------------------------------------------------------------ effects

    def _carry_out(self, effect: Any) -> None:
        handler = _HANDLERS.get(type(effect))
        if handler is None:
            self.on_result(effect)
        else:
            handler(self, effect)

    def _send_adds(self, effect: SendAdds) -> None:
        self.sim.checker.on_send(self.gateway, effect)
        sender = self.sim.world.sender(self.gateway, effect.bookie)
        if sender is not None:
            bookie = effect.bookie
            sender.send(effect.records, lambda answer: self._feed_adds(answer.event(bookie)))
        else:
            self._call(
                effect.bookie,
                lambda b, reply: b.submit_add(effect.records, reply),
                self._adds_answer(effect),
                duplicable=True,
            )

    def _send_lac(self, effect: SendLac) -> None:
        lid = self.sim.ledger_id
        for bookie in effect.bookies:
            self._call(bookie, lambda b, reply: b.submit_lac(lid, effect.lac, reply),
                       lambda _: None)  # fmt: skip

    def _send_fence(self, effect: SendFence) -> None:
        lid = self.sim.ledger_id
        self._call(
            effect.bookie,
            lambda b, reply: b.submit_fence(lid, reply),
            self._fence_answer(effect.bookie),
            duplicable=True,
        )

    def _read_entries(self, effect: ReadEntries) -> None:
        lid, ids = self.sim.ledger_id, effect.entry_ids
        self._call(effect.bookie,
                   lambda b, reply: reply((b.instance_id, [b.read(lid, e) for e in ids])),
                   self._read_answer(effect))  # fmt: skip

    def _write_metadata(self, effect: WriteMetadata) -> None:
        self._metadata_call(lambda: self._cas(effect))

    def _read_metadata_effect(self, effect: ReadMetadata) -> None:
        self._metadata_call(lambda: MetadataRead(*self._read_metadata()))

    def _writable(self, effect: ReadWritableBookies) -> None:
        sim = self.sim
        up = [b for b in sim.bookie_list if b.up and not b.readonly]
        event = WritableBookies(tuple(b.bookie_id for b in up), tuple(b.instance_id for b in up))
        sim.scheduler.after(sim.network.delay(), lambda: self.feed(event))

    def _read_range(self, effect: ReadRange) -> None:
        lid = self.sim.ledger_id
        self._call(
            effect.bookie,
            lambda b, reply: reply(b.read_range(lid, effect.first, effect.last,
                                                effect.entries_max, effect.bytes_max,
                                                effect.stride, effect.residues)),
            self._range_answer(effect.request_id),
        )  # fmt: skip

    def _read_entry(self, effect: ReadEntry) -> None:
        lid = self.sim.ledger_id
        self._call(effect.bookie, lambda b, reply: reply(b.read(lid, effect.entry_id)),
                   self._entry_answer(effect))  # fmt: skip

    def _read_lac(self, effect: ReadLac) -> None:
        if effect.after is None or effect.wait_ms <= 0:
            lid = self.sim.ledger_id
            self._call(effect.bookie, lambda b, reply: reply(b.read_lac(lid)),
                       self._lac_answer(effect))  # fmt: skip
        else:
            self._long_poll(effect)

    def _ignore(self, effect: CancelRequests | ReplicaCorrupt) -> None:
        pass  # a sent request cannot be recalled: its late answer is ignored by the op

    def _long_poll(self, effect: ReadLac) -> None:
        """A LAC long poll: the bookie answers once its LAC or last entry passes
        ``after``, or when ``wait_ms`` is up; a bookie that crashes meanwhile drops it
        (the client's time-out, ``wait_ms`` longer than other requests, turns that into
        a failure)."""
        sim, net, lid = self.sim, self.sim.network, self.sim.ledger_id
        after = effect.after if effect.after is not None else -1
        done = self._lac_answer(effect)
        answered = False

        def answer(result: Any) -> None:
            nonlocal answered
            if not answered:
                answered = True
                done(result)

        sim.scheduler.after(sim.request_timeout_ms + effect.wait_ms, lambda: answer(TimeoutError()))
        if not net.passes(self.gateway, effect.bookie):
            return
        bookie = sim.bookies[effect.bookie]
        replied = False

        def check(expires: int) -> None:
            nonlocal replied
            if replied or answered:
                return
            if not bookie.up:
                replied = True  # the connection is lost with the bookie
                return
            st = bookie.ledgers.get(lid)
            lac, last = (st.lac, st.last_entry_id) if st is not None else (-1, -1)
            if lac > after or last > after or sim.scheduler.now >= expires:
                replied = True
                if net.passes(self.gateway, effect.bookie):
                    sim.scheduler.after(net.delay(effect.bookie), lambda: answer(lac))
            else:
                bookie.watchers.append(lambda: check(expires))

        def arrive() -> None:
            if not bookie.up:
                if net.passes(self.gateway, effect.bookie):
                    sim.scheduler.after(net.delay(effect.bookie), lambda: answer(BookieDown()))
                return
            expires = sim.scheduler.now + effect.wait_ms
            sim.scheduler.at(expires, lambda: check(expires))
            check(expires)

        sim.scheduler.after(net.delay(effect.bookie), arrive)

    def _range_answer(self, request_id: int) -> Done:
        def done(result: Any) -> None:
            now = self.sim.scheduler.now
            if isinstance(result, list):
                network = self.sim.network
                records = tuple(corrupted(r) if network.corrupt() else r for r in result)
                self.feed(RangeAnswered(request_id, records, now))
            else:
                self.feed(RequestFailed(request_id, failure_code(result), now))

        return done

    def _entry_answer(self, effect: ReadEntry) -> Done:
        def done(result: Any) -> None:
            now = self.sim.scheduler.now
            if result is None:
                self.feed(RequestFailed(effect.request_id, "entry_not_found", now))
            elif isinstance(result, Exception):
                self.feed(RequestFailed(effect.request_id, failure_code(result), now))
            else:
                record = corrupted(result) if self.sim.network.corrupt() else result
                self.feed(EntryAnswered(effect.request_id, record, now))

        return done

    def _lac_answer(self, effect: ReadLac) -> Done:
        def done(result: Any) -> None:
            now = self.sim.scheduler.now
            if isinstance(result, int):
                self.feed(LacAnswered(effect.request_id, result, now))
            else:
                self.feed(RequestFailed(effect.request_id, failure_code(result), now))

        return done

    def _adds_answer(self, effect: SendAdds) -> Done:
        bookie = effect.bookie

        def done(result: Any) -> None:
            answer = as_add_answer(result)
            unreachable = isinstance(answer, BookieUnavailable)
            if unreachable and self.sim.rng.random() < 0.3:
                self.feed(BookieFailed(bookie))
            else:
                self._feed_adds(answer_for(effect.records, answer).event(bookie))

        return done

    def _feed_adds(self, event: BookieAddsDone) -> None:
        """Feed an add answer; count the writer's answers from another instance than its
        last fragment recorded (a wiped bookie), for the reach test."""
        if self.gateway == "writer" and not self.dead and event.instance_id is not None:
            recorded = self.machine.metadata.last_fragment.instance_of(event.bookie)
            if recorded is not None and recorded != event.instance_id:
                self.sim.world.stats["add answered by a wiped bookie's new instance"] += 1
        self.feed(event)

    def _fence_answer(self, bookie: str) -> Done:
        def done(result: Any) -> None:
            if isinstance(result, tuple):
                self.feed(FenceDone(bookie, result[0], result[1], result[2]))
            else:
                self.feed(FenceFailed(bookie))

        return done

    def _read_answer(self, effect: ReadEntries) -> Done:
        def done(result: Any) -> None:
            instance, found = result if isinstance(result, tuple) else (None, None)
            for index, entry_id in enumerate(effect.entry_ids):
                if found is None:
                    event = EntryRead(effect.bookie, entry_id, ReadOutcome.ERROR)
                elif found[index] is None:
                    event = EntryRead(
                        effect.bookie, entry_id, ReadOutcome.MISSING, instance_id=instance
                    )
                else:
                    record = found[index]
                    if self.sim.network.corrupt():
                        record = corrupted(record)
                    event = EntryRead(effect.bookie, entry_id, ReadOutcome.FOUND, record, instance)
                self.feed(event)

        return done

    # ------------------------------------------------------------------ metadata

    def _metadata_call(self, op: Callable[[], Event | None]) -> None:
        sim = self.sim

        def run() -> None:
            faults = sim.faults
            if faults.metadata_fail_p and sim.rng.random() < faults.metadata_fail_p:
                event: Event | None = MetadataFailed("metadata_unavailable", "simulated")
            else:
                event = op()
            if event is not None:
                sim.scheduler.after(sim.network.delay(), lambda: self.feed(event))

        sim.scheduler.after(sim.network.delay(), run)

    def _read_metadata(self) -> tuple[Any, int]:
        """A read of the znode: maybe stale for recoverers and readers (ZooKeeper
        followers lag; a session never goes back in time)."""
        return self.sim.read_metadata(self.gateway, stale=self.stale_reads)

    def _cas(self, effect: WriteMetadata) -> Event:
        sim = self.sim
        if sim.faults.late_cas_p and sim.rng.random() < sim.faults.late_cas_p:
            # The caller times out; the write is applied later (if its version still
            # holds), after the caller has moved on.
            sim.scheduler.after(
                sim.rng.randint(20, 600), lambda: self._apply_cas(effect, late=True)
            )
            return MetadataFailed("metadata_unavailable", "simulated: timed out, lands later")
        ok = self._apply_cas(effect)
        cell = sim.cell
        if ok and sim.rng.random() < sim.faults.metadata_fail_p:
            return MetadataFailed("metadata_unavailable", "simulated: written, answer lost")
        if ok:
            return MetadataWritten(effect.metadata, cell.version)
        # A conflict answer carries the znode's zxid: the re-read is not stale.
        return MetadataConflicted(*cell.read(self.gateway))

    def _apply_cas(self, effect: WriteMetadata, *, late: bool = False) -> bool:
        cell = self.sim.cell
        ok = cell.compare_and_set(effect.metadata, effect.expected_version)
        if ok:
            cell.read(self.gateway)  # the session has seen its own write
            if late:
                self.sim.world.stats["CAS landed after its caller gave up"] += 1
        self.sim.checker.after_metadata_write(self.gateway)
        return ok


_HANDLERS: dict[type, Callable[[Runner, Any], None]] = {
    SendAdds: Runner._send_adds,
    SendLac: Runner._send_lac,
    SendFence: Runner._send_fence,
    ReadEntries: Runner._read_entries,
    WriteMetadata: Runner._write_metadata,
    ReadMetadata: Runner._read_metadata_effect,
    ReadWritableBookies: Runner._writable,
    ReadRange: Runner._read_range,
    ReadEntry: Runner._read_entry,
    ReadLac: Runner._read_lac,
    CancelRequests: Runner._ignore,
    ReplicaCorrupt: Runner._ignore,
}
