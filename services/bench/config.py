"""What one ``quire bench`` run is asked to do, its bounds and its error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LEDGER_CREATE_THREADS = 16
WRITABLE_WAIT_S = 30.0
START_DELAY_S = 1.0  # the load processes import and connect before the clock starts
LOAD_SLACK_S = 90.0  # a load process that outlives its window by this much is killed
FSYNC_PROBE_S = 2.0
PORT_BLOCK_TRIES = 200
CLIENTS_MAX = 10_000
LEDGERS_MAX = 100_000


class BenchError(RuntimeError):
    """The benchmark cannot run; the message is one line for people."""


@dataclass(slots=True)
class BenchConfig:
    gateway: str | None = None
    token: str | None = None
    local: bool = False
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
    load_procs: int = 1
    keep_ledgers: bool = False
    work_dir: Path | None = None
    keep: bool = False
    profile: Path | None = None
    py_spy: str = "py-spy"

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


# -- the local cluster --------------------------------------------------------
