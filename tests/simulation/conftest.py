"""Seeds for the simulator: ``--sim-seed=N`` replays one seed, ``--sim-seeds=N`` runs
seeds 0..N-1 (both options are declared in tests/conftest.py); by default CI runs
``DEFAULT_SEEDS`` seeds."""

from __future__ import annotations

import pytest

DEFAULT_SEEDS = 1500


@pytest.fixture
def sim_seeds(request: pytest.FixtureRequest) -> list[int]:
    seed = request.config.getoption("--sim-seed")
    if seed is not None:
        return [seed]
    count = request.config.getoption("--sim-seeds")
    return list(range(DEFAULT_SEEDS if count is None else count))
