"""The simulated clients of the core: the application appending through the writer
gateway, and the gateways running recoveries (the runner is in ``runner``, the
readers in ``readers``, the replicator in ``replicator``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from services.protocol.messages import (
    AckAdds,
    AddRequested,
    CloseDone,
    CloseFailed,
    CloseRequested,
    Effect,
    FailAdds,
    RecoveryDone,
    RecoveryFailed,
)
from services.protocol.recovery import LedgerRecovery
from tests.simulation.runner import Runner

if TYPE_CHECKING:
    from tests.simulation.scenario import LedgerSim


class WriterClient:
    """The application appending through the writer gateway: bounded outstanding requests."""

    def __init__(self, sim: LedgerSim, runner: Runner) -> None:
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
    """A gateway running ``POST /recover``: reads the metadata (maybe stale), runs
    ``LedgerRecovery``, retries a failed recovery a bounded number of times."""

    def __init__(
        self,
        sim: LedgerSim,
        name: str,
        attempts_max: int,
        on_done: Callable[[RecoveryDone | None], None] | None = None,
    ) -> None:
        self.sim = sim
        self.on_done = on_done  # told the result, or None once every attempt failed
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
        metadata, version = sim.read_metadata(self.name, stale=True)
        recovery = LedgerRecovery(
            metadata, version, digest_key=sim.key, limits=sim.config.recovery_limits
        )
        sim.recoveries.append(recovery)
        runner = Runner(sim, self.name, recovery, self.on_result, stale_reads=True)
        runner.execute(recovery.start(sim.scheduler.now))

    def on_result(self, effect: Effect) -> None:
        if isinstance(effect, RecoveryDone):
            self.result = effect
            self.sim.checker.on_recovery_done(self.name, effect)
            if self.on_done is not None:
                self.on_done(effect)
        elif isinstance(effect, RecoveryFailed):
            self.failures.append(effect)
            if self.attempts < self.attempts_max:
                self.sim.scheduler.after(self.sim.rng.randint(50, 400), self.start)
            elif self.on_done is not None:
                self.on_done(None)
