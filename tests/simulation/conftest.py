"""Seeds for the simulators: ``--sim-seed=N`` replays one seed, ``--sim-seeds=N`` runs
seeds S..S+N-1 with S = ``--sim-seed-start`` (0 by default; the options are declared in
tests/conftest.py); by default CI runs a test's own count of seeds (``DEFAULT_SEEDS``, or
its ``@pytest.mark.seeds(count, block)``). The seeds go in blocks (``SEED_BLOCK``, or the
marker's), each a test item, so `make test`'s workers (and `make sim`'s) share them."""

from __future__ import annotations

from pathlib import Path

import pytest

DEFAULT_SEEDS = 2000
SEED_BLOCK = 250
HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run of many seeds (``--sim-seeds``) is asked for on purpose: lift the per-test
    time-out of pytest-timeout for it (each seed is bounded by its own step limit)."""
    if config.getoption("--sim-seeds") is None:
        return
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.timeout(0))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``sim_seeds`` is parametrized in blocks of seeds, each block a test item of its
    own, so parallel workers share a run's seeds (every seed still runs)."""
    if "sim_seeds" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("seeds")
    count = marker.args[0] if marker is not None else DEFAULT_SEEDS
    block = marker.args[1] if marker is not None and len(marker.args) > 1 else SEED_BLOCK
    seeds = selected_seeds(metafunc.config, count)
    blocks = [seeds[i : i + block] for i in range(0, len(seeds), block)]
    metafunc.parametrize(
        "sim_seeds", blocks, ids=[f"seeds{b[0]}-{b[-1]}" if b else "none" for b in blocks]
    )


def selected_seeds(config: pytest.Config, default: int = DEFAULT_SEEDS) -> list[int]:
    seed = config.getoption("--sim-seed")
    if seed is not None:
        return [seed]
    count = config.getoption("--sim-seeds")
    if count is None:
        return list(range(default))
    start = config.getoption("--sim-seed-start")
    return list(range(start, start + count))
