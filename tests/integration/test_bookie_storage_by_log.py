"""A bookie's space counted by log (docs/operations.md "Space given back"; docs/api.md
``GET /v1/admin/bookies/{id}/storage?by_log=true``) on a real cluster: three bookies (no
garbage-collection pass on their own, so an orphan stays), one gateway.

Two logs with known appended records, a plain ledger, and a plain ledger deleted while
one bookie was down: on each bookie the per-log bytes are the bookie's own bytes of the
ledgers each log lists, the plain ledger is not in a log, the deleted one's bytes are
metadata missing; over the three bookies a log's bytes are its ledgers' lengths times
the write quorum. Without by_log the answer is unchanged; a bad by_log is 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from services.cli.app import app as cli_app
from services.cluster.processes import ServiceProcess
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    ok,
    one_gateway,
    payload_for,
    wait_writable,
)

# No pass on its own (--gc-interval-s 0): a ledger deleted while a bookie was down stays
# on it, its metadata missing.
GC_ARGS = ["--gc-interval-s", "0"]
STRIPED = {"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2}
ALL_THREE = {"ensemble_size": 3, "write_quorum": 3, "ack_quorum": 3}


def bookie_ledgers(bookie: ServiceProcess) -> dict[int, int]:
    """Every ledger the bookie stores with its bytes, by its own paged listing."""
    out: dict[int, int] = {}
    after = -1
    with httpx.Client(base_url=bookie.url, timeout=10.0) as http:
        while True:
            page = ok(http.get("/v1/storage/ledgers", params={"after": after, "limit": 2}))
            out.update({item["ledger_id"]: item["bytes"] for item in page["ledgers"]})
            if page["next"] is None:
                return out
            after = page["next"]


def append_and_roll(gateway: Gateway, log: str, records: int, size: int) -> None:
    ok(gateway.request("PUT", f"/v1/logs/{log}", json=STRIPED), 201)
    for n in range(records):
        ok(gateway.request("POST", f"/v1/logs/{log}/records", content=payload_for(n, size)))
        if n == records // 2:
            ok(gateway.request("POST", f"/v1/logs/{log}/roll"))
    # The appended ledgers are all closed now (their lengths exact); the new one is empty.
    ok(gateway.request("POST", f"/v1/logs/{log}/roll"))


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    with one_gateway(zookeeper, tmp_path_factory.mktemp("bylog"), GC_ARGS) as (_, bookies, gw):
        yield build(bookies, gw)


def build(bookies: list[ServiceProcess], gateway: Gateway) -> dict[str, Any]:
    append_and_roll(gateway, "alpha", 12, 700)
    append_and_roll(gateway, "beta", 5, 3000)
    plain = int(gateway.create(**STRIPED)["ledger_id"])
    gateway.add_batch(plain, [payload_for(n, 900) for n in range(7)])
    gateway.close(plain)
    doomed = int(gateway.create(**ALL_THREE)["ledger_id"])
    gateway.add_batch(doomed, [payload_for(n, 2000) for n in range(5)])
    gateway.close(doomed)
    down = bookies[2]
    down.stop()
    assert gateway.request("DELETE", f"/v1/ledgers/{doomed}").status_code == 204
    down.start()
    down.wait_healthy(30.0)
    wait_writable(gateway, 3)
    logs = {
        name: ok(gateway.request("GET", f"/v1/logs/{name}"))["ledgers"]
        for name in ("alpha", "beta")
    }
    return {
        "bookies": bookies,
        "gateway": gateway,
        "logs": logs,
        "plain": plain,
        "doomed": doomed,
        "down": down,
    }


def by_log(gateway: Gateway, bookie: ServiceProcess) -> dict[str, Any]:
    path = f"/v1/admin/bookies/{bookie.address}/storage"
    report: dict[str, Any] = ok(gateway.request("GET", path, params={"by_log": "true"}))
    return report


def test_per_log_bytes_match_what_each_bookie_stores(env) -> None:  # type: ignore[no-untyped-def]
    """On each bookie, a log's bytes and ledgers are those of the ledgers the log lists,
    as the bookie itself counts them; the plain ledger is not in a log, the ledger
    deleted while the bookie was down is metadata missing (on that bookie only); the
    buckets add up to every ledger the bookie stores. Over the three bookies a log's
    bytes are its closed ledgers' lengths times the write quorum."""
    gateway, logs = env["gateway"], env["logs"]
    plain, doomed, down = env["plain"], env["doomed"], env["down"]
    across: dict[str, int] = {"alpha": 0, "beta": 0}
    for bookie in env["bookies"]:
        stored = bookie_ledgers(bookie)
        report = by_log(gateway, bookie)
        counted = report["by_log"]
        assert counted["truncated"] is False
        assert counted["ledgers_looked_at"] == len(stored)
        rows = {row["log"]: row for row in counted["logs"]}
        assert set(rows) == {"alpha", "beta"} and counted["logs_count"] == 2
        for name, ledgers in logs.items():
            here = [lid for lid in ledgers if lid in stored]
            assert rows[name]["ledgers"] == len(here)
            assert rows[name]["bytes"] == sum(stored[lid] for lid in here) > 0
            across[name] += rows[name]["bytes"]
        sizes = [row["bytes"] for row in counted["logs"]]
        assert sizes == sorted(sizes, reverse=True)
        assert counted["not_in_a_log"] == {"ledgers": 1, "bytes": stored[plain]}
        assert stored[plain] > 0
        if bookie is down:
            assert counted["metadata_missing"] == {"ledgers": 1, "bytes": 5 * 2000}
        else:
            assert doomed not in stored
            assert counted["metadata_missing"] == {"ledgers": 0, "bytes": 0}
        assert counted["metadata_unreadable"] == {"ledgers": 0, "bytes": 0}
        buckets = [*counted["logs"], counted["not_in_a_log"], counted["metadata_missing"]]
        assert sum(b["bytes"] for b in buckets) == sum(stored.values())
        assert sum(b["ledgers"] for b in buckets) == len(stored)
        # The storage report beside it accounts for the same bytes.
        live = report["live"]["bytes"] + report["orphaned_bytes"] + report["pending_delete_bytes"]
        assert live == sum(stored.values())
    for name, ledgers in logs.items():
        lengths = 0
        for lid in ledgers:
            meta = gateway.metadata(lid)
            assert meta["metadata"]["quire.log"] == name
            if meta["state"] == "CLOSED":
                lengths += meta["length"]
        assert lengths > 0
        assert across[name] == STRIPED["write_quorum"] * lengths


def test_without_by_log_the_answer_is_unchanged_and_bad_input_is_400(env) -> None:  # type: ignore[no-untyped-def]
    """A plain storage request (and by_log=false) has no by_log; by_log=maybe is 400
    invalid_argument, and so is a bad page asked of the bookie's listing."""
    gateway, bookie = env["gateway"], env["bookies"][0]
    path = f"/v1/admin/bookies/{bookie.address}/storage"
    plain = ok(gateway.request("GET", path))
    assert "by_log" not in plain and "last_pass" in plain
    assert "by_log" not in ok(gateway.request("GET", path, params={"by_log": "false"}))
    assert_error(gateway.request("GET", path, params={"by_log": "maybe"}), 400, "invalid_argument")
    with httpx.Client(base_url=bookie.url, timeout=10.0) as http:
        for params in ({"limit": 0}, {"after": "x"}, {"after": -2}):
            assert_error(http.get("/v1/storage/ledgers", params=params), 400, "invalid_argument")


def test_cli_storage_by_log(env) -> None:  # type: ignore[no-untyped-def]
    """`quire admin storage BOOKIE --by-log` prints the report and a table of the logs
    with the plain and orphaned ledgers; --json prints the API's object with by_log,
    and without --by-log there is no by_log."""
    gateway, down = env["gateway"], env["down"]
    base = ["--gateway", gateway.url, "admin", "storage", down.address]
    runner = CliRunner()
    as_json = runner.invoke(cli_app, [*base, "--by-log", "--json"])
    assert as_json.exit_code == 0, as_json.output
    doc = json.loads(as_json.stdout)
    assert {row["log"] for row in doc["by_log"]["logs"]} == {"alpha", "beta"}
    assert doc["by_log"]["metadata_missing"]["ledgers"] == 1
    plain = runner.invoke(cli_app, [*base, "--json"])
    assert plain.exit_code == 0 and "by_log" not in json.loads(plain.stdout)
    table = runner.invoke(cli_app, [*base, "--by-log"])
    assert table.exit_code == 0, table.output
    # Titles wrap to the table's width: compare with the white space folded.
    text = " ".join(table.stdout.split())
    assert f"Storage of {down.address} by log: 2 logs" in text
    looked = f"{len(bookie_ledgers(down))} ledgers looked at"
    for words in ("alpha", "beta", "not in a log", "metadata missing", looked):
        assert words in text, words
