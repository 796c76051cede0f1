"""services/cli/admin_wait.py: the figures of the re-replication progress bar (ledgers
left and repaired, MB copied from the workers' locks, rates) and the wait loop's
deadline, on a fake clock."""

from __future__ import annotations

import pytest

from services.cli.admin_wait import Poll, RepairTracker, View, copied_bytes, wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_tracker_counts_repaired_from_the_most_left_and_keeps_copied_bytes() -> None:
    """Repaired = the most ledgers ever left minus those left now; the MB copied keeps a
    finished ledger's last figure after its lock is gone; rates divide by the time."""
    tracker = RepairTracker(started_s=0.0)
    first = tracker.update(Poll(4, {1: 1_000_000}, False), 0.0)
    assert (first.left, first.total, first.repaired) == (4, 4, 0)
    assert first.mb_per_s == 0.0 and first.ledgers_per_min == 0.0
    tracker.update(Poll(5, {1: 3_000_000, 2: 500_000}, False), 5.0)  # a new mark: total grows
    view = tracker.update(Poll(2, {2: 1_500_000}, False), 10.0)  # ledger 1 done: lock gone
    assert (view.left, view.total, view.repaired) == (2, 5, 3)
    assert view.mb_copied == pytest.approx(4.5)
    assert view.mb_per_s == pytest.approx(0.45)
    assert view.ledgers_per_min == pytest.approx(18.0)
    assert "2 ledgers left" in view.line() and "4.5 MB" in view.line()


def test_a_lower_figure_in_a_later_lock_does_not_lower_the_total() -> None:
    """A retried repair restarts its byte count; the tracker keeps the highest seen."""
    tracker = RepairTracker(started_s=0.0)
    tracker.update(Poll(1, {9: 2_000_000}, False), 1.0)
    assert tracker.update(Poll(1, {9: 10}, False), 2.0).mb_copied == pytest.approx(2.0)


def test_copied_bytes_reads_only_integer_progress() -> None:
    """bytes_copied is taken from each row's progress; rows without one are skipped."""
    rows = [
        {"ledger_id": 1, "progress": {"bytes_copied": 7}},
        {"ledger_id": 2, "progress": None},
        {"ledger_id": 3, "progress": {"bytes_copied": "x"}},
        {"ledger_id": 4, "progress": {"bytes_copied": True}},
        {"ledger_id": 5, "progress": {}},
    ]
    assert copied_bytes(rows) == {1: 7}


def test_wait_until_returns_true_once_done_and_shows_every_poll() -> None:
    """The loop polls every interval until done, showing each poll's view."""
    clock = FakeClock()
    polls = iter([Poll(3, {}, False), Poll(1, {}, False), Poll(0, {}, True)])
    shown: list[View] = []
    done = wait_until(
        lambda: next(polls),
        lambda view, _seen: shown.append(view),
        timeout_s=60.0,
        interval_s=2.0,
        clock=clock,
        sleep=clock.sleep,
    )
    assert done is True
    assert [v.left for v in shown] == [3, 1, 0] and shown[-1].repaired == 3
    assert clock.sleeps == [2.0, 2.0]


def test_wait_until_gives_up_at_the_deadline() -> None:
    """With a timeout the loop returns False at the deadline: the last sleep is cut to
    it, and it never waits past it."""
    clock = FakeClock()
    polls: list[float] = []

    def poll() -> Poll:
        polls.append(clock.now)
        return Poll(5, {}, False)

    done = wait_until(
        poll, lambda _v, _s: None, timeout_s=5.0, interval_s=2.0, clock=clock, sleep=clock.sleep
    )
    assert done is False
    assert clock.sleeps == [2.0, 2.0, 1.0]
    assert polls == [100.0, 102.0, 104.0, 105.0] and clock.now == 105.0


def test_wait_until_without_timeout_only_stops_when_done() -> None:
    """No timeout: the loop keeps polling however long it takes."""
    clock = FakeClock()
    remaining = [50]

    def poll() -> Poll:
        remaining[0] -= 1
        return Poll(remaining[0], {}, remaining[0] == 0)

    assert wait_until(
        poll, lambda _v, _s: None, timeout_s=None, interval_s=60.0, clock=clock, sleep=clock.sleep
    )
    assert len(clock.sleeps) == 49
