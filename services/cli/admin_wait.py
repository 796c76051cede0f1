"""Waiting for re-replication: ``quire admin wait-replicated`` and ``decommission --wait``.

The wait polls the gateway every ``interval_s`` until its condition holds or
``timeout_s`` passed. ``RepairTracker`` turns the polls into what the progress bar
shows: ledgers left (the under-replicated count now), ledgers repaired since the wait
began (the most ever left minus those left now), and MB copied — the ``bytes_copied``
the replication workers report in their locks, the highest seen per ledger, summed
over every ledger seen (a ledger whose last copy happened between two polls is counted
with what the previous poll saw) — and the rates of both.

Clock and sleep are parameters, so the deadline logic is tested without waiting.
A poll that fails on a transient error (gateway restarting, ZooKeeper blip) is the
caller's to retry (``services/cli/admin.py`` shows the last figures again).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BYTES_PER_MB = 1_000_000


@dataclass(frozen=True, slots=True)
class Poll:
    """What one poll of the gateway saw."""

    left: int  # under-replicated ledgers now
    copied_bytes: dict[int, int]  # ledger id -> bytes_copied in its worker's lock
    done: bool
    replication_enabled: bool = True


@dataclass(frozen=True, slots=True)
class View:
    left: int
    total: int
    repaired: int
    mb_copied: float
    mb_per_s: float
    ledgers_per_min: float
    elapsed_s: float

    def line(self) -> str:
        return (
            f"{self.left} ledgers left, {self.repaired}/{self.total} repaired, "
            f"{self.mb_copied:.1f} MB copied ({self.mb_per_s:.1f} MB/s, "
            f"{self.ledgers_per_min:.0f} ledgers/min), {self.elapsed_s:.0f} s"
        )


@dataclass
class RepairTracker:
    started_s: float
    most_left: int = 0
    copied: dict[int, int] = field(default_factory=dict)

    def update(self, poll: Poll, now_s: float) -> View:
        self.most_left = max(self.most_left, poll.left)
        for ledger_id, size in poll.copied_bytes.items():
            self.copied[ledger_id] = max(self.copied.get(ledger_id, 0), size)
        elapsed = max(0.0, now_s - self.started_s)
        repaired = self.most_left - poll.left
        mb = sum(self.copied.values()) / BYTES_PER_MB
        return View(
            left=poll.left,
            total=self.most_left,
            repaired=repaired,
            mb_copied=mb,
            mb_per_s=mb / elapsed if elapsed > 0 else 0.0,
            ledgers_per_min=repaired * 60.0 / elapsed if elapsed > 0 else 0.0,
            elapsed_s=elapsed,
        )


def copied_bytes(ledgers: list[dict[str, Any]]) -> dict[int, int]:
    """``bytes_copied`` per ledger from an under-replicated listing's progress objects."""
    out: dict[int, int] = {}
    for row in ledgers:
        progress = row.get("progress") or {}
        size = progress.get("bytes_copied") if isinstance(progress, dict) else None
        if isinstance(size, int) and not isinstance(size, bool):
            out[int(row["ledger_id"])] = size
    return out


def wait_until(
    poll: Callable[[], Poll],
    show: Callable[[View, Poll], None],
    *,
    timeout_s: float | None,
    interval_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll until done (True) or until ``timeout_s`` passed (False); ``show`` each view.
    The last sleep is cut to the deadline and the last poll is made there."""
    started = clock()
    deadline = None if timeout_s is None else started + timeout_s
    tracker = RepairTracker(started)
    while True:
        seen = poll()
        show(tracker.update(seen, clock()), seen)
        if seen.done:
            return True
        now = clock()
        if deadline is not None and now >= deadline:
            return False
        pause = interval_s if deadline is None else min(interval_s, deadline - now)
        sleep(max(0.0, pause))
