"""One simulated run per seed: draw a scenario (``plan``), run it, heal, close, check.

Phase 1 runs with faults until ``phase1_ms``; then everything is healed (bookies up
and writable, no drops, no partitions) and the run continues; every ledger still
not CLOSED is closed by a final recovery. Finally every entry of every ledger is read
back, from the bookies' storage and through ``ReadOp`` over the network, and the
invariants of ``checker`` are checked (they are also checked during the run).
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.placement import choose_ensemble
from services.protocol.reads import read_sequence, readable_end, record_usable
from services.protocol.recovery import LedgerRecovery
from services.protocol.writer import WriteHandle
from services.wire.digest import mac_key
from services.wire.framing import FramedRecord
from tests.simulation.actors import Recoverer, WriterClient
from tests.simulation.auditor import Auditor
from tests.simulation.bookie import SimBookie
from tests.simulation.calls import SharedSender
from tests.simulation.checker import Checker, Violation
from tests.simulation.marks import MarkTable
from tests.simulation.plan import Config, LedgerPlan, draw_config
from tests.simulation.readers import FinalReader, TailReader
from tests.simulation.replicator import Replicator
from tests.simulation.runner import Runner
from tests.simulation.worker import ReplicationWorker
from tests.simulation.world import Faults, MetadataCell, Network, Scheduler

STEPS_MAX = 200_000
SETTLE_MS = 6_000  # after the final recoveries: auto-recovery finishes (liveness)

__all__ = [
    "Config",
    "LedgerSim",
    "Simulation",
    "Violation",
    "draw_config",
    "run_config",
    "run_seed",
]


class LedgerSim:
    """One ledger of the run and everyone working on it: its metadata cell, writer
    handle and client, recoverers, reader, replicators and checker. It shows the
    actors the shared world (scheduler, network, bookies) under the same names."""

    def __init__(self, world: Simulation, plan: LedgerPlan) -> None:
        self.world = world
        self.config = plan
        self.ledger_id = plan.ledger_id
        self.scheduler = world.scheduler
        self.network = world.network
        self.rng = world.rng
        self.bookies = world.bookies
        self.bookie_list = world.bookie_list
        self.lost = world.lost
        self.request_timeout_ms = world.request_timeout_ms
        self.key = mac_key(plan.password) if plan.digest_type == "hmac-sha256" else b""
        ensemble = choose_ensemble(
            world.config.bookies, plan.ensemble_size, plan.write_quorum, self.rng
        ).bookies
        metadata = LedgerMetadata.new(
            plan.ledger_id,
            ensemble,
            plan.write_quorum,
            plan.ack_quorum,
            digest_type=plan.digest_type,
            created_at=1,
            instances={b.bookie_id: b.instance_id for b in world.bookie_list},
        )
        self.cell = MetadataCell(metadata, world.scheduler)
        self.checker = Checker(self, plan.ack_quorum)
        self.recoveries: list[LedgerRecovery] = []
        self.handle = WriteHandle(
            metadata,
            0,
            rng=random.Random(world.config.seed * 31 + plan.ledger_id),
            digest_key=self.key,
            limits=plan.writer_limits,
        )
        self.client: WriterClient
        self.writer = Runner(self, "writer", self.handle, lambda e: self.client.on_result(e))
        self.client = WriterClient(self, self.writer)
        self.recoverers = [
            Recoverer(self, f"rec{i}", attempts_max=5) for i in range(len(plan.recoveries_at))
        ]
        self.reader = TailReader(self, "reader")
        self.replicators = [Replicator(self, f"replicator{i}") for i in range(len(plan.swaps_at))]

    @property
    def faults(self) -> Faults:
        return self.world.faults

    def read_lag(self) -> int:
        """How far behind the store one metadata read of a recoverer or reader is."""
        stale = self.world.faults.stale_read_ms
        return self.rng.randint(0, stale) if stale else 0

    def read_metadata(self, gateway: str, *, stale: bool) -> tuple[LedgerMetadata, int]:
        """``gateway``'s read of the znode (maybe stale: see ``MetadataCell.read``)."""
        metadata, version = self.cell.read(gateway, self.read_lag() if stale else 0)
        if version < self.cell.version:
            self.world.stats["stale metadata read"] += 1
        return metadata, version

    def plan_events(self) -> None:
        plan, at = self.config, self.scheduler.at
        self.client.start()
        self.reader.start()
        if plan.writer_close_at is not None:
            at(plan.writer_close_at, lambda: self.client.close("close-1"))
            at(plan.writer_close_at + 3_000, lambda: self.client.close("close-2"))
        if plan.writer_crash_at is not None:
            at(plan.writer_crash_at, lambda: setattr(self.writer, "dead", True))
        for recoverer, start in zip(self.recoverers, plan.recoveries_at, strict=True):
            at(start, recoverer.start)
        for count, when in enumerate(plan.meddles_at):
            at(when, lambda n=count: self._meddle(n))
        for replicator, when in zip(self.replicators, plan.swaps_at, strict=True):
            at(when, replicator.start)

    def _meddle(self, count: int) -> None:
        """Another party (say an admin tool) changes an OPEN ledger's metadata: the
        writer's next CAS loses and must retry on the fresh version."""
        md = self.cell.metadata
        if md.state is LedgerState.OPEN:
            self.cell.compare_and_set(replace(md, custom={"touched": count}), self.cell.version)
            self.checker.after_metadata_write("meddler")

    def stored_entries(self, md: LedgerMetadata) -> list[bytes | None]:
        """Every entry up to the last one, read straight from the bookies' storage."""
        entries: list[bytes | None] = []
        for entry_id in range((md.last_entry_id if md.last_entry_id is not None else -1) + 1):
            found = None
            for bookie in read_sequence(md, entry_id):
                if bookie in self.lost:
                    continue
                st = self.bookies[bookie].ledgers.get(self.ledger_id)
                record: FramedRecord | None = None if st is None else st.entries.get(entry_id)
                if record_usable(record, md, entry_id, self.key):
                    found = bytes(record.payload)
                    break
            entries.append(found)
        return entries


class Simulation:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.scheduler = Scheduler()
        self.faults = config.faults
        self.network = Network(self.scheduler, self.rng, self.faults)
        self.request_timeout_ms = config.request_timeout_ms
        self.lost: set[str] = set()
        self.lost_at: dict[str, int] = {}
        self.down_since: dict[str, int] = {}  # the bookie registry: who is missing since when
        self.marks = MarkTable()
        self.bookie_events = 0  # crashes, restarts and losses so far
        self.orphaned: dict[int, str] = {}  # ledger id -> a worker that crashed holding it
        self._longest_down: dict[str, int] = {}
        self.stats: Counter[str] = Counter()  # what happened, for the reach test
        self.bookie_list = [
            SimBookie(
                b, self.scheduler, self.rng, self._on_store, self._on_lose, config.models.get(b)
            )
            for b in sorted(config.bookies)
        ]
        self.bookies = {b.bookie_id: b for b in self.bookie_list}
        for bookie in self.bookie_list:
            bookie.stats = self.stats
        self._senders: dict[str, SharedSender] = {}
        self.ledgers = [LedgerSim(self, plan) for plan in config.ledgers]
        self._by_id = {ledger.ledger_id: ledger for ledger in self.ledgers}
        auto = config.autorecovery
        self.auditor = Auditor(self) if auto.enabled else None
        self.workers = [ReplicationWorker(self, f"worker{i}") for i in range(auto.workers)]
        if not auto.enabled:
            self.workers = []

    def ledger(self, ledger_id: int) -> LedgerSim:
        return self._by_id[ledger_id]

    def wake_workers(self) -> None:
        for worker in self.workers:
            worker.wake()

    # The first ledger, under the names a one-ledger run had (tests, replays).
    @property
    def cell(self) -> MetadataCell:
        return self.ledgers[0].cell

    @property
    def checker(self) -> Checker:
        return self.ledgers[0].checker

    @property
    def reader(self) -> TailReader:
        return self.ledgers[0].reader

    def _on_store(self, bookie: str, record: FramedRecord) -> None:
        self._by_id[record.ledger_id].checker.on_store(bookie, record)

    def _on_lose(self, bookie: str, ledger_id: int, entry_id: int) -> None:
        ledger = self._by_id.get(ledger_id)
        if ledger is not None and bookie not in self.lost:
            ledger.checker.on_lose(bookie, entry_id)

    def sender(self, gateway: str, bookie: str) -> SharedSender | None:
        """The writer gateway's shared add queue to ``bookie`` (None: not batching)."""
        shared = self.config.shared_batches
        if shared is None or gateway != "writer":
            return None
        sender = self._senders.get(bookie)
        if sender is None:
            sender = self._senders[bookie] = SharedSender(self, gateway, bookie, *shared)
        return sender

    def _plan(self) -> None:
        cfg, at = self.config, self.scheduler.at
        for ledger in self.ledgers:
            ledger.plan_events()
        for bookie, down, up in cfg.crashes:
            at(down, lambda b=bookie: self._crash(b))
            at(up, lambda b=bookie: self._restart(b))
        auto = cfg.autorecovery
        if self.auditor is not None:
            self.auditor.start()
        for worker in self.workers:
            worker.start()
        for index, when, back_after in auto.worker_crashes:
            worker = self.workers[index]
            at(when, lambda w=worker, b=back_after: w.crash(auto.session_timeout_ms, b))
        for bookie, down in cfg.lost:
            at(down, lambda b=bookie: self._lose(b))
        for bookie, down, up in cfg.wipes:
            at(down, lambda b=bookie: self._wipe(b))
            at(up, lambda b=bookie: self._restart(b))
        for bookie, start, end in cfg.readonly:
            at(start, lambda b=bookie: setattr(self.bookies[b], "readonly", True))
            at(end, lambda b=bookie: setattr(self.bookies[b], "readonly", False))
        at(cfg.phase1_ms, self._heal)

    def _crash(self, bookie: str) -> None:
        sim_bookie = self.bookies[bookie]
        if sim_bookie.up:
            self.bookie_events += 1
            sim_bookie.crash()
            self.down_since[bookie] = self.scheduler.now  # its registration is gone
            if self.auditor is not None:
                self.auditor.on_bookie_down(bookie)

    def _restart(self, bookie: str) -> None:
        if bookie not in self.lost:
            self.bookie_events += 1
            self.bookies[bookie].restart()
            since = self.down_since.pop(bookie, None)
            if since is not None:
                down_ms = self.scheduler.now - since
                self._longest_down[bookie] = max(self._longest_down.get(bookie, 0), down_ms)

    def was_gone(self, bookie: str, delay_ms: int) -> bool:
        """Whether ``bookie`` was ever missing from the registry for ``delay_ms``."""
        since = self.down_since.get(bookie)
        if since is not None and self.scheduler.now - since >= delay_ms:
            return True
        return self._longest_down.get(bookie, -1) >= delay_ms

    def _lose(self, bookie: str) -> None:
        """Gone for good, its disk with it (no unsynced loss to account for): its store
        counts as empty for the checks of re-replication."""
        self.lost.add(bookie)
        self.lost_at[bookie] = self.scheduler.now
        self._crash(bookie)

    def _wipe(self, bookie: str) -> None:
        """``quire bookie format`` and a restart later: crashed now, everything it stored
        gone (each ledger's checker hears which copies), back as a new instance."""
        sim_bookie = self.bookies[bookie]
        self._crash(bookie)
        for ledger_id, st in sorted(sim_bookie.ledgers.items()):
            ledger = self._by_id.get(ledger_id)
            if ledger is not None:
                ledger.checker.on_wipe(bookie, sorted(st.entries))
        sim_bookie.wipe()
        self.stats["bookie wiped and back as a new instance"] += 1

    def _heal(self) -> None:
        self.faults = self.network.faults = self.config.faults.healed()
        for bookie in self.bookie_list:
            if bookie.bookie_id not in self.lost:
                self._restart(bookie.bookie_id)
            bookie.readonly = False

    def _step_until(self, done: Callable[[], bool] | None = None, end_ms: int = 0) -> None:
        """Run callbacks until ``done()`` holds (or, without it, up to ``end_ms``),
        checking every ledger's invariants after each (the scheduler's loop, inlined)."""
        scheduler = self.scheduler
        queue = scheduler._queue
        checks = [ledger.checker.after_step for ledger in self.ledgers]
        while queue and (queue[0][0] <= end_ms if done is None else not done()):
            scheduler.now, _, callback = heapq.heappop(queue)
            scheduler.steps += 1
            callback()
            for check in checks:
                check()
            if scheduler.steps > STEPS_MAX:
                raise Violation(f"liveness: more than {STEPS_MAX} steps")

    def _run_until(self, end_ms: int) -> None:
        self._step_until(end_ms=end_ms)

    def run(self) -> None:
        self._plan()
        self._run_until(self.config.end_ms)
        open_ledgers = [x for x in self.ledgers if x.cell.metadata.last_entry_id is None]
        for ledger in open_ledgers:
            final = Recoverer(ledger, "final", attempts_max=5)
            ledger.recoverers.append(final)
            self.scheduler.after(1, final.start)
        if open_ledgers:
            self._run_until(self.config.end_ms * 2)
        if self.config.autorecovery.enabled:
            self._run_until(self.scheduler.now + SETTLE_MS)
            self._stop_autorecovery()
        for ledger in self.ledgers:
            md = ledger.cell.metadata
            final_reader = self._read_back(ledger, md)
            entries = ledger.stored_entries(md)
            ledger.checker.final(entries, {"reader": ledger.reader.entries}, final_reader)
            if self.config.autorecovery.enabled:
                ledger.checker.final_replication()

    def _stop_autorecovery(self) -> None:
        if self.auditor is not None:
            self.auditor.stopped = True
        for worker in self.workers:
            worker.stopped = True

    def _read_back(self, ledger: LedgerSim, md: LedgerMetadata) -> FinalReader | None:
        """Read the whole CLOSED ledger through ``ReadOp`` over the healed network."""
        end = readable_end(md, None)
        if end is None:
            return None  # not CLOSED: Checker.final reports it
        final = FinalReader(ledger, md, end)
        self.scheduler.after(1, final.start)
        self._step_until(lambda: final.done)
        return final


def run_seed(seed: int) -> Simulation:
    """Run one seed; raise ``Violation`` (with the seed and the replay command) if an
    invariant breaks."""
    return run_config(draw_config(seed))


def run_config(config: Config) -> Simulation:
    """Run a drawn (maybe then adjusted) scenario, as ``run_seed`` does."""
    seed = config.seed
    sim = Simulation(config)
    try:
        sim.run()
    except Violation as exc:
        raise Violation(
            f"{exc}\n  {config.describe()}\n  replay: pytest tests/simulation --sim-seed={seed}"
        ) from exc
    return sim
