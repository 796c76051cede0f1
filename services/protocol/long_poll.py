"""How long an empty long poll of the gateway waits (docs/api.md "Conventions": a long
poll may be answered up to ``wait_ms``/16 early, never late).

A tailing reader asks again as soon as its long poll is answered, so readers that
started together stay together: 5,000 readers opened within seconds had their polls end
in the same second every 30 s, a burst of 5,000 answers and new polls that stalled every
other request of the gateway for seconds (benchmarks/README.md, "Many open things").
Each empty poll therefore ends at a point drawn uniformly from the last sixteenth of its
wait, as Consul's blocking queries do (they add up to wait/16 instead: a client whose
own time-out is sized to its ``wait_ms`` must never see the gateway answer after it).
Each cycle moves a reader's phase by a random amount, so readers that started together
drift apart; an early answer costs one more poll, about 3 % more polls on average.

A poll that finds something to answer answers at once, as before; only the time-out of
a poll that found nothing is drawn. Waits under ``EARLY_DIVISOR`` ms are not spread.
"""

from __future__ import annotations

import random

# An empty long poll asked to wait ``wait_ms`` is answered after between
# ``wait_ms - wait_ms // EARLY_DIVISOR`` and ``wait_ms``.
EARLY_DIVISOR = 16
# The draws' own generator: the gateway's seeded one (``ctx.rng``) decides protocol
# choices, whose sequence should not depend on how many polls came.
_JITTER = random.Random()


def wait_ms(asked_ms: int, rng: random.Random = _JITTER) -> int:
    """The time an empty long poll asked to wait ``asked_ms`` waits: uniform in
    [``asked_ms`` - ``asked_ms`` // ``EARLY_DIVISOR``, ``asked_ms``], whole ms."""
    if asked_ms <= 0:
        return 0
    return asked_ms - rng.randint(0, asked_ms // EARLY_DIVISOR)
