"""Seeds for the simulator: ``--sim-seed=N`` replays one seed, ``--sim-seeds=N`` runs
seeds S..S+N-1 with S = ``--sim-seed-start`` (0 by default; the options are declared in
tests/conftest.py), so a long run can be split across processes; by default CI runs
``DEFAULT_SEEDS`` seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

DEFAULT_SEEDS = 2000
HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run of many seeds (``--sim-seeds``) is asked for on purpose: lift the per-test
    time-out of pytest-timeout for it (each seed is bounded by its own step limit)."""
    if config.getoption("--sim-seeds") is None:
        return
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.timeout(0))


@pytest.fixture
def sim_seeds(request: pytest.FixtureRequest) -> list[int]:
    seed = request.config.getoption("--sim-seed")
    if seed is not None:
        return [seed]
    count = request.config.getoption("--sim-seeds")
    if count is None:
        return list(range(DEFAULT_SEEDS))
    start = request.config.getoption("--sim-seed-start")
    return list(range(start, start + count))
