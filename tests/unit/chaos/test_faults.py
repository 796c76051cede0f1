"""The chaos suite's fault planner (tests/chaos/faults.py): seeded, and it keeps progress
possible: never more than a minority of bookies or ZooKeeper servers, or all of a
service's instances, impaired at once; one partition at a time; a host's faults apart;
every fault over before the run ends."""

from __future__ import annotations

from collections import Counter

from tests.chaos.faults import (
    FIRST_FAULT_S,
    Fault,
    Partition,
    Roles,
    kinds,
    plan_schedule,
)

ROLES = Roles(
    {
        "zookeeper": ("zk1", "zk2", "zk3"),
        "bookie": tuple(f"bookie{i}" for i in range(1, 6)),
        "gateway": ("gateway1", "gateway2"),
        "auditor": ("auditor1", "auditor2"),
        "replicator": ("replicator1", "replicator2"),
        "client": ("client",),
    }
)
TABLE = {k.name: k for k in kinds()}


def active(schedule: list[Fault], t: float) -> list[Fault]:
    return [f for f in schedule if f.at_s <= t < f.end_s]


def test_the_same_seed_plans_the_same_faults_another_seed_others() -> None:
    assert plan_schedule(7, 120, ROLES, 1.0) == plan_schedule(7, 120, ROLES, 1.0)
    assert plan_schedule(7, 120, ROLES, 1.0) != plan_schedule(8, 120, ROLES, 1.0)


def test_a_short_run_has_every_kind_and_enough_faults() -> None:
    """The CI seed's length (tests/chaos/test_chaos.py) gets at least 50 faults."""
    schedule = plan_schedule(1, 75, ROLES, 1.3)
    assert len(schedule) >= 50
    assert {f.kind for f in plan_schedule(1, 600, ROLES, 1.3)} == set(TABLE)


def test_impairments_stay_within_the_budgets_and_faults_within_the_run() -> None:
    for seed in range(20):
        schedule = plan_schedule(seed, 300, ROLES, 0.5)
        assert all(FIRST_FAULT_S < f.at_s and f.end_s <= 300 for f in schedule)
        for fault in schedule:
            now = active(schedule, fault.at_s)
            load: Counter[str] = Counter()
            for f in now:
                load.update(TABLE[f.kind].impairs(f, ROLES))
            assert load["bookie"] <= 2 and load["zookeeper"] <= 1, (seed, now)
            assert all(load[r] <= 1 for r in ("gateway", "auditor", "replicator")), now
            assert sum(isinstance(TABLE[f.kind], Partition) for f in now) <= 1, now
            hosts = [h for f in now for h in f.hosts]
            assert len(hosts) == len(set(hosts)), now
