"""How long an empty long poll waits (services/protocol/long_poll.py, docs/api.md
"Conventions"): never longer than asked, at most a sixteenth shorter, and drawn per poll
so that polls asked together end at different times."""

from __future__ import annotations

import random

from services.protocol import long_poll


def test_a_wait_ends_in_the_last_sixteenth_never_late() -> None:
    """Every draw is in [wait - wait // 16, wait], whole ms; the draws of short waits
    reach both ends of that range (it is not one point)."""
    rng = random.Random(42)
    for asked in (16, 100, 1_600, 30_000):
        draws = [long_poll.wait_ms(asked, rng) for _ in range(2_000)]
        assert min(draws) >= asked - asked // 16
        assert max(draws) <= asked
        if asked <= 100:
            assert min(draws) == asked - asked // 16 and max(draws) == asked


def test_polls_asked_together_end_at_different_times() -> None:
    """1,000 polls of 30 s asked at once end over the last 1.875 s, not in one instant:
    no single ms holds more than a few of them."""
    rng = random.Random(7)
    draws = [long_poll.wait_ms(30_000, rng) for _ in range(1_000)]
    assert max(draws) - min(draws) > 1_700
    assert max(draws.count(d) for d in set(draws)) <= 6


def test_short_waits_are_not_spread() -> None:
    """A wait under 16 ms is waited whole, and no wait is no wait."""
    rng = random.Random(1)
    assert [long_poll.wait_ms(ms, rng) for ms in (0, 1, 15)] == [0, 1, 15]
