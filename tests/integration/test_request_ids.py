"""Request ids across services (real ZooKeeper, three bookies and a gateway, logging at
debug level): a request's X-Request-Id comes back on its answer, errors included, and
one add can be followed in the JSON log lines of the gateway and of the bookies that
stored it; a request without an id gets a new one, and a bad id is replaced, never
reflected in an answer or a log."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.cluster.processes import ServiceProcess, poll_client
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    one_gateway,
)

NEW_ID = re.compile(r"[0-9a-f]{32}")
DEBUG = ["--log-level", "debug"]
RAW = {"Content-Type": "application/octet-stream"}


@dataclass
class Env:
    cluster: Cluster
    gateway: Gateway
    bookies: list[ServiceProcess]


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("request-ids")
    with one_gateway(zookeeper, base, DEBUG, DEBUG) as (cluster, bookies, gateway):
        yield Env(cluster, gateway, bookies)


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of one service's log (other lines, e.g. a traceback, skipped)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def lines_with(proc: ServiceProcess, request_id: str) -> list[dict[str, Any]]:
    return [
        line for line in json_lines(Path(proc.log_path)) if line.get("request_id") == request_id
    ]


def test_one_add_is_followed_from_the_gateway_to_the_bookies(env: Env) -> None:
    """An add with a chosen id: the answer carries it; the gateway's access line and
    the access lines of the bookies that stored the entry (Qw=2 of them) carry it."""
    ledger = env.gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    r = env.gateway.request(
        "POST",
        f"/v1/ledgers/{lid}/entries",
        content=b"traced",
        headers={**RAW, "X-Request-Id": "trace-add:1"},
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "trace-add:1"

    def gateway_logged() -> bool:
        return any(
            line["msg"] == "request"
            and line["path"] == f"/v1/ledgers/{lid}/entries"
            and line["status"] == 200
            for line in lines_with(env.gateway.proc, "trace-add:1")
        )

    wait_for(gateway_logged, 10.0, "the gateway's access line of the add")

    def bookies_logged() -> list[str]:
        return [
            proc.name
            for proc in env.bookies
            if any(
                line["msg"] == "request"
                and line["path"] == "/v1/entries"
                and line["service"] == "bookie"
                for line in lines_with(proc, "trace-add:1")
            )
        ]

    wait_for(lambda: len(bookies_logged()) >= 2, 10.0, "two bookies' access lines of the add")
    # Only the write set of entry 0 was sent the add (entry 0: ensemble indexes 0 and 1).
    assert len(bookies_logged()) == 2


def test_an_error_answer_carries_the_id(env: Env) -> None:
    """A 404 ledger_not_found and a 404 of an unknown route carry the id; so does a
    bookie's own answer to a direct call."""
    r = env.gateway.request("GET", "/v1/ledgers/987654321", headers={"X-Request-Id": "trace-404"})
    assert_error(r, 404, "ledger_not_found")
    assert r.headers["x-request-id"] == "trace-404"
    r = env.gateway.request("GET", "/v1/nowhere", headers={"X-Request-Id": "trace-route"})
    assert_error(r, 404, "not_found")
    assert r.headers["x-request-id"] == "trace-route"
    r = poll_client().get(
        env.bookies[0].url + "/v1/ledgers/987654321/lac", headers={"X-Request-Id": "at-bookie"}
    )
    assert r.status_code == 404
    assert r.headers["x-request-id"] == "at-bookie"


def test_no_id_gets_one_and_a_bad_one_is_replaced(env: Env) -> None:
    """Without the header the answer carries a new id, which the gateway's log line of
    that request names; a bad id is replaced by a new one and appears in no log."""
    r = env.gateway.request("GET", "/v1/ledgers")
    assert r.status_code == 200
    given = r.headers["x-request-id"]
    assert NEW_ID.fullmatch(given)
    wait_for(lambda: bool(lines_with(env.gateway.proc, given)), 10.0, "the generated id logged")

    lid = env.gateway.create()["ledger_id"]
    bad = "bad id\twith-" + "x" * 200
    r = env.gateway.request(
        "POST", f"/v1/ledgers/{lid}/entries", content=b"b", headers={**RAW, "X-Request-Id": bad}
    )
    assert r.status_code == 200, r.text
    replaced = r.headers["x-request-id"]
    assert NEW_ID.fullmatch(replaced) and replaced != given
    wait_for(lambda: bool(lines_with(env.gateway.proc, replaced)), 10.0, "the replacing id logged")
    for proc in env.cluster.processes:
        assert "bad id" not in Path(proc.log_path).read_text(errors="replace"), proc.name
