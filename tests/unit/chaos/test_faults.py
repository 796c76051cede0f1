"""The chaos suite's fault planner (tests/chaos/faults.py): seeded, and it keeps progress
possible: never more than a minority of bookies or ZooKeeper servers, or all of a
service's instances, impaired at once; one partition at a time; a host's faults apart;
every fault over before the run ends."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any, cast

import pytest

from tests.chaos import faults
from tests.chaos.faults import (
    FIRST_FAULT_S,
    WIPE_SPACING_S,
    Cluster,
    Fault,
    Nemesis,
    Partition,
    Roles,
    kinds,
    plan_schedule,
)
from tests.chaos.history import History
from tests.chaos.test_chaos import FAULT_INTERVAL_S, FAULTS_MIN, SECONDS, SEED

ROLES = Roles(
    {
        "zookeeper": ("zk1", "zk2", "zk3"),
        "bookie": tuple(f"bookie{i}" for i in range(1, 6)),
        "gateway": ("gateway1", "gateway2"),
        "auditor": ("auditor1", "auditor2"),
        "replicator": ("replicator1", "replicator2"),
        "client": ("client",),
    },
    {"rack-a": ("bookie1", "bookie2"), "rack-b": ("bookie3", "bookie4"), "rack-c": ("bookie5",)},
)
TABLE = {k.name: k for k in kinds(wipes=True)}


def active(schedule: list[Fault], t: float) -> list[Fault]:
    return [f for f in schedule if f.at_s <= t < f.end_s]


def test_the_same_seed_plans_the_same_faults_another_seed_others() -> None:
    assert plan_schedule(7, 120, ROLES, 1.0) == plan_schedule(7, 120, ROLES, 1.0)
    assert plan_schedule(7, 120, ROLES, 1.0) != plan_schedule(8, 120, ROLES, 1.0)
    wipes = kinds(wipes=True)
    assert plan_schedule(7, 120, ROLES, 1.0, wipes) == plan_schedule(7, 120, ROLES, 1.0, wipes)


def test_a_short_run_has_every_kind_and_enough_faults() -> None:
    """The CI seed's length (tests/chaos/test_chaos.py) gets at least 50 faults."""
    schedule = plan_schedule(SEED, SECONDS, ROLES, FAULT_INTERVAL_S, kinds(wipes=True))
    assert len(schedule) >= FAULTS_MIN
    assert {f.kind for f in schedule} == set(TABLE)
    assert "wipe" not in {f.kind for f in plan_schedule(1, 600, ROLES, 1.3)}


def test_wipes_are_apart_and_a_rack_loss_takes_a_whole_rack() -> None:
    """Two wipes are never closer than the repairs need (tests/chaos/faults.py
    ``WIPE_SPACING_S``); a rack loss kills every bookie of one rack and nothing else."""
    for seed in range(10):
        schedule = plan_schedule(seed, 1200, ROLES, 0.8, kinds(wipes=True))
        wipes = [f for f in schedule if f.kind == "wipe"]
        assert len(wipes) >= 5, seed
        pairs = zip(wipes, wipes[1:], strict=False)
        assert all(b.at_s >= a.end_s + WIPE_SPACING_S for a, b in pairs)
        losses = [f.hosts for f in schedule if f.kind == "rack_loss"]
        assert losses and all(hosts in ROLES.racks.values() for hosts in losses), losses


def test_impairments_stay_within_the_budgets_and_faults_within_the_run() -> None:
    for seed in range(20):
        schedule = plan_schedule(seed, 300, ROLES, 0.5, kinds(wipes=True))
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


class SlowCluster:
    """A ``Cluster`` whose graceful stop takes longer than the planner allowed (a drain
    under load), recording the order of stops and starts per host."""

    def __init__(self, stop_s: float) -> None:
        self.stop_s = stop_s
        self.events: list[tuple[str, str]] = []
        self.marked: set[str] = set()
        self.asked = threading.Event()  # marks_name was called
        self.lock = threading.Lock()

    def process(self, host: str) -> Any:
        cluster = self

        class Proc:
            pid = 1

            def stop(self) -> int:
                with cluster.lock:
                    cluster.events.append(("stop", host))
                time.sleep(cluster.stop_s)
                return 0

            def start(self) -> None:
                with cluster.lock:
                    cluster.events.append(("start", host))

        return Proc()

    def marks_name(self, hosts: Collection[str]) -> bool | None:
        self.asked.set()
        return bool(self.marked & set(hosts))

    def lose_disk(self, host: str) -> None:
        self.events.append(("wipe", host))

    def format_and_start(self, host: str) -> None:
        pass


def test_faults_of_one_host_never_overlap_however_long_a_stop_takes(tmp_path: Path) -> None:
    """Two restarts of one host planned back to back, the first stop taking longer than
    the gap: the second waits for the first's heal, so no process is started twice."""
    schedule = [
        Fault("restart", 0.0, 0.05, ("gateway1",)),
        Fault("restart", 0.1, 0.05, ("gateway1",)),
    ]
    cluster = SlowCluster(stop_s=0.4)
    history = History(tmp_path / "history.jsonl")
    nemesis = Nemesis(cast(Cluster, cluster), schedule, history).start()
    nemesis.join(timeout_s=5.0)
    history.close()
    assert cluster.events == [
        ("stop", "gateway1"), ("start", "gateway1"), ("stop", "gateway1"), ("start", "gateway1"),
    ]  # fmt: skip


@pytest.fixture
def wiped_once(monkeypatch: pytest.MonkeyPatch) -> tuple[faults.Wipe, SlowCluster]:
    """A wipe kind (short waits, no spacing) that has wiped and healed bookie1, and its
    cluster, where a mark names bookie1 until a test clears ``marked``."""
    monkeypatch.setattr(faults, "WIPE_WAIT_S", 0.6)
    monkeypatch.setattr(faults, "WIPE_POLL_S", 0.02)
    monkeypatch.setattr(faults, "WIPE_SPACING_S", 0.0)
    cluster = SlowCluster(stop_s=0.0)
    wipe = faults.Wipe()
    first = Fault("wipe", 0.0, 1.0, ("bookie1",))
    applied = wipe.apply(cast(Cluster, cluster), first)
    assert "skipped" not in applied
    wipe.heal(cast(Cluster, cluster), first, applied)
    cluster.marked = {"bookie1"}
    return wipe, cluster


def test_a_wipe_waits_for_the_refill_of_the_bookie_wiped_before_or_is_skipped(
    wiped_once: tuple[faults.Wipe, SlowCluster],
) -> None:
    """A second wipe while a mark still names the first wiped bookie would lose what only
    the two held: it waits for the mark to go, and past ``WIPE_WAIT_S`` it is skipped."""
    wipe, cluster = wiped_once
    second = wipe.apply(cast(Cluster, cluster), Fault("wipe", 100.0, 1.0, ("bookie2",)))
    assert "skipped" in second
    assert wipe.heal(cast(Cluster, cluster), Fault("wipe", 100.0, 1.0, ("bookie2",)), second) == {}
    cluster.marked = set()
    assert "skipped" not in wipe.apply(
        cast(Cluster, cluster), Fault("wipe", 200.0, 1.0, ("bookie2",))
    )
    assert cluster.events == [("wipe", "bookie1"), ("wipe", "bookie2")]


def test_two_wipes_waiting_for_the_same_refill_go_one_after_the_other(
    wiped_once: tuple[faults.Wipe, SlowCluster],
) -> None:
    """Two wipes that both wait for the first wiped bookie's refill: once it is done,
    only one goes; the other waits for its heal and the spacing, then for the refill of
    the bookie just wiped, and is skipped when that does not come in time."""
    wipe, cluster = wiped_once
    cluster.asked.clear()
    results: dict[str, dict[str, Any]] = {}

    def run(host: str) -> None:
        results[host] = wipe.apply(cast(Cluster, cluster), Fault("wipe", 1.0, 1.0, (host,)))

    threads = [threading.Thread(target=run, args=(h,)) for h in ("bookie2", "bookie3")]
    for thread in threads:
        thread.start()
    assert cluster.asked.wait(5.0)  # one is waiting for the refill, the other for its turn
    cluster.marked = set()  # bookie1 refilled: one of the two goes, and stays unhealed
    for thread in threads:
        thread.join()
    gone = [h for h, r in results.items() if "skipped" not in r]
    assert len(gone) == 1, results
    assert cluster.events == [("wipe", "bookie1"), ("wipe", gone[0])]
