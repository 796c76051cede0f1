"""What one seed runs: the scenario drawn from ``random.Random(seed)``.

Shared by the ledgers of a run: 3-7 bookies on 2-7 hosts, each with its own write
path (journal sync or not, commit failures, commit time, batch bound); a fault plan
(message delays and drops, duplicated adds and fences, read corruption, metadata
store failures, CAS writes that land after their caller gave up, stale metadata
reads, partitions between a gateway and a bookie, clogged and slow bookies, bookie
crashes and restarts, a bookie gone for good, a bookie wiped (``quire bookie format``)
that comes back as a new instance, bookies turning read-only); and whether the writer
gateway batches each bookie's adds across its ledgers.

Per ledger (1-3 of them): E >= Qw >= Qa >= 1, CRC32C or HMAC-SHA256 with a real key,
a workload, and one of: the writer closes the ledger; 1-3 recoveries start
(concurrently) while the writer is alive and keeps appending (presumed dead but
not); or the writer crashes and recoveries follow. Someone else may touch the
metadata of the OPEN ledger, and a replicator may swap a bookie inside a fragment
once it is CLOSED. Most runs also have an auditor and 1-3 replication workers
(``AutoRecoveryPlan``: lost-bookie delay, audit interval, open-ledger grace, worker
crashes), drawn from their own random stream. A reader tails each ledger (LAC reads
or long polls, pages or single entries, speculative reads and page bounds drawn per
seed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from services.protocol.limits import LacLimits, ReadLimits, RecoveryLimits, WriterLimits
from tests.simulation.bookie import BookieModel
from tests.simulation.world import Faults

FIRST_LEDGER_ID = 42
PHASE1_MS = 4_000
AUTORECOVERY_OFF_P = 0.2  # seeds without an auditor and workers
WIPE_P = 0.3  # seeds (that can afford one) with a bookie wiped and back as a new instance
END_MS = 20_000


@dataclass
class LedgerPlan:
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    digest_type: str
    password: bytes
    mode: str  # "writer-closes" | "recover-live-writer" | "writer-crashes"
    requests: int
    batch_max: int
    payload_max_bytes: int
    outstanding_max: int
    interarrival_max_ms: int
    writer_limits: WriterLimits
    recovery_limits: RecoveryLimits
    writer_close_at: int | None = None
    writer_crash_at: int | None = None
    recoveries_at: list[int] = field(default_factory=list)
    meddles_at: list[int] = field(default_factory=list)  # someone else CASes the metadata
    swaps_at: list[int] = field(default_factory=list)  # a replicator swaps a bookie
    reader_limits: ReadLimits = field(default_factory=ReadLimits)
    lac_limits: LacLimits = field(default_factory=LacLimits)
    reader_long_poll_ms: int = 0  # 0: the reader only reads the LAC, never long-polls
    workload_start_ms: int = 1
    phase1_ms: int = PHASE1_MS
    end_ms: int = END_MS

    def describe(self) -> str:
        return (
            f"ledger {self.ledger_id}: E={self.ensemble_size} Qw={self.write_quorum} "
            f"Qa={self.ack_quorum} {self.digest_type}, mode {self.mode}, {self.requests} "
            f"requests (batch <= {self.batch_max}), close at {self.writer_close_at}, writer "
            f"crash at {self.writer_crash_at}, recoveries at {self.recoveries_at}, metadata "
            f"touched at {self.meddles_at}, swaps at {self.swaps_at}, reader "
            f"{self.reader_limits}, {self.lac_limits}, long poll {self.reader_long_poll_ms} ms"
        )


@dataclass
class AutoRecoveryPlan:
    """The auditor and the replication workers of one run (``enabled`` False: none)."""

    enabled: bool = False
    lost_bookie_delay_ms: int = 0
    audit_interval_ms: int = 1_000
    open_ledger_grace_ms: int = 1_000
    workers: int = 1
    session_timeout_ms: int = 200
    # (worker index, at ms, back after ms): the worker's session is lost
    worker_crashes: list[tuple[int, int, int]] = field(default_factory=list)
    # Until healed: a lock's create or delete (a worker's or the auditor's) answers
    # ConnectionLoss, landed or not, and the session stays SUSPENDED (but alive) a while
    lock_connection_loss_p: float = 0.0
    # Until healed: the auditor's session ends while it holds a lock to clear a mark
    auditor_session_end_p: float = 0.0

    def describe(self) -> str:
        if not self.enabled:
            return "no auto-recovery"
        return (
            f"auto-recovery: delay {self.lost_bookie_delay_ms} ms, audit every "
            f"{self.audit_interval_ms} ms, grace {self.open_ledger_grace_ms} ms, "
            f"{self.workers} workers, session time-out {self.session_timeout_ms} ms, "
            f"worker crashes {self.worker_crashes}, lock connection losses "
            f"{self.lock_connection_loss_p:.2f}, auditor session ends "
            f"{self.auditor_session_end_p:.2f}"
        )


@dataclass
class Config:
    seed: int
    bookies: list[str]
    faults: Faults
    request_timeout_ms: int
    ledgers: list[LedgerPlan] = field(default_factory=list)
    models: dict[str, BookieModel] = field(default_factory=dict)
    # (requests in flight, entries per request) of the writer gateway's per-bookie
    # senders shared by its ledgers; None: each handle's SendAdds goes out alone
    shared_batches: tuple[int, int] | None = None
    crashes: list[tuple[str, int, int]] = field(default_factory=list)  # bookie, down, up
    lost: list[tuple[str, int]] = field(default_factory=list)  # bookie, down for good
    # bookie, down, up: crashed, formatted (everything stored is gone) and restarted as a
    # new instance
    wipes: list[tuple[str, int, int]] = field(default_factory=list)
    readonly: list[tuple[str, int, int]] = field(default_factory=list)
    autorecovery: AutoRecoveryPlan = field(default_factory=AutoRecoveryPlan)
    phase1_ms: int = PHASE1_MS
    end_ms: int = END_MS

    def describe(self) -> str:
        f = self.faults
        models = {b: m for b, m in self.models.items() if m != BookieModel()}
        lines = [
            f"seed {self.seed}: {len(self.bookies)} bookies, delay <= {f.delay_max_ms} ms, "
            f"drop {f.drop_p:.3f}, duplicate {f.duplicate_p:.3f}, corrupt {f.corrupt_read_p:.3f}, "
            f"metadata failures {f.metadata_fail_p:.3f}, late CAS {f.late_cas_p:.3f}, stale "
            f"reads <= {f.stale_read_ms} ms, partitions {f.partitions}, clogs {f.clogs}, slow "
            f"{f.slow}, crashes {self.crashes}, lost {self.lost}, wiped {self.wipes}, read-only "
            f"{self.readonly}, "
            f"bookies {models}, shared batches {self.shared_batches}, request time-out "
            f"{self.request_timeout_ms} ms"
        ]
        lines.append(f"    {self.autorecovery.describe()}")
        lines += [f"    {plan.describe()}" for plan in self.ledgers]
        return "\n".join(lines)


def _shape(rng: random.Random, count: int) -> tuple[int, int, int]:
    shape = rng.random()
    if shape < 0.3:
        return 3, 2, 2
    if shape < 0.5:  # Qa < Qw: absence needs more than one 'missing' answer
        shapes = [(3, 3, 2), (4, 3, 2), (5, 3, 2), (5, 4, 2)]
        return rng.choice([x for x in shapes if x[0] <= count])
    e = rng.randint(1, min(5, count))
    w = rng.randint(1, e)
    return e, w, rng.randint(1, w)


def _draw_ledger(
    rng: random.Random, ledger_id: int, count: int, ledgers: int, calm: bool
) -> LedgerPlan:
    e, w, a = _shape(rng, count)
    modes = ["writer-closes", "recover-live-writer", "recover-live-writer", "writer-crashes"]
    mode = rng.choice(modes)
    hmac = rng.random() < 0.3
    plan = LedgerPlan(
        ledger_id=ledger_id,
        ensemble_size=e,
        write_quorum=w,
        ack_quorum=a,
        digest_type="hmac-sha256" if hmac else "crc32c",
        password=rng.randbytes(8) if hmac else b"",
        mode=mode,
        requests=max(3, rng.randint(4, 30) // ledgers),
        batch_max=rng.choice([1, 2, 4]),
        payload_max_bytes=rng.choice([0, 8, 64]),
        outstanding_max=rng.randint(1, 6),
        interarrival_max_ms=rng.randint(1, 40),
        writer_limits=WriterLimits(
            add_timeout_ms=rng.choice([500, 1500, 3000]),
            explicit_lac_delay_ms=10,
            ensemble_change_retry_ms=100,
            metadata_retry_ms=50,
        ),
        recovery_limits=RecoveryLimits(recovery_read_batch_max=rng.choice([1, 4, 16])),
    )
    horizon = 1_500
    busy_until = plan.requests * plan.interarrival_max_ms // 2  # about when the client is done
    if not calm and rng.random() < 0.3:
        plan.meddles_at = sorted(rng.randint(0, horizon) for _ in range(rng.randint(1, 5)))
    if mode == "writer-closes" or rng.random() < 0.3:
        plan.writer_close_at = rng.randint(200, 2_500)
    if mode == "writer-crashes":
        plan.writer_crash_at = rng.randint(50, max(100, busy_until))
    if mode != "writer-closes":
        first = rng.randint(50, max(100, busy_until)) if mode == "recover-live-writer" else None
        start = first if first is not None else (plan.writer_crash_at or 0) + rng.randint(0, 500)
        plan.recoveries_at = [start + rng.randint(0, 60) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        plan.swaps_at = sorted(rng.randint(100, 3_000) for _ in range(rng.randint(1, 2)))
    speculative_ms = rng.choice([20, 60, 2_000])  # below or above the request time-out
    plan.reader_limits = ReadLimits(
        speculative_read_ms=speculative_ms,
        page_entries_max=rng.choice([1, 4, 16]),
        page_bytes_max=rng.choice([1, 40, 1_000]),
    )
    plan.lac_limits = LacLimits(
        speculative_read_ms=speculative_ms, lac_repoll_delay_ms=rng.choice([5, 20])
    )
    plan.reader_long_poll_ms = rng.choice([0, 50, 300])
    return plan


def _draw_models(rng: random.Random, cfg: Config, calm: bool) -> None:
    unsynced = [] if calm or rng.random() < 0.7 else rng.sample(cfg.bookies, rng.randint(1, 2))
    commit_fail_p = 0.0 if calm else rng.choice([0.0, 0.0, 0.01, 0.05])
    for bookie in cfg.bookies:
        cfg.models[bookie] = BookieModel(
            journal_sync=bookie not in unsynced,
            commit_fail_p=commit_fail_p if rng.random() < 0.5 else 0.0,
            commit_ms_max=rng.choice([1, 3, 10]),
            batch_ops_max=rng.choice([1, 4, 16]),
        )


def draw_config(seed: int) -> Config:
    rng = random.Random(seed * 7919 + 1)
    hosts = rng.randint(2, 7)
    count = rng.randint(3, 7)
    bookies = [f"10.0.0.{i % hosts}:{3181 + i}" for i in range(count)]
    calm = rng.random() < 0.2
    faults = Faults(
        delay_max_ms=rng.randint(1, 30),
        drop_p=0.0 if calm else rng.choice([0.0, 0.005, 0.02, 0.05]),
        corrupt_read_p=0.0 if calm else rng.choice([0.0, 0.01, 0.05]),
        metadata_fail_p=0.0 if calm else rng.choice([0.0, 0.05, 0.15]),
        duplicate_p=0.0 if calm else rng.choice([0.0, 0.02, 0.1]),
        late_cas_p=0.0 if calm else rng.choice([0.0, 0.05, 0.2]),
        stale_read_ms=0 if calm else rng.choice([0, 0, 100, 500]),
    )
    cfg = Config(
        seed=seed,
        bookies=bookies,
        faults=faults,
        request_timeout_ms=rng.choice([60, 150, 400]),
    )
    _draw_models(rng, cfg, calm)
    ledgers = rng.choices([1, 2, 3], weights=[7, 2, 1])[0]
    cfg.ledgers = [
        _draw_ledger(rng, FIRST_LEDGER_ID + i, count, ledgers, calm) for i in range(ledgers)
    ]
    if rng.random() < (0.7 if ledgers > 1 else 0.3):
        cfg.shared_batches = (rng.randint(1, 3), rng.choice([4, 16, 64]))
    horizon = 1_500
    busy_until = max(p.requests * p.interarrival_max_ms // 2 for p in cfg.ledgers)
    for _ in range(0 if calm else rng.randint(0, 3)):
        down = rng.randint(0, horizon)
        cfg.crashes.append((rng.choice(bookies), down, down + rng.randint(20, 2_000)))
    qa_min = min(p.ack_quorum for p in cfg.ledgers)
    e_max = max(p.ensemble_size for p in cfg.ledgers)
    if not calm and qa_min >= 2 and count > e_max and rng.random() < 0.3:
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
    _draw_autorecovery(cfg, calm)
    _draw_wipes(cfg)
    return cfg


def _draw_wipes(cfg: Config) -> None:
    """A bookie wiped and back as a new instance, from its own random stream (so the rest
    of a seed's scenario is what it was before wipes existed). A wipe loses that bookie's
    copies, as a lost bookie does: at most one of them per run and Qa >= 2 everywhere, so
    every acknowledged entry keeps a copy. It lands while the writers write, or around a
    recovery's fence, and the bookie is soon back, so that a writer (maybe an old one)
    adds to the new instance (issue 35 item 3)."""
    rng = random.Random(cfg.seed * 7919 + 3)
    qa_min = min(p.ack_quorum for p in cfg.ledgers)
    if cfg.lost or qa_min < 2 or rng.random() >= WIPE_P:
        return
    busy_until = max(p.requests * p.interarrival_max_ms // 2 for p in cfg.ledgers)
    starts = [t for p in cfg.ledgers for t in p.recoveries_at]
    if starts and rng.random() < 0.5:
        down = max(0, rng.choice(starts) + rng.randint(-50, 300))
    else:
        down = rng.randint(0, max(100, busy_until))
    cfg.wipes.append((rng.choice(cfg.bookies), down, down + rng.randint(1, 300)))


def _draw_autorecovery(cfg: Config, calm: bool) -> None:
    """The auditor and workers, from their own random stream (so the rest of a seed's
    scenario is what it was before they existed); more bookies lost for good, while
    the writers still write, so that repairs race ensemble changes, closes and
    recoveries."""
    rng = random.Random(cfg.seed * 7919 + 2)
    if rng.random() < AUTORECOVERY_OFF_P:
        return
    plan = cfg.autorecovery
    plan.enabled = True
    plan.lost_bookie_delay_ms = rng.choice([0, 50, 300, 1_000])
    plan.audit_interval_ms = rng.choice([500, 1_000, 2_000])
    plan.open_ledger_grace_ms = rng.choice([100, 500, 2_000])
    plan.workers = rng.randint(1, 3)
    plan.session_timeout_ms = rng.choice([50, 200, 800])
    for _ in range(0 if calm else rng.randint(0, 2)):
        plan.worker_crashes.append(
            (rng.randrange(plan.workers), rng.randint(100, PHASE1_MS), rng.randint(0, 1_500))
        )
    if not calm:  # the repair lock's faults, from a stream of their own (issue 35)
        locks = random.Random(cfg.seed * 7919 + 4)
        plan.lock_connection_loss_p = locks.choice([0.0, 0.1, 0.3])
        plan.auditor_session_end_p = locks.choice([0.0, 0.2, 0.5, 0.8])
    qa_min = min(p.ack_quorum for p in cfg.ledgers)
    e_max = max(p.ensemble_size for p in cfg.ledgers)
    if not cfg.lost and qa_min >= 2 and len(cfg.bookies) > e_max and rng.random() < 0.5:
        busy_until = max(p.requests * p.interarrival_max_ms // 2 for p in cfg.ledgers)
        cfg.lost.append((rng.choice(cfg.bookies), rng.randint(0, busy_until + 1_000)))
