"""One simulated run per seed: draw a scenario, run it, heal, close, check.

A scenario (all drawn from ``random.Random(seed)``): 3-7 bookies on 2-7 hosts, a
ledger with E >= Qw >= Qa >= 1, a writer gateway whose client appends batches with
a few requests outstanding, and a fault plan: message delays and drops, read
corruption, metadata store failures (sometimes after the write landed), partitions
between a gateway and a bookie, bookie crashes and restarts, bookies turning
read-only. Then one of: the writer closes the ledger; or 1-3 recoveries start
(concurrently) while the writer is alive and keeps appending (presumed dead but
not); or the writer crashes and recoveries follow.

A reader gateway tails the ledger meanwhile with the core's ``LacOp`` and ``ReadOp``
(LAC reads or long polls, pages or single entries, speculative reads and page
bounds drawn per seed). Phase 1 runs with faults until ``phase1_ms``; then
everything is healed (bookies up and writable, no drops, no partitions) and the run
continues; if the ledger is still not CLOSED a final recovery closes it. Finally
every entry is read back, from the bookies' storage and through ``ReadOp`` over the
network, and the invariants of ``checker`` are checked (they are also checked
during the run).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.placement import choose_ensemble
from services.protocol.reads import ReadLimits, read_sequence, readable_end, record_usable
from services.protocol.reads_lac import LacLimits
from services.protocol.recovery import LedgerRecovery, RecoveryLimits
from services.protocol.writer import WriteHandle, WriterLimits
from tests.simulation.actors import Recoverer, Runner, WriterClient
from tests.simulation.checker import Checker, Violation
from tests.simulation.readers import FinalReader, TailReader
from tests.simulation.world import Faults, MetadataCell, Network, Scheduler, SimBookie

LEDGER_ID = 42
STEPS_MAX = 200_000


@dataclass
class Config:
    seed: int
    bookies: list[str]
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    faults: Faults
    mode: str  # "writer-closes" | "recover-live-writer" | "writer-crashes"
    requests: int
    batch_max: int
    payload_max_bytes: int
    outstanding_max: int
    interarrival_max_ms: int
    request_timeout_ms: int
    writer_limits: WriterLimits
    recovery_limits: RecoveryLimits
    crashes: list[tuple[str, int, int]] = field(default_factory=list)  # bookie, down, up
    lost: list[tuple[str, int]] = field(default_factory=list)  # bookie, down for good
    readonly: list[tuple[str, int, int]] = field(default_factory=list)
    writer_close_at: int | None = None
    writer_crash_at: int | None = None
    recoveries_at: list[int] = field(default_factory=list)
    meddles_at: list[int] = field(default_factory=list)  # someone else CASes the metadata
    reader_limits: ReadLimits = field(default_factory=ReadLimits)
    lac_limits: LacLimits = field(default_factory=LacLimits)
    reader_long_poll_ms: int = 0  # 0: the reader only reads the LAC, never long-polls
    workload_start_ms: int = 1
    phase1_ms: int = 4_000
    end_ms: int = 20_000

    def describe(self) -> str:
        f = self.faults
        return (
            f"seed {self.seed}: {len(self.bookies)} bookies, E={self.ensemble_size} "
            f"Qw={self.write_quorum} Qa={self.ack_quorum}, mode {self.mode}, "
            f"{self.requests} requests (batch <= {self.batch_max}), delay <= {f.delay_max_ms} ms, "
            f"drop {f.drop_p:.3f}, corrupt {f.corrupt_read_p:.3f}, metadata failures "
            f"{f.metadata_fail_p:.3f}, partitions {f.partitions}, clogs {f.clogs}, slow "
            f"{f.slow}, crashes {self.crashes}, lost {self.lost}, "
            f"read-only {self.readonly}, close at {self.writer_close_at}, writer crash at "
            f"{self.writer_crash_at}, recoveries at {self.recoveries_at}, metadata touched "
            f"at {self.meddles_at}, reader {self.reader_limits}, {self.lac_limits}, long poll "
            f"{self.reader_long_poll_ms} ms"
        )


def draw_config(seed: int) -> Config:
    rng = random.Random(seed * 7919 + 1)
    hosts = rng.randint(2, 7)
    count = rng.randint(3, 7)
    bookies = [f"10.0.0.{i % hosts}:{3181 + i}" for i in range(count)]
    shape = rng.random()
    if shape < 0.3:
        e, w, a = 3, 2, 2
    elif shape < 0.5:  # Qa < Qw: absence needs more than one 'missing' answer
        shapes = [(3, 3, 2), (4, 3, 2), (5, 3, 2), (5, 4, 2)]
        e, w, a = rng.choice([x for x in shapes if x[0] <= count])
    else:
        e = rng.randint(1, min(5, count))
        w = rng.randint(1, e)
        a = rng.randint(1, w)
    calm = rng.random() < 0.2
    faults = Faults(
        delay_max_ms=rng.randint(1, 30),
        drop_p=0.0 if calm else rng.choice([0.0, 0.005, 0.02, 0.05]),
        corrupt_read_p=0.0 if calm else rng.choice([0.0, 0.01, 0.05]),
        metadata_fail_p=0.0 if calm else rng.choice([0.0, 0.05, 0.15]),
    )
    modes = ["writer-closes", "recover-live-writer", "recover-live-writer", "writer-crashes"]
    mode = rng.choice(modes)
    cfg = Config(
        seed=seed,
        bookies=bookies,
        ensemble_size=e,
        write_quorum=w,
        ack_quorum=a,
        faults=faults,
        mode=mode,
        requests=rng.randint(5, 80),
        batch_max=rng.choice([1, 2, 4]),
        payload_max_bytes=rng.choice([0, 8, 64]),
        outstanding_max=rng.randint(1, 6),
        interarrival_max_ms=rng.randint(1, 40),
        request_timeout_ms=rng.choice([60, 150, 400]),
        writer_limits=WriterLimits(
            add_timeout_ms=rng.choice([500, 1500, 3000]),
            explicit_lac_delay_ms=10,
            ensemble_change_retry_ms=100,
            metadata_retry_ms=50,
        ),
        recovery_limits=RecoveryLimits(recovery_read_batch_max=rng.choice([1, 4, 16])),
    )
    horizon = 1_500
    busy_until = cfg.requests * cfg.interarrival_max_ms // 2  # about when the client is done
    for _ in range(0 if calm else rng.randint(0, 3)):
        down = rng.randint(0, horizon)
        cfg.crashes.append((rng.choice(bookies), down, down + rng.randint(20, 2_000)))
    if not calm and a >= 2 and count > e and rng.random() < 0.3:
        # A bookie gone for good (its disk with it): at most Qa - 1 = 1 of them, and a spare
        # exists, so every acknowledged entry stays readable and can be re-replicated.
        cfg.lost.append((rng.choice(bookies), rng.randint(0, busy_until + 500)))
    for _ in range(0 if calm else rng.randint(0, 2)):
        start = rng.randint(0, horizon)
        gateway = rng.choice(["writer", "writer", "rec0", "rec1", "reader"])
        end = start + rng.randint(20, 1_000)
        faults.partitions.append((gateway, rng.choice(bookies), start, end))
    for _ in range(0 if calm else rng.randint(0, 3)):
        start = rng.randint(0, horizon)
        end = start + rng.randint(50, 1_500)
        faults.clogs.append((rng.choice(bookies), start, end, rng.randint(20, 600)))
    if not calm and rng.random() < 0.5:
        faults.slow[rng.choice(bookies)] = rng.choice([3, 10])
    if not calm and rng.random() < 0.3:
        start = rng.randint(0, horizon)
        cfg.readonly.append((rng.choice(bookies), start, start + rng.randint(50, 2_000)))
    if not calm and rng.random() < 0.3:
        cfg.meddles_at = sorted(rng.randint(0, horizon) for _ in range(rng.randint(1, 5)))
    if mode == "writer-closes" or rng.random() < 0.3:
        cfg.writer_close_at = rng.randint(200, 2_500)
    if mode == "writer-crashes":
        cfg.writer_crash_at = rng.randint(50, max(100, busy_until))
    if mode != "writer-closes":
        first = rng.randint(50, max(100, busy_until)) if mode == "recover-live-writer" else None
        start = first if first is not None else (cfg.writer_crash_at or 0) + rng.randint(0, 500)
        cfg.recoveries_at = [start + rng.randint(0, 60) for _ in range(rng.randint(1, 3))]
    speculative_ms = rng.choice([20, 60, 2_000])  # below or above the request time-out
    cfg.reader_limits = ReadLimits(
        speculative_read_ms=speculative_ms,
        page_entries_max=rng.choice([1, 4, 16]),
        page_bytes_max=rng.choice([1, 40, 1_000]),
    )
    cfg.lac_limits = LacLimits(
        speculative_read_ms=speculative_ms, lac_repoll_delay_ms=rng.choice([5, 20])
    )
    cfg.reader_long_poll_ms = rng.choice([0, 50, 300])
    return cfg


class Simulation:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.scheduler = Scheduler()
        self.faults = config.faults
        self.network = Network(self.scheduler, self.rng, self.faults)
        self.request_timeout_ms = config.request_timeout_ms
        ensemble = choose_ensemble(config.bookies, config.ensemble_size, self.rng)
        metadata = LedgerMetadata.new(
            LEDGER_ID, ensemble, config.write_quorum, config.ack_quorum, created_at=1
        )
        self.cell = MetadataCell(metadata)
        self.checker = Checker(self, config.ack_quorum)
        self.bookie_list = [
            SimBookie(b, LEDGER_ID, self.checker.on_store) for b in sorted(config.bookies)
        ]
        self.bookies = {b.bookie_id: b for b in self.bookie_list}
        self.recoveries: list[LedgerRecovery] = []
        self.lost: set[str] = set()
        handle = WriteHandle(
            metadata, 0, rng=random.Random(config.seed + 1), limits=config.writer_limits
        )
        self.handle = handle
        self.client: WriterClient
        self.writer = Runner(self, "writer", handle, lambda e: self.client.on_result(e))
        self.client = WriterClient(self, self.writer)
        self.recoverers = [
            Recoverer(self, f"rec{i}", attempts_max=5) for i in range(len(config.recoveries_at))
        ]
        self.reader = TailReader(self, "reader")

    def _plan(self) -> None:
        cfg, at = self.config, self.scheduler.at
        self.client.start()
        self.reader.start()
        for bookie, down, up in cfg.crashes:
            at(down, lambda b=bookie: setattr(self.bookies[b], "up", False))
            at(up, lambda b=bookie: setattr(self.bookies[b], "up", True))
        for bookie, down in cfg.lost:
            at(down, lambda b=bookie: self._lose(b))
        for bookie, start, end in cfg.readonly:
            at(start, lambda b=bookie: setattr(self.bookies[b], "readonly", True))
            at(end, lambda b=bookie: setattr(self.bookies[b], "readonly", False))
        if cfg.writer_close_at is not None:
            at(cfg.writer_close_at, lambda: self.client.close("close-1"))
            at(cfg.writer_close_at + 3_000, lambda: self.client.close("close-2"))
        if cfg.writer_crash_at is not None:
            at(cfg.writer_crash_at, lambda: setattr(self.writer, "dead", True))
        for recoverer, start in zip(self.recoverers, cfg.recoveries_at, strict=True):
            at(start, recoverer.start)
        for count, when in enumerate(cfg.meddles_at):
            at(when, lambda n=count: self._meddle(n))
        at(cfg.phase1_ms, self._heal)

    def _meddle(self, count: int) -> None:
        """Another party (say a replicator, or an admin tool) changes an OPEN ledger's
        metadata: the writer's next CAS loses and must retry on the fresh version."""
        md = self.cell.metadata
        if md.state is LedgerState.OPEN:
            self.cell.compare_and_set(replace(md, custom={"touched": count}), self.cell.version)
            self.checker.after_metadata_write("meddler")

    def _lose(self, bookie: str) -> None:
        self.bookies[bookie].up = False
        self.lost.add(bookie)

    def _heal(self) -> None:
        self.faults = self.network.faults = self.config.faults.healed()
        for bookie in self.bookie_list:
            bookie.up = bookie.bookie_id not in self.lost
            bookie.readonly = False

    def _run_until(self, end_ms: int) -> None:
        scheduler, checker = self.scheduler, self.checker
        while scheduler.now <= end_ms and scheduler.step():
            checker.after_step()
            if scheduler.steps > STEPS_MAX:
                raise Violation(f"liveness: more than {STEPS_MAX} steps")

    def run(self) -> None:
        self._plan()
        self._run_until(self.config.end_ms)
        if self.cell.metadata.last_entry_id is None:
            final = Recoverer(self, "final", attempts_max=5)
            self.recoverers.append(final)
            self.scheduler.after(1, final.start)
            self._run_until(self.config.end_ms * 2)
        md = self.cell.metadata
        final = self._read_back(md)
        entries: list[bytes | None] = []
        for entry_id in range((md.last_entry_id if md.last_entry_id is not None else -1) + 1):
            found = None
            for bookie in read_sequence(md, entry_id):
                if bookie in self.lost:
                    continue
                record = self.bookies[bookie].entries.get(entry_id)
                if record_usable(record, md, entry_id):
                    found = record.payload
                    break
            entries.append(found)
        self.checker.final(entries, {"reader": self.reader.entries}, final)

    def _read_back(self, md: LedgerMetadata) -> FinalReader | None:
        """Read the whole CLOSED ledger through ``ReadOp`` over the healed network."""
        end = readable_end(md, None)
        if end is None:
            return None  # not CLOSED: Checker.final reports it
        final = FinalReader(self, md, end)
        self.scheduler.after(1, final.start)
        scheduler, checker = self.scheduler, self.checker
        while not final.done and scheduler.step():
            checker.after_step()
            if scheduler.steps > STEPS_MAX:
                raise Violation(f"liveness: more than {STEPS_MAX} steps")
        return final


def run_seed(seed: int) -> Simulation:
    """Run one seed; raise ``Violation`` (with the seed and the replay command) if an
    invariant breaks."""
    config = draw_config(seed)
    sim = Simulation(config)
    try:
        sim.run()
    except Violation as exc:
        raise Violation(
            f"{exc}\n  {config.describe()}\n  replay: pytest tests/simulation --sim-seed={seed}"
        ) from exc
    return sim
