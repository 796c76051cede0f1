"""How `make test` spreads the suite over pytest-xdist workers (tests/README.md).

A worker runs one *scope* at a time, every test of it in order, so a module's
module-scoped cluster is started once. A scope is, by default, a test module; the
modules that start their own JVMs (Spark, ZooKeepers of their own) share a scope per
kind, so no two of them compete for the cores at once; in the modules listed in
``SPREAD`` every test is a scope of its own (they start nothing shared), so their long
tests run side by side. Scopes are handed out longest first (``FIRST``), so the run
does not end waiting on one long scope started last.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from xdist.scheduler import LoadScopeScheduling

# Path prefix -> the scope every test under it belongs to: the modules that start JVMs of
# their own (Spark, also on hosts of tests/multihost/; `quire up` and `quire bench
# --local` with their own ZooKeeper; a three-server ensemble, on loopback or on hosts of
# tests/multihost/, the chaos suite's among them), so that no two of a kind compete for
# the cores at once.
GROUPS: dict[str, str] = {
    "tests/spark/": "spark",
    "tests/integration/test_quire_up.py": "quire-up",
    "tests/integration/test_readme_walkthrough.py": "quire-up",
    "tests/integration/test_cli_ledger.py": "quire-up",
    "tests/integration/test_local_cluster_stop.py": "quire-up",
    "tests/integration/test_bench_local.py": "bench",
    "tests/integration/test_bench_log.py": "bench",
    "tests/integration/test_bench_smoke.py": "bench",
    "tests/integration/test_zk_ensemble.py": "bench",
    "tests/multihost/test_partitions.py": "bench",
    "tests/multihost/test_bookie_partitions.py": "bench",
    "tests/chaos/": "bench",
    "tests/multihost/test_spark_faults.py": "spark",
}

# Modules whose tests are each a scope of their own: each test starts the processes it
# breaks, no fixture of theirs is wider than a test (checked at collection:
# ``check_spread``), so their long tests run on different workers side by side.
SPREAD: frozenset[str] = frozenset(
    f"tests/{path}.py"
    for path in (
        "integration/test_audit_locks",
        "integration/test_bench_scale",
        "integration/test_auditor",
        "integration/test_autorecovery",
        "integration/test_bookie_api",
        "integration/test_bookie_client",
        "integration/test_bookie_cookie",
        "integration/test_bookie_hardening",
        "integration/test_bookie_lacs",
        "integration/test_bookie_node",
        "integration/test_bookie_storage",
        "integration/test_bookie_stored",
        "integration/test_cli_bookie_format",
        "integration/test_gateway_ensemble",
        "integration/test_gateway_recovery",
        "integration/test_gateway_recovery_reformat",
        "integration/test_gateway_recovery_timing",
        "integration/test_gateway_reformat_old_writer",
        "integration/test_gateway_shutdown",
        "integration/test_gateway_start",
        "integration/test_harness_zk",
        "integration/test_metadata_store",
        "integration/test_metrics_live",
        "integration/test_replicator",
        "integration/test_replicator_faults",
        "integration/test_replicator_open",
        "integration/test_schemathesis",
        "integration/test_stream_overload",
        "integration/test_underreplication_store",
        "simulation/test_simulation",
        "simulation/test_log_simulation",
        "simulation/test_long_run_seeds",
        "simulation/test_lost_swap_target",
        "simulation/test_open_ledger_grace",
    )
)

# Scopes started first, in this order (the longest, as measured: tests/README.md); the
# rest follow in collection order.
FIRST: Sequence[str] = (
    "spark",
    "quire-up",
    "bench",
    "tests/integration/test_schemathesis.py::test_gateway_conforms_to_its_document",
    "tests/integration/test_schemathesis.py::test_bookie_conforms_to_its_document",
)

# Tests whose outcome depends on having the cores to themselves (a commit measured under
# 2 ms, a session expiry seen in time, ZooKeeper paused within a session time-out, a
# bookie under a flood of streams answering its health check in time): marked
# ``alone``, so make test runs them after the parallel workers, one at a time.
ALONE: frozenset[str] = frozenset(
    {
        "tests/unit/bookie/test_writer.py::"
        "test_an_add_alone_on_an_idle_writer_is_committed_by_the_loop_others_by_the_thread",
        "tests/integration/test_bookie_storage.py::"
        "test_one_add_at_a_time_is_committed_by_the_event_loop",
        "tests/integration/test_auditor.py::test_failover_by_session_expiry_of_the_leader",
        "tests/integration/test_replicator_faults.py::"
        "test_a_repair_ending_during_a_zookeeper_connection_drop_releases_its_lock",
        "tests/integration/test_stream_overload.py::"
        "test_many_streams_slow_down_instead_of_replacing_bookies",
    }
)

WIDE_SCOPES = frozenset({"module", "package", "class"})


def scope_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    for prefix, group in GROUPS.items():
        if path.startswith(prefix):
            return group
    if path in SPREAD:
        return nodeid
    return path


def mark_alone(items: Sequence[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.split("[", 1)[0] in ALONE:
            item.add_marker(pytest.mark.alone)


def check_spread(items: Sequence[pytest.Item]) -> None:
    """A test of a ``SPREAD`` module must not use a module-wide fixture: spread over
    workers, every worker would build it again."""
    for item in items:
        if scope_of(item.nodeid) != item.nodeid:
            continue
        info = getattr(item, "_fixtureinfo", None)
        for name, defs in info.name2fixturedefs.items() if info else ():
            if defs and defs[-1].scope in WIDE_SCOPES:
                raise pytest.UsageError(
                    f"{item.nodeid} is spread over workers (tests/scheduling.py SPREAD) "
                    f"but uses the {defs[-1].scope}-scoped fixture {name!r}"
                )


def longest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: the scopes of ``FIRST`` first, each scope's tests
    together and in their order, the rest as collected. Every worker computes the same
    order (the controller checks the workers collected alike)."""
    rank = {scope: i for i, scope in enumerate(FIRST)}
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(scope_of(item.nodeid), index)

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        index, item = pair
        scope = scope_of(item.nodeid)
        return (rank.get(scope, len(rank)), first_seen[scope], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


class ScopeScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduler, with ``scope_of`` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)
