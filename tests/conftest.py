"""Shared fixtures: a real ZooKeeper per session, a fresh chroot and process cluster per test."""

from __future__ import annotations

import atexit
import faulthandler
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from kazoo.client import KazooClient

from services.cluster.processes import (
    PORT_CURSOR_DIR_ENV,
    PORT_RANGE_ENV,
    ZooKeeperProcess,
    exec_child,
    free_port,
    set_spawner,
)
from tests import scheduling
from tests.harness import Cluster, ZooKeeperEnsemble, fresh_chroot
from tests.leak_scan import SecretRecorder
from tests.shared import StandardCluster, standard_cluster
from tests.warm_start import EXEC_ENV, WarmStarter

# Each process of a run (the only one, or each pytest-xdist worker gwN) hands out ports
# from a range of its own below the ephemeral ports (free_port), so parallel workers never
# pick the same port; the processes a test starts inherit the range and its cursor file
# (in the temp dir of the run, whatever TMPDIR a test gives them).
PORT_RANGE_LOW, PORT_RANGE_SIZE = 10000, 1500
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
_slot = int(_worker[2:]) + 1 if _worker.startswith("gw") else 0
_low = PORT_RANGE_LOW + _slot * PORT_RANGE_SIZE
os.environ[PORT_RANGE_ENV] = f"{_low}-{_low + PORT_RANGE_SIZE - 1}"
os.environ[PORT_CURSOR_DIR_ENV] = tempfile.gettempdir()

# The services each test process starts are forked from an interpreter that has them
# imported (tests/warm_start.py), unless QUIRE_TEST_EXEC=1: a new interpreter each. Every
# start is noted with its log and the secrets it is handed, for the scan at the end of
# the session (tests/leak_scan.py).
_secret_recorder = SecretRecorder(exec_child)
if os.environ.get(EXEC_ENV) != "1":
    _warm_starter = WarmStarter()
    _secret_recorder.inner = _warm_starter
    atexit.register(_warm_starter.stop)
set_spawner(_secret_recorder)
# The leaks each pytest-xdist worker found, gathered by the controller as workers end.
_workers_leaks: list[str] = []
LEAKS_KEY = "secret_leaks"

# Hypothesis profiles, chosen with HYPOTHESIS_PROFILE. "ci" (the default) is deterministic
# and bounded: the same examples on every run and machine (derandomize, no example
# database), no per-example deadline (two cores shared with other work make timings
# noise). "fuzz" (`make fuzz-decoders`) explores at random, many more examples, and
# prints a blob to replay any failure with @reproduce_failure.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.register_profile(
    "fuzz",
    max_examples=20_000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--sim-seed", type=int, default=None, help="replay one simulation seed")
    parser.addoption("--sim-seeds", type=int, default=None, help="number of simulation seeds")
    parser.addoption(
        "--sim-seed-start", type=int, default=0, help="first seed of --sim-seeds (to split a run)"
    )


# Tests interrupt the CLI's processes with SIGINT, as Ctrl-C does. A shell starts its
# background jobs with SIGINT ignored and exec passes that on, so a suite started that
# way would hand it to every child (which then never sees the signal); a handler of our
# own is reset to the default at exec instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# How long the interpreter may take to exit once the session is over.
EXIT_GRACE_S = 60.0
STDERR_FD = 2  # the process's stderr, whatever capturing did to sys.stderr


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every log of the services this process started searched for every secret they
    were handed (tests/leak_scan.py). A pytest-xdist worker hands what it found to the
    controller, which fails the run: the run fails, naming the files, when a log holds
    one."""
    leaks = _secret_recorder.leaks()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[LEAKS_KEY] = leaks
        return
    leaks += _workers_leaks
    if not leaks:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["secrets of the run found in its logs (tests/leak_scan.py):", *leaks]
    if reporter is not None:
        reporter.ensure_newline()
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist, on the controller: a worker ended; keep the leaks it found."""
    _workers_leaks.extend(getattr(node, "workeroutput", {}).get(LEAKS_KEY, []))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A thread a failed test left stuck (in a ZooKeeper call, say) must not hold the
    interpreter's exit for ever, which a CI run reports as a time-out, with the summary
    lost in stdout's buffer: past EXIT_GRACE_S every thread's stack is printed and the
    process ends with status 1. Not on a pytest-xdist worker: it waits, idle, for the
    controller to end it, and the controller has the grace of its own."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    sys.stdout.flush()
    faulthandler.dump_traceback_later(EXIT_GRACE_S, exit=True, file=STDERR_FD)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``alone`` tests marked; on a pytest-xdist worker, the longest scopes first
    (tests/scheduling.py)."""
    scheduling.mark_alone(items)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        scheduling.check_spread(items)
        scheduling.longest_first(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Workers take whole scopes (a module, or a group of modules: tests/scheduling.py),
    unless another --dist was asked for."""
    if config.getoption("dist") in ("load", "loadscope"):
        return scheduling.ScopeScheduling(config, log)
    return None


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _failed(request: pytest.FixtureRequest) -> bool:
    node = request.node
    return any(
        getattr(getattr(node, f"rep_{when}", None), "failed", False) for when in ("setup", "call")
    )


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One real standalone ZooKeeper for the whole test session."""
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), free_port())
    server.start()
    try:
        server.wait_ready(60.0)
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_root(zookeeper: ZooKeeperProcess) -> Iterator[str]:
    """A fresh chroot for one test, deleted afterwards."""
    root = fresh_chroot()
    yield root
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(10.0)
    try:
        client.delete(root, recursive=True)
    except Exception:  # noqa: BLE001 - cleanup is best effort
        pass
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_client(zookeeper: ZooKeeperProcess, zk_root: str) -> Iterator[KazooClient]:
    """A plain kazoo client inside the test's chroot, for inspecting ZooKeeper."""
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(10.0)
    client.ensure_path(zk_root)
    client.stop()
    client.close()
    client = KazooClient(hosts=zookeeper.connect_string + zk_root, timeout=10.0)
    client.start(10.0)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def cluster(
    zookeeper: ZooKeeperProcess, zk_root: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    """Start service processes for one test; all are stopped by pid at teardown."""
    c = Cluster(zookeeper.connect_string, zk_root, tmp_path)
    try:
        yield c
    finally:
        c.stop_all()
        if _failed(request):
            print(c.log_tails())


@pytest.fixture(scope="session")
def shared_cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandardCluster]:
    """The standard cluster of this test process (tests/shared.py), started on first use."""
    with standard_cluster(zookeeper.connect_string, tmp_path_factory.mktemp("shared")) as s:
        yield s


@pytest.fixture
def shared(shared_cluster: StandardCluster) -> StandardCluster:
    """The standard cluster, checked alive before the test: for tests that break nothing
    and name what they make with ``tests.shared.unique_name``."""
    shared_cluster.check_alive()
    return shared_cluster


@pytest.fixture(scope="module")
def zk_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    """A real three-server ZooKeeper ensemble on loopback."""
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("ensemble"), 3)
    try:
        ensemble.start()
        yield ensemble
    finally:
        ensemble.stop()


@pytest.fixture
def zookeeper_of_its_own(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper for one test alone, which it may pause (SIGSTOP) without stalling the
    other tests; resumed and stopped at teardown."""
    server = ZooKeeperProcess(tmp_path / "zookeeper", free_port())
    server.start()
    try:
        server.wait_ready(60.0)
        yield server
    finally:
        server.stop()
