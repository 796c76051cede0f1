"""A live cluster exposes every metric the Grafana dashboard queries, and the new
metrics move with real traffic.

Real ZooKeeper, three bookies, a gateway, an auditor and a replicator (processes on
loopback); a little traffic (ledger adds and reads, a recovery, a log with a writer
hand-over and a roll); then every process's /metrics is scraped and each quire_ name
of every expr in deploy/grafana/quire.json must resolve, with its type, in the
exposition of every process of the service its prefix names (tests/dashboard.py).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from services.cluster.processes import ServiceProcess, poll_client
from tests import dashboard
from tests.harness import Cluster, wait_for
from tests.integration.auto_support import start_auditor, start_replicator, wait_elected
from tests.integration.gateway_support import start_bookies, start_gateway, wait_writable
from tests.integration.log_support import LogClient

# Overrides the harness's 4 s (the last --zk-session-timeout given wins).
SESSION = ["--zk-session-timeout", "30"]


def scrape(proc: ServiceProcess) -> str:
    r = poll_client().get(f"{proc.url}/metrics", timeout=10.0)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain"), r.headers
    return r.text


def value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    total = 0.0
    found = False
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
                found = True
    assert found, f"no sample {name} {labels}"
    return total


def test_every_dashboard_metric_is_exposed_by_a_live_cluster(cluster: Cluster) -> None:
    """Each name the dashboard queries is exposed, with the queried type, by every
    process of its service; the ZooKeeper, fence, latency, disk and bookie-state
    metrics show what the traffic and the cluster did.

    Every process has a 30 s ZooKeeper session (the harness gives 4 s): no session may
    be lost here, and a process starved for 4 s by a loaded machine rightly loses a 4 s
    one, which is not what this test is about."""
    bookies = start_bookies(cluster, 3, SESSION)
    gateway = start_gateway(cluster, SESSION)
    wait_writable(gateway, 3)
    auditor = start_auditor(cluster, ["--audit-interval", "3600", *SESSION])
    replicator = start_replicator(cluster, SESSION)
    wait_elected([auditor])

    lid = gateway.create()["ledger_id"]
    gateway.add(lid, b"one")
    gateway.add_batch(lid, [b"two", b"three"])
    assert [data for _, data in gateway.read_all(lid)] == [b"one", b"two", b"three"]
    recovered = gateway.create()["ledger_id"]
    gateway.add(recovered, b"last")
    assert gateway.recover(recovered)["state"] == "CLOSED"
    logs = LogClient(gateway.url)
    try:
        logs.create("orders")
        logs.take_writer("orders")
        logs.append("orders", [b"a", b"b"])
        logs.roll("orders")
    finally:
        logs.close()

    processes: dict[str, list[ServiceProcess]] = {
        "bookie": bookies,
        "gateway": [gateway.proc],
        "auditor": [auditor.proc],
        "replicator": [replicator],
    }
    # The auditor counts bookies from its registry watch: wait until it saw all three.
    wait_for(
        lambda: value(scrape(auditor.proc), "quire_auditor_bookies", state="writable") == 3,
        20.0,
        "the auditor to count three writable bookies",
    )
    texts = {proc.address: scrape(proc) for procs in processes.values() for proc in procs}

    queried = dashboard.queried_names(dashboard.load())
    assert len(queried) >= 30, sorted(queried)
    for name in sorted(queried):
        service = dashboard.service_of(name)
        for proc in processes[service]:
            exposed = dashboard.families(texts[proc.address])
            found = dashboard.resolve(name, exposed)
            assert found is not None, f"{name} is not exposed by {service} {proc.address}"

    for service, procs in processes.items():
        for proc in procs:
            text = texts[proc.address]
            assert value(text, f"quire_{service}_zookeeper_connected") == 1, proc.address
            events = f"quire_{service}_zookeeper_session_events_total"
            assert value(text, events, state="connected") >= 1, proc.address
            assert value(text, events, state="lost") == 0, proc.address

    g = texts[gateway.proc.address]
    assert value(g, "quire_gateway_entries_added_total") >= 4
    assert value(g, "quire_gateway_add_batch_entries_count") >= 3
    assert value(g, "quire_gateway_add_batch_entries_sum") >= 4
    assert value(g, "quire_gateway_ledgers_fenced_total") >= 1
    assert value(g, "quire_gateway_fence_requests_total", outcome="ok") >= 2
    assert value(g, "quire_gateway_recoveries_total", outcome="closed") == 1
    assert value(g, "quire_gateway_log_handovers_total", log="orders") == 1

    fenced_on_bookies = 0.0
    for proc in bookies:
        b = texts[proc.address]
        free = value(b, "quire_bookie_disk_free_bytes")
        assert 0 < free <= value(b, "quire_bookie_disk_total_bytes"), proc.address
        assert value(b, "quire_bookie_stored_bytes") > 0, proc.address
        fenced_on_bookies += value(b, "quire_bookie_fence_requests_total")
    assert fenced_on_bookies >= 2
    assert sum(value(texts[p.address], "quire_bookie_add_seconds_count") for p in bookies) >= 3
    assert sum(value(texts[p.address], "quire_bookie_read_seconds_count") for p in bookies) >= 1

    a = texts[auditor.proc.address]
    assert value(a, "quire_auditor_elected") == 1
    assert value(a, "quire_auditor_bookies", state="readonly") == 0
    assert value(a, "quire_auditor_bookies", state="unavailable") == 0
    assert value(a, "quire_auditor_under_replicated_ledgers") == 0
    r = texts[replicator.address]
    assert value(r, "quire_replicator_recoveries_total", outcome="failed") == 0
