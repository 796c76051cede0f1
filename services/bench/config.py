"""What one ``quire bench`` run is asked to do, its bounds and its error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.bench.limits import FSYNC_PROBE_S


class BenchError(RuntimeError):
    """The benchmark cannot run; the message is one line for people."""


@dataclass(slots=True)
class BenchConfig:
    gateway: str | None = None
    token: str | None = None
    ca_file: Path | None = None  # verifies an https:// gateway (with --local --tls: its CA)
    local: bool = False
    tls: bool = False  # --local over TLS (services/cluster/tls.py)
    bookies: int = 3
    ledgers: int = 1
    ensemble: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    entry_size: int = 1024
    concurrency: int = 64
    batch: int = 1
    rate: float = 0.0
    duration_s: float = 10.0
    warmup_s: float = 1.0
    fsync_probe_s: float = FSYNC_PROBE_S  # --local: the raw fsync probe of its disk
    load_procs: int = 1
    keep_ledgers: bool = False
    work_dir: Path | None = None
    keep: bool = False
    profile: Path | None = None
    py_spy: str = "py-spy"
    # --log: append to one fresh log instead of adding to ledgers (services/bench/log_bench.py)
    log: bool = False
    roll_every_s: float = 5.0  # 0: no rolls
    idempotency_keys: bool = False
    handover: bool = False
    handover_reps: int = 5
    second_gateway: str | None = None  # the second gateway without --local
    # --forwarded: the load appends through the second gateway, which forwards to the
    # writer's (docs/logs.md "Any gateway appends").
    forwarded: bool = False
    quiet: bool = False  # no progress on stderr
    # --stream: single records over streaming appends (services/bench/stream_load.py), each
    # of the --concurrency connections with in_flight records in flight.
    stream: bool = False
    in_flight: int = 256

    def check(self) -> None:
        if not self.ensemble >= self.write_quorum >= self.ack_quorum >= 1:
            raise BenchError(
                "E >= Qw >= Qa >= 1 must hold: --ensemble "
                f"{self.ensemble}, --write-quorum {self.write_quorum}, "
                f"--ack-quorum {self.ack_quorum}"
            )
        if self.local and self.ensemble > self.bookies:
            raise BenchError(f"--ensemble {self.ensemble} needs as many --bookies")
        if self.load_procs > self.concurrency:
            raise BenchError("--load-procs cannot exceed --concurrency")
        if not self.log and (self.idempotency_keys or self.handover or self.forwarded):
            raise BenchError("--idempotency-keys, --handover and --forwarded need --log")
        if (self.handover or self.forwarded) and not self.local and self.second_gateway is None:
            raise BenchError("--handover and --forwarded need --local or --second-gateway URL")
        if self.stream and (self.batch != 1 or self.rate > 0 or self.idempotency_keys):
            raise BenchError("--stream sends single records unthrottled: no --batch, --rate "
                             "or --idempotency-keys")  # fmt: skip
        if self.second_gateway is not None and not (self.handover or self.forwarded):
            raise BenchError("--second-gateway is for --handover and --forwarded")
        if self.second_gateway is not None and self.second_gateway == self.gateway:
            raise BenchError("--second-gateway must be another gateway than --gateway")


# -- the local cluster --------------------------------------------------------
