"""Every metric a service exposes follows the one naming scheme (docs/operations.md, "Metrics").

The scheme: ``quire_<service>_<what>[_<unit>]`` in lower snake case, where
``<service>`` is the service that exposes it; counters end in ``_total``; histograms
end in their unit (``_seconds``, ``_bytes``, or what they count: ``_entries``,
``_requests``); a unit word (seconds, bytes, ratio) appears only as the unit suffix
(``_bytes_total``, not ``bytes_..._total``); gauges never end in ``_total``. The
metric table of docs/operations.md lists exactly the names exposed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from auditor.metrics import AuditorMetrics
from bookie.metrics import BookieMetrics
from gateway.metrics import GatewayMetrics
from replicator.metrics import ReplicatorMetrics

REPO = Path(__file__).resolve().parents[2]
SERVICES: dict[str, Callable[[], CollectorRegistry]] = {
    "bookie": lambda: BookieMetrics().registry,
    "gateway": lambda: GatewayMetrics().registry,
    "auditor": lambda: AuditorMetrics().registry,
    "replicator": lambda: ReplicatorMetrics().registry,
}
UNITS = ("seconds", "bytes", "ratio")
HISTOGRAM_UNITS = ("seconds", "bytes", "entries", "requests")
NAME = re.compile(r"^quire_[a-z][a-z0-9_]*[a-z0-9]$")


def exposed(registry: CollectorRegistry) -> dict[str, str]:
    """Metric name (as queried: counters with ``_total``) -> type, from the exposition
    text the service serves (``_created`` series are the client's bookkeeping)."""
    out: dict[str, str] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name.endswith("_created") and family.type == "gauge":
            continue
        name = family.name + "_total" if family.type == "counter" else family.name
        out[name] = family.type
    return out


def all_exposed() -> dict[str, tuple[str, str]]:
    """Name -> (service, type) over every service."""
    return {
        name: (service, kind)
        for service, build in SERVICES.items()
        for name, kind in exposed(build()).items()
    }


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_names_carry_the_exposing_service(service: str) -> None:
    """Every name a service exposes is lower snake case and starts with quire_<service>_."""
    names = exposed(SERVICES[service]())
    assert names, f"{service} exposes no metric"
    for name in names:
        assert NAME.match(name), f"{name}: not lower snake case"
        assert name.startswith(f"quire_{service}_"), f"{service} exposes {name}"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_types_and_units(service: str) -> None:
    """Counters end in _total, gauges do not, histograms end in a unit; a unit word is
    only ever the unit suffix."""
    for name, kind in exposed(SERVICES[service]()).items():
        base = name.removesuffix("_total")
        if kind == "counter":
            assert name.endswith("_total"), f"counter {name}"
        else:
            assert not name.endswith("_total"), f"{kind} {name} ends in _total"
        if kind == "histogram":
            assert base.endswith(tuple(f"_{u}" for u in HISTOGRAM_UNITS)), f"histogram {name}"
        words = base.split("_")
        for unit in UNITS:
            if unit in words:
                assert words[-1] == unit, f"{name}: '{unit}' is not its unit suffix"
        assert kind in ("counter", "gauge", "histogram"), f"{name} is a {kind}"


def test_every_service_reports_its_zookeeper_session() -> None:
    """Each service that uses ZooKeeper (all four) has the session gauge and counter."""
    names = all_exposed()
    for service in SERVICES:
        assert names[f"quire_{service}_zookeeper_connected"] == (service, "gauge")
        events = f"quire_{service}_zookeeper_session_events_total"
        assert names[events] == (service, "counter")


def documented_table() -> dict[str, tuple[str, str]]:
    """The metric table of docs/operations.md ("Metrics"): name -> (type, service)."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`quire_"):
            name = cells[0].strip("`")
            assert name not in rows, f"{name} twice in the metric table"
            rows[name] = (cells[1], cells[4])
    return rows


def test_the_documented_table_lists_exactly_what_is_exposed() -> None:
    """docs/operations.md "Metrics" has one row per exposed name, with its type and
    service."""
    documented = documented_table()
    names = all_exposed()
    assert sorted(documented) == sorted(names)
    for name, (service, kind) in names.items():
        assert documented[name] == (kind, service), name
