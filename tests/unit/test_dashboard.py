"""The Grafana dashboard, checked statically: a valid dashboard of schema ~39 whose
every query uses the Prometheus data source variable, and reads only metrics the
services define, with the right type in the right place (counters and histogram series
through rate()/increase(), gauges as they are). tests/integration/test_metrics_live.py
checks the same names against a running cluster's /metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from auditor.metrics import AuditorMetrics
from bookie.metrics import BookieMetrics
from gateway.metrics import GatewayMetrics
from replicator.metrics import ReplicatorMetrics
from tests import dashboard as dash

REGISTRIES: dict[str, Callable[[], CollectorRegistry]] = {
    "bookie": lambda: BookieMetrics().registry,
    "gateway": lambda: GatewayMetrics().registry,
    "auditor": lambda: AuditorMetrics().registry,
    "replicator": lambda: ReplicatorMetrics().registry,
}
# The panels a person needs at 3 a.m. (the issue's list), each read by some query.
REQUIRED = [
    "quire_gateway_entries_added_total",
    "quire_gateway_add_seconds_bucket",
    "quire_gateway_entries_read_total",
    "quire_bookie_fsync_latency_seconds_bucket",
    "quire_bookie_stored_bytes",
    "quire_bookie_disk_free_bytes",
    "quire_auditor_bookies",
    "quire_auditor_under_replicated_ledgers",
    "quire_replicator_replicated_bytes_total",
    "quire_gateway_ensemble_changes_total",
    "quire_gateway_recoveries_total",
    "quire_gateway_ledgers_fenced_total",
    "quire_gateway_log_handovers_total",
    *(f"quire_{s}_zookeeper_connected" for s in dash.SERVICES),
]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return dash.load()


def test_a_dashboard_with_a_prometheus_datasource_variable(doc: dict[str, Any]) -> None:
    """schemaVersion ~39, a uid and title, a datasource variable of type prometheus, and
    every panel and query on that variable; panel ids are unique."""
    assert 36 <= doc["schemaVersion"] <= 41
    assert doc["uid"] and doc["title"]
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = Counter(p["id"] for p in dash.panels(doc))
    assert ids and max(ids.values()) == 1, "panel ids must be unique"
    for panel in dash.panels(doc):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]


def test_the_dashboard_shows_what_the_issue_asks_for(doc: dict[str, Any]) -> None:
    """Add rate and p99, read rate, fsync p99, bytes stored and disk free, bookie states,
    under-replication, re-replication rate, ensemble changes, recoveries, fences, log
    hand-overs and every service's ZooKeeper session are all queried."""
    queried = dash.queried_names(doc)
    missing = [name for name in REQUIRED if name not in queried]
    assert not missing, f"no panel queries {missing}"


def test_every_queried_name_is_defined_with_the_right_type(doc: dict[str, Any]) -> None:
    """Each name resolves to a family its service defines; counters and histogram series
    are read through rate()/increase(), gauges never are."""
    defined = {
        service: dash.families(generate_latest(build()).decode())
        for service, build in REGISTRIES.items()
    }
    for title, expr in dash.exprs(doc):
        for name, in_rate in dash.names_in(expr):
            found = dash.resolve(name, defined[dash.service_of(name)])
            assert found is not None, f"{title}: {name} is not a metric of its service"
            _, kind = found
            if kind == "gauge":
                assert not in_rate, f"{title}: rate() of the gauge {name}"
            else:
                assert in_rate, f"{title}: the {kind} series {name} outside rate()/increase()"


def test_names_are_read_from_promql_not_from_label_values() -> None:
    """String literals are ignored; rate() wrapping is seen through by() clauses."""
    expr = 'sum by (le) (rate(quire_a_x_bucket{l="quire_not_this"}[5m])) + quire_b_y'
    assert dash.names_in(expr) == [("quire_a_x_bucket", True), ("quire_b_y", False)]
