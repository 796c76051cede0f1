"""One chaos run: ``python -m tests.chaos.run --seconds S --seed N --out DIR``.

Starts the full layout of hosts (tests/multihost/layout.py: three ZooKeeper servers,
five bookies on three racks with a tmpfs disk each, two gateways, two auditors, two
replicators, short timers; with ``--spark``, Spark on hosts of its own), runs the
seeded workload (tests/chaos/workload.py) and the seeded fault schedule
(tests/chaos/faults.py) for S seconds, heals everything, closes every ledger and log
(a recovery, and a final writer take-over per log), asks for a full audit and waits for
the under-replicated list to empty, reads everything back from every gateway, reads
what every bookie stores, and runs the checker (tests/chaos/checker.py). It prints a
summary and exits 1 on any violation.

DIR gets ``schedule.json`` (the planned faults), ``history.jsonl`` (every operation
and fault, tests/chaos/history.py), ``final.json`` (the read-back the checker judged),
``summary.json`` (figures and violations) and ``hosts/`` (every process's log).
Needs root (network namespaces), as every multi-host test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.chaos import checker
from tests.chaos.faults import Fault, LayoutCluster, Nemesis, Roles, kinds, plan_schedule
from tests.chaos.history import History, read
from tests.chaos.workload import DURABLE_SHAPES, SHAPES, Context, Plan, latin1, workers
from tests.multihost.layout import Layout, start_layout
from tests.multihost.network import Network
from tests.multihost.spark_hosts import start_spark

GATEWAY_ARGS = (
    "--log-roll-entries",
    "50",
    "--log-settle-timeout-ms",
    "3000",
    "--recovery-timeout-ms",
    "30000",
)
AUDITOR_ARGS = ("--lost-bookie-delay", "3", "--audit-interval", "30")
REPLICATOR_ARGS = ("--open-ledger-grace", "5", "--marks-poll-interval", "1")
# The bookies' racks (a rack loss kills a whole one) and disks (a tmpfs each, which a
# disk_full fault fills; a 30-minute run stores about 40 MB on each bookie).
RACKS = ("rack-a", "rack-a", "rack-b", "rack-b", "rack-c")
BOOKIE_DISK_BYTES = 256 * 1024 * 1024
# One fault every this many seconds on average.
FAULT_INTERVAL_S = 1.3
# The read-back's patience: a call retried until it answers, every service healthy.
READ_BACK_CALL_S = 60.0
HEALTHY_AFTER_HEAL_S = 90.0
# Once every ledger is closed (after the heal), the under-replicated list must be empty
# within this.
REPLICATION_BOUND_S = 120.0
STORED_IDS_MAX = 1000
PAGE_LIMIT = 1000


@dataclass
class Outcome:
    """What a run found: its schedule, history records, figures and violations."""

    schedule: list[Fault]
    figures: dict[str, Any]
    violations: list[checker.Violation]
    notes: list[str] = field(default_factory=list)


def run(
    seconds: float,
    seed: int,
    out: Path,
    plan: Plan | None = None,
    fault_interval_s: float = FAULT_INTERVAL_S,
) -> Outcome:
    out.mkdir(parents=True, exist_ok=True)
    plan = plan or Plan()
    with Network() as network:
        layout = start_layout(
            network,
            out / "hosts",
            zookeepers=3,
            bookies=5,
            gateways=2,
            auditors=2,
            replicators=2,
            gateway_args=GATEWAY_ARGS,
            auditor_args=AUDITOR_ARGS,
            replicator_args=REPLICATOR_ARGS,
            bookie_disk_bytes=BOOKIE_DISK_BYTES,
            racks=RACKS,
        )
        try:
            return _run(layout, seconds, seed, out, plan, fault_interval_s)
        finally:
            layout.stop()


def _run(
    layout: Layout, seconds: float, seed: int, out: Path, plan: Plan, fault_interval_s: float
) -> Outcome:
    roles = Roles.of(layout)
    schedule = plan_schedule(seed, seconds, roles, fault_interval_s, kinds(wipes=plan.durable))
    (out / "schedule.json").write_text(
        json.dumps([{"kind": f.kind, **f.to_json()} for f in schedule], indent=1)
    )
    history = History(out / "history.jsonl")
    cluster = LayoutCluster(layout)
    gateways = {g.node.name: g.url for g in layout.gateways}
    ctx = Context(history, gateways, layout.client)
    http = layout.client.http_client(timeout_s=30.0)
    notes: list[str] = []
    spark = None
    if plan.spark:
        spark = start_spark(layout.network, out / "spark", list(gateways.values()))
    try:
        _prepare(http, gateways, plan)
        clients = workers(ctx, seed, plan, spark.driver if spark is not None else None)
        for client in clients:
            client.start()
        nemesis = Nemesis(cluster, schedule, history).start()
        time.sleep(seconds)
        nemesis.join(timeout_s=60.0)
        ctx.stop.set()
        for client in clients:
            client.join(60.0)
            if client.is_alive() or client.error is not None:
                notes.append(f"client {client.name}: alive {client.is_alive()}, {client.error!r}")
        notes += [f"nemesis: {e}" for e in nemesis.errors]
        notes += [f"after the run: {done}" for done in cluster.heal_everything()]
        healed_at = time.monotonic()
        _wait_healthy(layout)
        final = _read_back(layout, http, ctx, plan, healed_at)
    finally:
        if spark is not None:
            spark.stop()
        http.close()
        history.close()
    (out / "final.json").write_text(json.dumps(final))
    records = read(out / "history.jsonl")
    violations = checker.check(records, final)
    figures = checker.figures(records, final)
    figures["faults_scheduled"] = len(schedule)
    figures["faults_applied"] = nemesis.applied
    summary = {
        "seed": seed,
        "seconds": seconds,
        "figures": figures,
        "violations": [str(v) for v in violations],
        "notes": notes,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return Outcome(schedule, figures, violations, notes)


def _retry(
    http: httpx.Client, method: str, url: str, ok: tuple[int, ...] = (200,), **kw: Any
) -> httpx.Response:
    """The call until it answers one of ``ok`` (the read-back happens after the heal:
    a refusal now is a moment of recovery, not an answer), or its last answer."""
    deadline = time.monotonic() + READ_BACK_CALL_S
    while True:
        try:
            r = http.request(method, url, **kw)
            if r.status_code in ok or time.monotonic() > deadline:
                return r
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def _prepare(http: httpx.Client, gateways: dict[str, str], plan: Plan) -> None:
    """Every gateway sees five writable bookies, and the logs exist."""
    for url in gateways.values():
        body = {"ensemble_size": 5, "write_quorum": 1, "ack_quorum": 1}
        r = _retry(http, "POST", f"{url}/v1/ledgers", (201,), json=body)
        if r.status_code != 201:
            raise RuntimeError(f"{url} cannot place five bookies: {r.text}")
        http.delete(f"{url}/v1/ledgers/{r.json()['ledger_id']}")
    first = next(iter(gateways.values()))
    for name in [*plan.log_names(), *plan.stream_logs()]:
        _retry(http, "PUT", f"{first}/v1/logs/{name}", (200, 201))


def _wait_healthy(layout: Layout) -> None:
    for server in layout.zookeepers:
        server.wait_ready(HEALTHY_AFTER_HEAL_S)
    for proc in [*layout.bookies, *layout.gateways, *layout.auditors, *layout.replicators]:
        proc.wait_healthy(HEALTHY_AFTER_HEAL_S)


def _read_back(
    layout: Layout, http: httpx.Client, ctx: Context, plan: Plan, healed_at: float
) -> checker.Final:
    gateways = ctx.gateways
    first = next(iter(gateways.values()))
    ledgers = sorted(set(ctx.ledgers))
    # Close every ledger first (a writer the faults killed left it open): the audit
    # checks only settled spans, and a Qa < Qw ledger's last fragment may lack entries
    # on a bookie that only the audit after its close can see.
    for lid in ledgers:
        _retry(http, "POST", f"{first}/v1/ledgers/{lid}/recover")
    logs = [*plan.log_names(), *plan.stream_logs()]
    log_ledgers: list[int] = []
    for name in logs:  # fences the log's last ledgers
        _retry(http, "POST", f"{first}/v1/logs/{name}/writer")
        log_ledgers += _retry(http, "GET", f"{first}/v1/logs/{name}").json()["ledgers"]
    # Then the bound is the repair's, counted once everything is closed: closing a long
    # run's thousands of ledgers takes minutes, and only then is the audit asked for.
    closed_at = time.monotonic()
    replication = _wait_replicated(layout, http, first, closed_at)
    replication["closing_s"] = round(closed_at - healed_at, 2)
    for url in list(gateways.values())[1:]:  # the others see each ledger closed
        for lid in ledgers:
            _retry(http, "POST", f"{url}/v1/ledgers/{lid}/recover")
    final: checker.Final = {
        "gateways": sorted(gateways),
        "addresses": {g: ctx.address(g) for g in gateways},
        "ledgers": {str(lid): {} for lid in ledgers},
        "logs": {name: {} for name in logs},
    }
    for gateway, url in sorted(gateways.items()):
        for lid in ledgers:
            final["ledgers"][str(lid)][gateway] = _read_ledger(http, url, lid)
        for name in logs:
            final["logs"][name][gateway] = _read_log(http, url, name)
    final["replication"] = replication
    every = sorted(set(ledgers) | set(log_ledgers))
    final["metadata"] = {}
    for lid in every:
        r = _retry(http, "GET", f"{first}/v1/ledgers/{lid}")
        if r.status_code == 200:
            final["metadata"][str(lid)] = r.json()
    final["stored"] = _stored(layout, http, every)
    return final


def _read_ledger(http: httpx.Client, url: str, lid: int) -> dict[str, Any]:
    r = _retry(http, "GET", f"{url}/v1/ledgers/{lid}")
    if r.status_code != 200:
        return {"error": f"metadata: {r.status_code} {r.text[:200]}"}
    metadata = r.json()
    entries: list[list[Any]] = []
    params: dict[str, int] = {}
    while True:
        page = _retry(http, "GET", f"{url}/v1/ledgers/{lid}/entries", params=params)
        if page.status_code != 200:
            return {"error": f"entries: {page.status_code} {page.text[:200]}"}
        doc = page.json()
        entries += [[e["entry_id"], latin1(e["data"])] for e in doc["entries"]]
        if doc["next"] is None:
            break
        params = {"from": doc["next"]}
    return {
        "state": metadata["state"],
        "last_entry_id": metadata["last_entry_id"],
        "entries": entries,
    }


def _read_log(http: httpx.Client, url: str, name: str) -> dict[str, Any]:
    records: list[list[Any]] = []
    params: dict[str, Any] = {"limit": PAGE_LIMIT}
    while True:
        r = _retry(http, "GET", f"{url}/v1/logs/{name}/records", params=params)
        if r.status_code != 200:
            return {"error": f"records: {r.status_code} {r.text[:200]}"}
        doc = r.json()
        records += [
            [x["position"]["ledger_id"], x["position"]["entry_id"], latin1(x["data"])]
            for x in doc["records"]
        ]
        if doc["next"] is None or (doc["caught_up"] and not doc["records"]):
            return {"records": records}
        params = {"limit": PAGE_LIMIT, "from": doc["next"]}


def _wait_replicated(
    layout: Layout, http: httpx.Client, gateway: str, since: float
) -> dict[str, Any]:
    """Ask for a full audit, wait until one that started after the request completed,
    then until the under-replicated list is empty; how long after ``since`` that was."""
    deadline = since + REPLICATION_BOUND_S
    requested_ms = int(time.time() * 1000)
    _retry(http, "POST", f"{gateway}/v1/admin/audit", (202,))
    while time.monotonic() < deadline and not _audited_since(layout, http, requested_ms):
        time.sleep(0.5)
    remaining: list[int] = []
    while time.monotonic() < deadline:
        r = http.get(f"{gateway}/v1/admin/under-replicated", params={"limit": 1000})
        if r.status_code == 200:
            remaining = [x["ledger_id"] for x in r.json()["ledgers"]]
            if not remaining:
                return {
                    "bound_s": REPLICATION_BOUND_S,
                    "emptied_after_s": round(time.monotonic() - since, 2),
                    "remaining": [],
                }
        time.sleep(0.5)
    return {"bound_s": REPLICATION_BOUND_S, "emptied_after_s": None, "remaining": remaining}


def _audited_since(layout: Layout, http: httpx.Client, since_ms: int) -> bool:
    for auditor in layout.auditors:
        try:
            r = http.get(f"{auditor.url}/v1/status")
        except httpx.HTTPError:
            continue
        last = r.json().get("last_audit") if r.status_code == 200 else None
        if last and last["kind"] == "full" and last["started_at"] >= since_ms and last["complete"]:
            return True
    return False


def _stored(layout: Layout, http: httpx.Client, ledgers: list[int]) -> dict[str, Any]:
    """What each bookie stores of each ledger: its runs of entry ids."""
    stored: dict[str, dict[str, Any]] = {str(lid): {} for lid in ledgers}
    for bookie in layout.bookies:
        bookie_id = f"{bookie.node.name}:{bookie.port}"
        for start in range(0, len(ledgers), STORED_IDS_MAX):
            chunk = ledgers[start : start + STORED_IDS_MAX]
            r = _retry(http, "POST", f"{bookie.url}/v1/stored", json={"ledger_ids": chunk})
            for doc in r.json()["ledgers"]:
                stored[str(doc["ledger_id"])][bookie_id] = doc["ranges"]
    return stored


def print_summary(outcome: Outcome, out: Path) -> None:
    figures = outcome.figures
    lines = [
        f"faults: {figures['faults_total']} {figures['faults']}",
        f"operations: {figures['operations_total']}",
        *(f"  {f}: {c}" for f, c in figures["operations"].items()),
        f"unknown outcomes: {figures['unknown']}",
        f"max write stall (s) by fault kind: {figures['max_stall_s']}",
        f"time to full replication after the closes (s): {figures['full_replication_s']}",
        *(f"note: {n}" for n in outcome.notes),
        f"violations: {len(outcome.violations)}",
        *(f"  {v}" for v in outcome.violations[:50]),
        f"history: {out / 'history.jsonl'}",
    ]
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.run", description=__doc__)
    parser.add_argument("--seconds", type=float, default=600.0, help="workload and faults")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("chaos-out"))
    parser.add_argument(
        "--fault-interval", type=float, default=FAULT_INTERVAL_S, help="mean seconds between faults"
    )
    parser.add_argument(
        "--shapes",
        choices=("durable", "all"),
        default="durable",
        help="durable: ledgers with Qa >= 2 only, and bookies are wiped; all: Qa = 1 "
        "ledgers too, and no wipes (a disk lost with one acknowledged copy loses it)",
    )
    parser.add_argument("--spark", action="store_true", help="Spark batch reads of the logs")
    args = parser.parse_args(argv)
    shapes = DURABLE_SHAPES if args.shapes == "durable" else SHAPES
    plan = Plan(shapes=shapes, spark=args.spark)
    outcome = run(args.seconds, args.seed, args.out, plan, fault_interval_s=args.fault_interval)
    print_summary(outcome, args.out)
    return 1 if outcome.violations else 0


if __name__ == "__main__":
    sys.exit(main())
