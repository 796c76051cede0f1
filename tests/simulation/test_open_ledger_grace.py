"""The open-ledger grace in the simulator (issue 35 item 7): a worker fences an open
ledger only once a bookie of its last fragment has been missing for the whole grace."""

from __future__ import annotations

import pytest

from tests.simulation import worker
from tests.simulation.checker import Violation
from tests.simulation.scenario import run_seed

GRACE_SEEDS = 400


def test_the_checker_catches_a_grace_counted_from_the_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that counts an open ledger's grace from the mark's first ``marked_at``
    (an older mark, for an earlier fragment's bookie, keeps it through merges) fences
    a writer whose last fragment's bookie went down only just now: caught on some seed,
    which the real rule (from the bookie's first absence) passes."""
    monkeypatch.setattr(worker, "GRACE_FROM_MISSING_SINCE", False)
    for seed in range(GRACE_SEEDS):
        try:
            run_seed(seed)
        except Violation as exc:
            assert "before its grace" in str(exc), str(exc)
            monkeypatch.setattr(worker, "GRACE_FROM_MISSING_SINCE", True)
            run_seed(seed)  # the real rule passes the same scenario
            return
    pytest.fail(f"no seed of {GRACE_SEEDS} caught a grace counted from the mark")
