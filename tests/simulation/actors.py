"""The simulated gateways: a runner that carries out a state machine's effects over the
simulated network (what the gateway's asyncio runners do with real clients), the
writer's client and recoverers (the readers are in ``readers``).

Every bookie call has a time-out (``request_timeout_ms``): an answer that is dropped,
or a bookie that never answers, becomes a failure event; an answer that comes after
the time-out is ignored, although the bookie may have done the work (unknown outcome).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from services.errors import LedgerFenced
from services.protocol.messages import (
    AckAdds,
    AddRequested,
    BookieAddsDone,
    BookieFailed,
    CloseDone,
    CloseFailed,
    CloseRequested,
    Effect,
    EntryRead,
    Event,
    FailAdds,
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
    RecoveryDone,
    RecoveryFailed,
    RejectReason,
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
from services.protocol.recovery import LedgerRecovery
from tests.simulation.world import BookieDown, BookieReadOnly, SimBookie, corrupted

if TYPE_CHECKING:
    from tests.simulation.scenario import Simulation


class Runner:
    """Feeds events to one state machine and carries out its effects."""

    def __init__(
        self,
        sim: Simulation,
        gateway: str,
        machine: Any,
        on_result: Callable[[Effect], None],
    ) -> None:
        self.sim = sim
        self.gateway = gateway
        self.machine = machine
        self.on_result = on_result
        self.dead = False  # a crashed gateway: no more events or effects
        self._ticks: set[int] = set()

    def feed(self, event: Any) -> None:
        if self.dead:
            return
        self.execute(self.machine.handle(event))

    def execute(self, effects: list[Any]) -> None:
        for effect in effects:
            self._carry_out(effect)
        deadline = getattr(self.machine, "next_deadline", lambda: None)()
        if deadline is not None and deadline not in self._ticks:
            self._ticks.add(deadline)
            self.sim.scheduler.at(deadline, lambda: self._tick(deadline))

    def _tick(self, deadline: int) -> None:
        self._ticks.discard(deadline)
        self.feed(Tick(self.sim.scheduler.now))

    # ------------------------------------------------------------------ effects

    def _carry_out(self, effect: Any) -> None:
        sim = self.sim
        if isinstance(effect, SendAdds):
            sim.checker.on_send(self.gateway, effect)
            self._bookie_call(
                effect.bookie, lambda b: b.add(effect.records), self._adds_answer(effect)
            )
        elif isinstance(effect, SendLac):
            for bookie in effect.bookies:
                self._bookie_call(bookie, lambda b: b.write_lac(effect.lac), lambda _: None)
        elif isinstance(effect, SendFence):
            self._bookie_call(effect.bookie, SimBookie.fence, self._fence_answer(effect.bookie))
        elif isinstance(effect, ReadEntries):
            ids = effect.entry_ids
            self._bookie_call(
                effect.bookie, lambda b: [b.read(e) for e in ids], self._read_answer(effect)
            )
        elif isinstance(effect, WriteMetadata):
            self._metadata_call(lambda: self._cas(effect))
        elif isinstance(effect, ReadMetadata):
            self._metadata_call(lambda: MetadataRead(sim.cell.metadata, sim.cell.version))
        elif isinstance(effect, ReadWritableBookies):
            writable = tuple(b.bookie_id for b in sim.bookie_list if b.up and not b.readonly)
            sim.scheduler.after(sim.network.delay(), lambda: self.feed(WritableBookies(writable)))
        elif isinstance(effect, ReadRange):
            self._bookie_call(
                effect.bookie,
                lambda b: b.read_range(effect.first, effect.last, effect.entries_max,
                                       effect.bytes_max),
                self._range_answer(effect.request_id),
            )  # fmt: skip
        elif isinstance(effect, ReadEntry):
            self._bookie_call(
                effect.bookie, lambda b: b.read(effect.entry_id), self._entry_answer(effect)
            )
        elif isinstance(effect, ReadLac):
            if effect.after is None or effect.wait_ms <= 0:
                self._bookie_call(effect.bookie, SimBookie.read_lac, self._lac_answer(effect))
            else:
                self._long_poll(effect)
        elif isinstance(effect, CancelRequests | ReplicaCorrupt):
            pass  # a sent request cannot be recalled: its late answer is ignored by the op
        else:
            self.on_result(effect)

    def _bookie_call(
        self, bookie_id: str, op: Callable[[SimBookie], Any], done: Callable[[Any], None]
    ) -> None:
        sim, net = self.sim, self.sim.network
        answered = False

        def answer(result: Any) -> None:
            nonlocal answered
            if not answered:
                answered = True
                done(result)

        sim.scheduler.after(sim.request_timeout_ms, lambda: answer(TimeoutError()))
        if not net.passes(self.gateway, bookie_id):
            return  # the request is lost

        def arrive() -> None:
            try:
                result = op(sim.bookies[bookie_id])
            except (BookieDown, BookieReadOnly) as exc:
                result = exc
            if net.passes(self.gateway, bookie_id):
                sim.scheduler.after(net.delay(bookie_id), lambda: answer(result))

        sim.scheduler.after(net.delay(bookie_id), arrive)

    def _long_poll(self, effect: ReadLac) -> None:
        """A LAC long poll: the bookie answers once its LAC or last entry passes
        ``after``, or when ``wait_ms`` is up; a bookie that crashes meanwhile drops it
        (the client's time-out, ``wait_ms`` longer than other requests, turns that into
        a failure)."""
        sim, net = self.sim, self.sim.network
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
            if bookie.lac > after or bookie.last_entry_id > after or sim.scheduler.now >= expires:
                replied = True
                lac = bookie.lac
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

    def _range_answer(self, request_id: int) -> Callable[[Any], None]:
        def done(result: Any) -> None:
            now = self.sim.scheduler.now
            if isinstance(result, list):
                network = self.sim.network
                records = tuple(corrupted(r) if network.corrupt() else r for r in result)
                self.feed(RangeAnswered(request_id, records, now))
            else:
                self.feed(RequestFailed(request_id, _failure_code(result), now))

        return done

    def _entry_answer(self, effect: ReadEntry) -> Callable[[Any], None]:
        def done(result: Any) -> None:
            now = self.sim.scheduler.now
            if result is None:
                self.feed(RequestFailed(effect.request_id, "entry_not_found", now))
            elif isinstance(result, Exception):
                self.feed(RequestFailed(effect.request_id, _failure_code(result), now))
            else:
                record = corrupted(result) if self.sim.network.corrupt() else result
                self.feed(EntryAnswered(effect.request_id, record, now))

        return done

    def _lac_answer(self, effect: ReadLac) -> Callable[[Any], None]:
        def done(result: Any) -> None:
            now = self.sim.scheduler.now
            if isinstance(result, int):
                self.feed(LacAnswered(effect.request_id, result, now))
            else:
                self.feed(RequestFailed(effect.request_id, _failure_code(result), now))

        return done

    def _adds_answer(self, effect: SendAdds) -> Callable[[Any], None]:
        bookie, ids = effect.bookie, tuple(r.entry_id for r in effect.records)

        def done(result: Any) -> None:
            if isinstance(result, tuple):
                stored, fenced = result
                reason = RejectReason.FENCED if fenced else None
                self.feed(BookieAddsDone(bookie, stored, fenced, reason))
            elif isinstance(result, BookieReadOnly):
                self.feed(BookieAddsDone(bookie, (), ids, RejectReason.READONLY))
            elif self.sim.rng.random() < 0.3:
                self.feed(BookieFailed(bookie))
            else:
                self.feed(BookieAddsDone(bookie, (), ids, RejectReason.UNAVAILABLE))

        return done

    def _fence_answer(self, bookie: str) -> Callable[[Any], None]:
        def done(result: Any) -> None:
            if isinstance(result, tuple):
                self.feed(FenceDone(bookie, result[0], result[1]))
            else:
                self.feed(FenceFailed(bookie))

        return done

    def _read_answer(self, effect: ReadEntries) -> Callable[[Any], None]:
        def done(result: Any) -> None:
            for index, entry_id in enumerate(effect.entry_ids):
                if not isinstance(result, list):
                    event = EntryRead(effect.bookie, entry_id, ReadOutcome.ERROR)
                elif result[index] is None:
                    event = EntryRead(effect.bookie, entry_id, ReadOutcome.MISSING)
                else:
                    record = result[index]
                    if self.sim.network.corrupt():
                        record = corrupted(record)
                    event = EntryRead(effect.bookie, entry_id, ReadOutcome.FOUND, record)
                self.feed(event)

        return done

    def _metadata_call(self, op: Callable[[], Event]) -> None:
        sim = self.sim

        def run() -> None:
            if sim.faults.metadata_fail_p and sim.rng.random() < sim.faults.metadata_fail_p:
                event: Event = MetadataFailed("metadata_unavailable", "simulated")
            else:
                event = op()
            sim.scheduler.after(sim.network.delay(), lambda: self.feed(event))

        sim.scheduler.after(sim.network.delay(), run)

    def _cas(self, effect: WriteMetadata) -> Event:
        cell = self.sim.cell
        ok = cell.compare_and_set(effect.metadata, effect.expected_version)
        self.sim.checker.after_metadata_write(self.gateway)
        if ok and self.sim.rng.random() < self.sim.faults.metadata_fail_p:
            return MetadataFailed("metadata_unavailable", "simulated: written, answer lost")
        if ok:
            return MetadataWritten(effect.metadata, cell.version)
        return MetadataConflicted(cell.metadata, cell.version)


class WriterClient:
    """The application appending through the writer gateway: bounded outstanding requests."""

    def __init__(self, sim: Simulation, runner: Runner) -> None:
        self.sim = sim
        self.runner = runner
        self.sent = 0
        self.outstanding = 0
        self.requests: dict[str, tuple[bytes, ...]] = {}
        self.closes: dict[str, CloseDone | CloseFailed] = {}

    def start(self) -> None:
        self.sim.scheduler.at(self.sim.config.workload_start_ms, self._next)

    def _next(self) -> None:
        cfg, rng = self.sim.config, self.sim.rng
        if self.runner.dead or self.sent >= cfg.requests or self.sim.scheduler.now > cfg.phase1_ms:
            return
        if self.outstanding < cfg.outstanding_max:
            count = rng.randint(1, cfg.batch_max)
            payloads = tuple(
                rng.randbytes(rng.randint(0, cfg.payload_max_bytes)) for _ in range(count)
            )
            rid = f"r{self.sent}"
            self.sent += 1
            self.outstanding += 1
            self.requests[rid] = payloads
            self.runner.feed(AddRequested(rid, payloads, self.sim.scheduler.now))
        self.sim.scheduler.after(rng.randint(0, cfg.interarrival_max_ms), self._next)

    def close(self, request_id: str) -> None:
        self.runner.feed(CloseRequested(request_id, self.sim.scheduler.now))

    def on_result(self, effect: Effect) -> None:
        checker = self.sim.checker
        if isinstance(effect, AckAdds):
            self.outstanding -= 1
            checker.on_ack(effect, self.requests[str(effect.request_id)])
        elif isinstance(effect, FailAdds):
            self.outstanding -= 1
            checker.on_add_failed(effect)
        elif isinstance(effect, CloseDone | CloseFailed):
            self.closes[str(effect.request_id)] = effect
            checker.on_close_result(effect)


class Recoverer:
    """A gateway running ``POST /recover``: reads the metadata, runs ``LedgerRecovery``,
    retries a failed recovery a bounded number of times."""

    def __init__(self, sim: Simulation, name: str, attempts_max: int) -> None:
        self.sim = sim
        self.name = name
        self.attempts = 0
        self.attempts_max = attempts_max
        self.result: RecoveryDone | None = None
        self.failures: list[RecoveryFailed] = []

    def start(self) -> None:
        self.attempts += 1
        sim = self.sim
        if sim.faults.metadata_fail_p and sim.rng.random() < sim.faults.metadata_fail_p:
            sim.scheduler.after(50, self.start)  # could not read the metadata: try again
            return
        recovery = LedgerRecovery(
            sim.cell.metadata, sim.cell.version, limits=sim.config.recovery_limits
        )
        sim.recoveries.append(recovery)
        runner = Runner(sim, self.name, recovery, self.on_result)
        runner.execute(recovery.start(sim.scheduler.now))

    def on_result(self, effect: Effect) -> None:
        if isinstance(effect, RecoveryDone):
            self.result = effect
            self.sim.checker.on_recovery_done(self.name, effect)
        elif isinstance(effect, RecoveryFailed):
            self.failures.append(effect)
            if self.attempts < self.attempts_max:
                self.sim.scheduler.after(self.sim.rng.randint(50, 400), self.start)


def _failure_code(result: Any) -> str:
    if isinstance(result, BookieDown):
        return "bookie_unavailable"
    if isinstance(result, BookieReadOnly):
        return "bookie_read_only"
    return "timeout"


def fenced_failure(effect: FailAdds) -> bool:
    return effect.error is LedgerFenced
