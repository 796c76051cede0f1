"""Seeds the long runs (``--sim-seeds=20000 --sim-seed-start=S``) found failing replay and
pass: each is a complete scenario (``run_seed``), so a fix that regresses fails here
without the long run. A change to how scenarios are drawn (plan.py) may change what a
seed exercises; the long run is the real search."""

from __future__ import annotations

import pytest

from tests.simulation.scenario import run_seed

# seed -> what failed
LONG_RUN_SEEDS = {
    11082: "a worker cleared the mark as a close settled a fragment after its last read",
    11682: "a swap target lost for good after its copy, its unsynced copies with it",
    29368: "the same",
    22938: "a worker cleared the mark with a bookie it had filled in place, lost since",
    31983: "the auditor cleared a mark judged on OPEN metadata after the ledger closed",
    37291: "the same",
    66824: "the same",
    81703: "a worker cleared the mark planning on metadata read before it checked a bookie",
}


@pytest.mark.parametrize("seed", list(LONG_RUN_SEEDS))
def test_a_seed_the_long_run_found_failing_passes(seed: int) -> None:
    """The invariants of docs/protocol.md hold for a seed that once broke one (run_seed
    raises ``Violation`` otherwise); the run reached auto-recovery (a mark was made)."""
    sim = run_seed(seed)
    assert sim.marks.created >= 1, LONG_RUN_SEEDS[seed]
