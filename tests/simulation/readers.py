"""The simulated readers: gateways that never fence, running the core's ``LacOp`` and
``ReadOp`` through the simulated network as the gateway's read runner does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.protocol.messages import Effect
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import ReadOp, readable_end
from services.protocol.reads_lac import LacOp
from services.protocol.reads_messages import LacDone, ReadDone, ReadFailed
from tests.simulation.runner import Runner

if TYPE_CHECKING:
    from tests.simulation.scenario import LedgerSim

READER_AFTER_HEAL_MS = 1_000


class TailReader:
    """A reader that never fences, as a non-writer gateway serves one: learns the LAC from
    the last fragment's bookies (``LacOp``: a LAC read, or a long poll past the LAC it
    has), keeps the highest it saw, and reads up to the readable end (``ReadOp``: pages,
    or single entries) with failover between replicas; once the ledger is CLOSED it
    reads to the last entry and stops. Its metadata reads may be stale (a lagging
    ZooKeeper follower), and a replicator may swap bookies under it."""

    def __init__(self, sim: LedgerSim, name: str) -> None:
        self.sim = sim
        self.name = name
        self.lac = -1
        self.entries: list[bytes] = []
        self._md: LedgerMetadata = sim.cell.metadata

    def start(self) -> None:
        self.sim.scheduler.after(self.sim.rng.randint(5, 40), self.poll)

    def _run(self, op: LacOp | ReadOp) -> None:
        runner = Runner(self.sim, self.name, op, self.on_result, stale_reads=True)
        runner.execute(op.start(self.sim.scheduler.now))

    def poll(self) -> None:
        cfg = self.sim.config
        md = self._md = self.sim.read_metadata(self.name, stale=True)[0]
        end = readable_end(md, None)
        if end is not None:
            self._read(end)
        elif cfg.reader_long_poll_ms and self.sim.rng.random() < 0.5:
            wait_ms = cfg.reader_long_poll_ms
            self._run(LacOp(md, after=self.lac, wait_ms=wait_ms, limits=cfg.lac_limits))
        else:
            self._run(LacOp(md, limits=cfg.lac_limits))

    def _read(self, end: int) -> None:
        cfg, first = self.sim.config, len(self.entries)
        if first > end:
            self._next_poll()
        elif self.sim.rng.random() < 0.2:
            op = ReadOp.entry(
                self._md, first, end, digest_key=self.sim.key, limits=cfg.reader_limits
            )
            self._run(op)
        else:
            op = ReadOp.page(
                self._md, first, end, digest_key=self.sim.key, limits=cfg.reader_limits
            )
            self._run(op)

    def on_result(self, effect: Effect | LacDone | ReadDone | ReadFailed) -> None:
        if isinstance(effect, LacDone):
            self.lac = max(self.lac, effect.lac)  # a bookie may report a lower LAC
            self._read(readable_end(self._md, self.lac))
            return
        if isinstance(effect, ReadDone):
            for entry_id, payload in effect.entries:
                if entry_id != len(self.entries):
                    self.sim.checker.fail(f"{self.name} got entry {entry_id} out of order")
                self.sim.checker.on_read(self.name, entry_id, payload, self._md, self.lac)
                self.entries.append(payload)
        self._next_poll()  # after a read, or a LAC or read that failed (no replica now)

    def _next_poll(self) -> None:
        sim, md = self.sim, self.sim.cell.metadata
        caught_up = md.last_entry_id is not None and len(self.entries) > md.last_entry_id
        # It tails the ledger through the faults and a while after healing, not for ever.
        if not caught_up and sim.scheduler.now < sim.config.phase1_ms + READER_AFTER_HEAL_MS:
            sim.scheduler.after(sim.rng.randint(30, 120), self.poll)


class FinalReader:
    """The read-back of the whole CLOSED ledger after healing, page by page through
    ``ReadOp``: every entry must come back (``Checker.final``)."""

    def __init__(self, sim: LedgerSim, md: LedgerMetadata, end: int) -> None:
        self.sim = sim
        self.md = md
        self.end = end  # the readable end of the CLOSED ledger
        self.entries: list[bytes] = []
        self.failure: ReadFailed | None = None
        self.done = False

    def start(self) -> None:
        if len(self.entries) > self.end:
            self.done = True
            return
        op = ReadOp.page(self.md, len(self.entries), self.end, digest_key=self.sim.key)
        runner = Runner(self.sim, "final-reader", op, self.on_result)
        runner.execute(op.start(self.sim.scheduler.now))

    def on_result(self, effect: Any) -> None:
        if isinstance(effect, ReadDone):
            self.entries.extend(payload for _, payload in effect.entries)
            self.start()
        elif isinstance(effect, ReadFailed):
            self.failure = effect
            self.done = True
