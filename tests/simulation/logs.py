"""Logs in the simulator: a versioned log cell, a world of many ledgers that gateways
create as they take the writer role and roll, futures and tasks for the gateway
actor (``log_gateway``), and the clients that append.

The world reuses the simulated bookies, network and faults of ``scenario.Simulation``
and, per ledger, a ``scenario.LedgerSim``: its metadata cell, the real ``WriteHandle``
run by ``runner.Runner`` and the ledger-level ``Checker`` (checked after every step).
``LogCell`` is the log's znode (``LogMetadata`` bytes and a version, compare-and-set);
a CAS may fail, and its answer may be lost after it landed (``LogWriteUnknown``).

Gateways are written like their asyncio originals (gateway/logs/writer.py, steps.py):
generators that ``yield`` a ``Fut`` and get its value back (or its error raised), run
by ``Task``. A crashed gateway's tasks stop where they are (their next step is
dropped), its write handles and recoveries go deaf, nothing more is answered.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.errors import MetadataUnavailable, QuireError, invariant
from services.protocol.limits import RecoveryLimits, WriterLimits
from services.protocol.logs import LogMetadata
from services.protocol.messages import AckAdds, CloseDone, CloseFailed, Effect, FailAdds
from services.protocol.reads import read_sequence, record_usable
from services.protocol.saved_keys import SavedLedger
from tests.simulation.checker import Violation
from tests.simulation.plan import Config, LedgerPlan
from tests.simulation.scenario import LedgerSim, Simulation
from tests.simulation.world import Faults, Scheduler

if TYPE_CHECKING:
    from tests.simulation.log_checker import LogChecker
    from tests.simulation.log_gateway import LogGateway

LOG_NAME = "events"
FIRST_LOG_LEDGER_ID = 100
STEPS_MAX = 400_000

# ---------------------------------------------------------------- futures and tasks


class Fut:
    """A value (or an error) that arrives later; callbacks run when it does."""

    __slots__ = ("scheduler", "done", "value", "error", "_callbacks")

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.done = False
        self.value: Any = None
        self.error: QuireError | None = None
        self._callbacks: list[Callable[[], None]] = []

    def resolve(self, value: Any = None, error: QuireError | None = None) -> None:
        if self.done:
            return
        self.done, self.value, self.error = True, value, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def then(self, callback: Callable[[], None]) -> None:
        if self.done:
            self.scheduler.after(0, callback)
        else:
            self._callbacks.append(callback)


Coroutine = Generator[Fut, Any, Any]


class Task:
    """Runs one generator of gateway ``owner`` while its life lasts; ``result`` gets
    the generator's return value or its ``QuireError``."""

    def __init__(self, owner: LogGateway, gen: Coroutine) -> None:
        self.owner = owner
        self.life = owner.life
        self.gen = gen
        self.result = Fut(owner.world.scheduler)
        self._step(None, None)

    def _step(self, value: Any, error: QuireError | None) -> None:
        if self.owner.life != self.life:
            return  # the gateway crashed: this task is gone
        try:
            fut = self.gen.throw(error) if error is not None else self.gen.send(value)
        except StopIteration as stop:
            self.result.resolve(stop.value)
            return
        except QuireError as exc:
            self.result.resolve(None, exc)
            return
        fut.then(lambda: self._step(fut.value, fut.error))


def gather(scheduler: Scheduler, futs: Iterable[Fut]) -> Fut:
    """Done when every one of ``futs`` is; the first error (in order) wins."""
    futs = list(futs)
    out = Fut(scheduler)

    def check() -> None:
        if all(f.done for f in futs):
            error = next((f.error for f in futs if f.error is not None), None)
            out.resolve([f.value for f in futs], error)

    for fut in futs:
        fut.then(check)
    if not futs:
        out.resolve([])
    return out


# ---------------------------------------------------------------- the log's znode


class LogCell:
    """The log's znode: ``LogMetadata`` bytes and a version, compare-and-set."""

    def __init__(self, log: LogMetadata) -> None:
        self.data = log.to_json()
        self.version = 0
        self.log = LogMetadata.from_json(self.data)
        self.history: list[tuple[int, LogMetadata]] = [(0, self.log)]

    def compare_and_set(self, log: LogMetadata, expected: int) -> bool:
        if expected != self.version:
            return False
        self.data = log.to_json()
        self.log = LogMetadata.from_json(self.data)
        self.version += 1
        self.history.append((self.version, self.log))
        return True


# ---------------------------------------------------------------- the world


@dataclass
class LogPlan:
    """What one log seed runs (drawn in ``test_log_simulation``)."""

    seed: int
    shape: tuple[int, int, int]  # E, Qw, Qa of the log's ledgers
    gateways: int
    clients: int
    appends_per_client: int
    keyed_p: float
    batch_max: int
    interarrival_max_ms: int
    roll_entries: int  # auto-roll once the ledger holds this many entries
    settle_timeout_ms: int
    add_timeout_ms: int
    acquires: list[tuple[int, int]]  # (gateway index, at ms): it takes the role
    rolls: list[tuple[int, int]]  # (gateway index, at ms): a roll on demand
    gateway_crashes: list[tuple[int, int, int]]  # (gateway index, down ms, up ms)
    fence_last_only: bool = False  # the deliberately broken AcquireWriter
    phase1_ms: int = 3_000
    client_timeout_ms: int = 1_500

    def describe(self) -> str:
        return (
            f"log: shape {self.shape}, {self.gateways} gateways, {self.clients} clients x "
            f"{self.appends_per_client} appends (keyed {self.keyed_p:.1f}, batch <= "
            f"{self.batch_max}), roll every {self.roll_entries} entries, settle "
            f"{self.settle_timeout_ms} ms, add time-out {self.add_timeout_ms} ms, acquires "
            f"{self.acquires}, rolls {self.rolls}, gateway crashes {self.gateway_crashes}"
            + (", FENCING THE LAST LEDGER ONLY" if self.fence_last_only else "")
        )


class LogWorld(Simulation):
    """The bookies, network and faults of a ``Simulation`` (``config`` without ledgers),
    one log, the ledgers the gateways create, the gateways and the clients."""

    def __init__(self, config: Config, plan: LogPlan) -> None:
        invariant(not config.ledgers and not config.autorecovery.enabled, "a bare world")
        super().__init__(config)
        self.plan = plan
        e, w, a = plan.shape
        self.log_cell = LogCell(LogMetadata(LOG_NAME, ensemble_size=e, write_quorum=w,
                                            ack_quorum=a))  # fmt: skip
        self._next_ledger_id = FIRST_LOG_LEDGER_ID
        self._request_ids = 0
        # (ledger id, request id) -> (its future, its payloads) for the write handles
        self._waiting: dict[tuple[int, int], tuple[Fut, tuple[bytes, ...]]] = {}
        self.ledger_owner: dict[int, str] = {}  # ledger id -> the gateway that created it
        # ledger id -> its keys as its writer saved them beside the log after closing it
        # (gateway/logs/rebuild.py ``save_keys``; a save lost with its writer is absent)
        self.saved_keys: dict[int, SavedLedger] = {}
        self.gateways: list[LogGateway] = []
        self.log_checker: LogChecker

    def fut(self) -> Fut:
        return Fut(self.scheduler)

    def sleep(self, ms: int) -> Fut:
        fut = self.fut()
        self.scheduler.after(ms, fut.resolve)
        return fut

    def metadata_fails(self) -> bool:
        p = self.faults.metadata_fail_p
        return bool(p) and self.rng.random() < p

    # ------------------------------------------------------------ the log's znode

    def read_log(self) -> Fut:
        """(log, version) after a round trip, or ``MetadataUnavailable``."""
        fut = self.fut()

        def arrive() -> None:
            if self.metadata_fails():
                fut.resolve(None, MetadataUnavailable("simulated: ZooKeeper unavailable"))
            else:
                cell = self.log_cell
                self.scheduler.after(
                    self.network.delay(), lambda: fut.resolve((cell.log, cell.version))
                )

        self.scheduler.after(self.network.delay(), arrive)  # fmt: skip
        return fut

    def cas_log(self, gateway: str, log: LogMetadata, version: int) -> Fut:
        """ "written" (with the new version), "conflict" or "unknown" (it may have landed,
        now or later)."""
        fut = self.fut()

        def apply() -> bool:
            ok = self.log_cell.compare_and_set(log, version)
            if ok:
                self.log_checker.on_log_written(gateway, self.log_cell.log, self.log_cell.version)
            return ok

        def arrive() -> None:
            faults, delay = self.faults, self.network.delay()
            if faults.late_cas_p and self.rng.random() < faults.late_cas_p:
                self.scheduler.after(self.rng.randint(20, 400), lambda: None if apply() else None)
                self.scheduler.after(delay, lambda: fut.resolve(("unknown", -1)))
                return
            if self.metadata_fails():
                answer = ("unknown", -1)
                if self.rng.random() < 0.5 and apply():
                    self.stats["log CAS landed, answer lost"] += 1
            elif apply():
                answer = ("written", self.log_cell.version)
            else:
                answer = ("conflict", -1)
            self.scheduler.after(delay, lambda: fut.resolve(answer))

        self.scheduler.after(self.network.delay(), arrive)
        return fut

    # ------------------------------------------------------------ ledgers

    def create_ledger(self, gateway: LogGateway, e: int, w: int, a: int) -> Fut:
        """A new OPEN ledger with this gateway's write handle (``LedgerSim``), or
        ``MetadataUnavailable``."""
        fut = self.fut()

        def arrive() -> None:
            if self.metadata_fails():
                fut.resolve(None, MetadataUnavailable("simulated: could not create"))
                return
            ledger = self._new_ledger(gateway, e, w, a)
            self.scheduler.after(self.network.delay(), lambda: fut.resolve(ledger))

        self.scheduler.after(self.network.delay(), arrive)
        return fut

    def _new_ledger(self, gateway: LogGateway, e: int, w: int, a: int) -> LedgerSim:
        lid = self._next_ledger_id
        self._next_ledger_id += 1
        plan = self.plan
        ledger_plan = LedgerPlan(
            ledger_id=lid, ensemble_size=e, write_quorum=w, ack_quorum=a,
            digest_type="crc32c", password=b"", mode="log", requests=0, batch_max=1,
            payload_max_bytes=0, outstanding_max=1, interarrival_max_ms=1,
            writer_limits=WriterLimits(
                add_timeout_ms=plan.add_timeout_ms, explicit_lac_delay_ms=10,
                ensemble_change_retry_ms=100, metadata_retry_ms=50,
            ),
            recovery_limits=RecoveryLimits(recovery_read_batch_max=4),
        )  # fmt: skip
        ledger = LedgerSim(self, ledger_plan)
        ledger.writer.on_result = lambda effect: self._on_handle_result(ledger, effect)
        self.ledgers.append(ledger)
        self._by_id[lid] = ledger
        self.ledger_owner[lid] = gateway.name
        gateway.runners.append(ledger.writer)
        return ledger

    def add(self, ledger: LedgerSim, payloads: tuple[bytes, ...]) -> Fut:
        """An add through the ledger's write handle: ``AckAdds``, or the handle's error
        (with ``entries`` when the request was given entry ids)."""
        from services.protocol.messages import AddRequested

        self._request_ids += 1
        rid = self._request_ids
        fut = self.fut()
        self._waiting[(ledger.ledger_id, rid)] = (fut, payloads)
        ledger.writer.feed(AddRequested(rid, payloads, self.scheduler.now))
        return fut

    def close(self, ledger: LedgerSim) -> Fut:
        from services.protocol.messages import CloseRequested

        self._request_ids += 1
        rid = self._request_ids
        fut = self.fut()
        self._waiting[(ledger.ledger_id, rid)] = (fut, ())
        ledger.writer.feed(CloseRequested(rid, self.scheduler.now))
        return fut

    def _on_handle_result(self, ledger: LedgerSim, effect: Effect) -> None:
        checker = ledger.checker
        if not isinstance(effect, AckAdds | FailAdds | CloseDone | CloseFailed):
            return
        waiting = self._waiting.pop((ledger.ledger_id, effect.request_id), None)  # type: ignore[arg-type]
        if waiting is None:
            return
        fut, payloads = waiting
        if isinstance(effect, AckAdds):
            checker.on_ack(effect, payloads)
            fut.resolve(effect)
        elif isinstance(effect, FailAdds):
            checker.on_add_failed(effect)
            fut.resolve(None, effect.exception())
        else:
            checker.on_close_result(effect)
            if isinstance(effect, CloseDone):
                fut.resolve(effect.metadata)
            else:
                fut.resolve(None, effect.exception())

    def stored(self, ledger: LedgerSim, first: int, last: int) -> list[bytes | None]:
        """Entries ``first..last`` read straight from the bookies' storage (a bookie that
        is down is read as if the read waited for it; one lost for good is empty)."""
        md = ledger.cell.metadata
        out: list[bytes | None] = []
        for entry_id in range(first, last + 1):
            found = None
            for bookie in read_sequence(md, entry_id):
                if bookie in self.lost:
                    continue
                st = self.bookies[bookie].ledgers.get(ledger.ledger_id)
                record = None if st is None else st.entries.get(entry_id)
                if record is not None and record_usable(record, md, entry_id, ledger.key):
                    found = bytes(record.payload)
                    break
            out.append(found)
        return out

    def bookies_lac(self, ledger: LedgerSim) -> int:
        """The highest LAC the bookies of the ledger's last fragment know."""
        md = ledger.cell.metadata
        lac = -1
        for bookie in md.fragments[-1].bookies:
            st = self.bookies[bookie].ledgers.get(ledger.ledger_id)
            if st is not None and bookie not in self.lost:
                lac = max(lac, st.lac)
        return lac

    # ------------------------------------------------------------ running

    def step_until(self, done: Callable[[], bool] | None = None, end_ms: int = 0) -> None:
        """Run callbacks until ``done()`` holds (or up to ``end_ms``), checking every
        ledger's invariants after each step."""
        scheduler = self.scheduler
        queue = scheduler._queue
        while queue and (queue[0][0] <= end_ms if done is None else not done()):
            scheduler.now, _, callback = heapq.heappop(queue)
            scheduler.steps += 1
            callback()
            for ledger in self.ledgers:
                ledger.checker.after_step()
            if scheduler.steps > STEPS_MAX:
                raise Violation(f"liveness: more than {STEPS_MAX} steps")

    def heal(self) -> None:
        self._heal()


def bare_config(seed: int, rng: random.Random, faults: Faults, bookies: int) -> Config:
    """A world without ledgers of its own: bookies, faults, crashes (none yet)."""
    names = [f"10.0.0.{i}:{3181 + i}" for i in range(bookies)]
    return Config(seed=seed, bookies=names, faults=faults,
                  request_timeout_ms=rng.choice([60, 150, 400]))  # fmt: skip
