"""How make test spreads the suite over workers (tests/scheduling.py): scopes, the order
they are handed out in, and the tests kept apart."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests import scheduling


@dataclass
class FakeItem:
    nodeid: str
    marks: list[str] = field(default_factory=list)

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)


def test_a_module_is_one_scope_a_group_one_scope_a_spread_test_its_own() -> None:
    """By default a worker takes a whole module (its module fixture is built once);
    grouped paths share one scope; a spread module's tests are scopes of their own."""
    assert scheduling.scope_of("tests/integration/test_logs_api.py::test_a") == (
        "tests/integration/test_logs_api.py"
    )
    assert scheduling.scope_of("tests/spark/test_jobs.py::test_x") == "spark"
    assert scheduling.scope_of("tests/spark/test_cluster.py::test_y") == "spark"
    assert scheduling.scope_of("tests/chaos/test_chaos.py::test_z") == "bench"
    assert scheduling.scope_of("tests/multihost/test_spark_faults.py::test_z") == "spark"
    spread = "tests/integration/test_auditor.py::test_failover_by_sigkill_of_the_leader"
    assert scheduling.scope_of(spread) == spread


def test_the_longest_scopes_come_first_each_scope_together() -> None:
    """FIRST's scopes lead in FIRST's order; each scope's tests stay together and in
    their order; the rest keep the collection's order."""
    ids = [
        "tests/a/test_one.py::t1",
        "tests/spark/test_b.py::t1",
        "tests/a/test_one.py::t2",
        "tests/integration/test_bench_local.py::t1",
        "tests/spark/test_c.py::t1",
        "tests/a/test_two.py::t1",
    ]
    items = [FakeItem(i) for i in ids]
    scheduling.longest_first(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/spark/test_b.py::t1",
        "tests/spark/test_c.py::t1",
        "tests/integration/test_bench_local.py::t1",
        "tests/a/test_one.py::t1",
        "tests/a/test_one.py::t2",
        "tests/a/test_two.py::t1",
    ]


def test_alone_tests_are_marked_parametrized_or_not() -> None:
    """The ALONE tests get the alone mark (every parametrization), no other test does."""
    alone = next(iter(scheduling.ALONE))
    items = [FakeItem(alone), FakeItem(f"{alone}[x]"), FakeItem("tests/unit/test_x.py::t")]
    scheduling.mark_alone(items)  # type: ignore[arg-type]
    assert [i.marks for i in items] == [["alone"], ["alone"], []]
