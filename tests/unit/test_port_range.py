"""free_port and free_port_block under QUIRE_PORT_RANGE: what keeps parallel test workers
(and the processes they start) from being handed the same port."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cluster.processes import (
    PORT_CURSOR_DIR_ENV,
    PORT_RANGE_ENV,
    ProcessError,
    free_port,
    free_port_block,
)


@pytest.fixture
def span(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A range of 40 ports of this test's own, its cursor file in a fresh temp dir."""
    monkeypatch.setenv(PORT_CURSOR_DIR_ENV, str(tmp_path))
    low = 30500 + (hash(tmp_path.name) % 40) * 50  # below the ephemeral range
    monkeypatch.setenv(PORT_RANGE_ENV, f"{low}-{low + 39}")
    yield low, low + 39


def test_ports_come_from_the_range_in_turn(span: tuple[int, int]) -> None:
    """Successive ports are the range's next free ones, all distinct, and the cursor wraps
    to the start of the range."""
    low, high = span
    ports = [free_port() for _ in range(high - low + 1)]
    assert sorted(ports) == list(range(low, high + 1))
    assert free_port() == low  # wrapped


def test_a_port_in_use_is_skipped(span: tuple[int, int]) -> None:
    """A port somebody listens on is never handed out."""
    low, _ = span
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", low))
        busy.listen()
        assert free_port() == low + 1


def test_a_block_is_consecutive_and_free(span: tuple[int, int]) -> None:
    """free_port_block(n) answers P with P..P+n-1 free and not handed out before; a block
    that would cross the range's end starts again at its beginning."""
    low, high = span
    first = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", first + 3))
        busy.listen()
        base = free_port_block(5)
    assert base == first + 4  # first+1..first+3 cannot hold five: the block starts after
    assert free_port() == base + 5
    assert free_port_block(high - low) == low  # too long to fit before the end: wraps


def _take(count: int) -> list[int]:
    return [free_port() for _ in range(count)]


def test_processes_sharing_a_range_never_get_the_same_port(span: tuple[int, int]) -> None:
    """Processes that inherit the range (a worker and the `quire up` it starts) share the
    cursor: four of them asking at once are handed distinct ports."""
    with multiprocessing.get_context("fork").Pool(4) as pool:
        taken = [p for ports in pool.map(_take, [9, 9, 9, 9]) for p in ports]
    assert len(set(taken)) == len(taken) == 36


def test_a_child_with_another_tmpdir_shares_the_cursor(
    span: tuple[int, int], tmp_path: Path
) -> None:
    """A process started with another TMPDIR (as `bench --local` tests start theirs) goes
    on from its parent's cursor, not from a cursor of its own."""
    low, _ = span
    assert free_port() == low
    child = subprocess.run(
        [sys.executable, "-c", "from services.cluster.processes import free_port as f; print(f())"],
        env={**os.environ, "TMPDIR": str(tmp_path / "elsewhere")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(child.stdout) == low + 1
    assert free_port() == low + 2


@pytest.mark.parametrize("bad", ["20000", "b-c", "3000-2000", "0-10", "60000-70000"])
def test_a_bad_range_is_refused_clearly(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    """A malformed QUIRE_PORT_RANGE is an error naming the variable, not a random port."""
    monkeypatch.setenv(PORT_RANGE_ENV, bad)
    with pytest.raises(ProcessError, match=PORT_RANGE_ENV):
        free_port()


def test_each_worker_of_a_run_has_a_range_of_its_own() -> None:
    """tests/conftest.py gives each pytest-xdist worker gwN (and a run without workers) its
    own slot of ports, never the range its controller had: workers never share ports."""
    from tests import conftest

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    slot = int(worker[2:]) + 1 if worker.startswith("gw") else 0
    low = conftest.PORT_RANGE_LOW + slot * conftest.PORT_RANGE_SIZE
    assert os.environ[PORT_RANGE_ENV] == f"{low}-{low + conftest.PORT_RANGE_SIZE - 1}"
