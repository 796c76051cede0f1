"""Pacing of the writer thread's background work: the purge of deleted ledgers' entries
and the vacuum after it (bookie/writer.py, "The purge").

Pure, so the tests drive it with their own clock:

- ``Pacer`` says when the next step may run: at once while the writer is idle, else
  only once the steps so far have held at most ``share`` of the writer's time (a step
  of ``took`` seconds is followed by ``took * (1 - share) / share`` seconds of the
  writer's own work before the next one).
- ``StepSize`` scales the next step (entry rows deleted, pages vacuumed) by the time
  the last one took, so each takes about ``target_s`` whatever the entries' sizes and
  the disk.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Pacer:
    share: float
    next_at: float = 0.0

    def wait_s(self, now: float) -> float:
        """Seconds until the next step may run (0: now)."""
        return max(0.0, self.next_at - now)

    def ran(self, ended: float, took_s: float, busy: bool) -> None:
        """A step of ``took_s`` seconds ended at ``ended``: while ``busy`` (the writer has
        operations to serve) the next one waits so the steps keep to ``share``."""
        self.next_at = ended + (took_s * (1 - self.share) / self.share if busy else 0.0)


@dataclass(slots=True)
class StepSize:
    size: int
    low: int
    high: int
    target_s: float

    def ran(self, did: int, took_s: float) -> None:
        """The last step did ``did`` units (rows, pages) in ``took_s``: size the next one
        to take about ``target_s``, at most doubling or halving at a time. A step that
        found less to do than its size says nothing about the rate."""
        if did < self.size or took_s <= 0:
            return
        scaled = int(self.size * self.target_s / took_s)
        self.size = max(self.low, min(self.high, self.size * 2, max(self.size // 2, scaled)))
