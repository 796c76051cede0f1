"""The Grafana dashboard (deploy/grafana/quire.json) as tests see it: its panels, the
PromQL of every query, the quire_ metric names each query reads, and how a name
resolves to a metric family of a /metrics exposition.

A queried name resolves when the exposition has a family of the right type: a gauge by
its own name, a counter by ``<family>_total``, a histogram by ``<family>_bucket``,
``_sum`` or ``_count`` (a histogram's bare name is not a series). Names are read from
the PromQL with its string literals removed, so a label value never counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "deploy" / "grafana" / "quire.json"

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'" + r"|`[^`]*`")
_NAME = re.compile(r"(?<![\w:])quire_[A-Za-z0-9_:]*")
# A name read by rate()/increase()/irate() directly: "rate(" then optional space.
_RATE_BEFORE = re.compile(r"\b(?:rate|irate|increase)\(\s*$")
SERVICES = ("bookie", "gateway", "auditor", "replicator")


def load() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def panels(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those nested in collapsed rows included."""
    for panel in doc.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def exprs(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query target."""
    return [
        (panel.get("title", ""), target["expr"])
        for panel in panels(doc)
        for target in panel.get("targets", [])
        if target.get("expr")
    ]


def names_in(expr: str) -> list[tuple[str, bool]]:
    """Each quire_ name the expression reads, and whether rate()/increase() reads it."""
    text = _STRING.sub('""', expr)
    return [
        (match.group(0), bool(_RATE_BEFORE.search(text[: match.start()])))
        for match in _NAME.finditer(text)
    ]


def queried_names(doc: dict[str, Any]) -> set[str]:
    return {name for _, expr in exprs(doc) for name, _ in names_in(expr)}


def service_of(name: str) -> str:
    """The service whose /metrics exposes ``name`` (its quire_<service>_ prefix)."""
    service = name.split("_")[1]
    assert service in SERVICES, f"{name} names no service"
    return service


def families(exposition: str) -> dict[str, str]:
    """Family name -> type of a /metrics text (counters without ``_total``)."""
    return {f.name: f.type for f in text_string_to_metric_families(exposition)}


def resolve(name: str, exposed: dict[str, str]) -> tuple[str, str] | None:
    """(family, type) that ``name`` reads in ``exposed`` (``families()``), or None."""
    if exposed.get(name) == "gauge":
        return name, "gauge"
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if name.endswith(suffix) and exposed.get(base) == "histogram":
            return base, "histogram"
    base = name.removesuffix("_total")
    if name.endswith("_total") and exposed.get(base) == "counter":
        return base, "counter"
    return None
