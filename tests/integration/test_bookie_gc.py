"""Bookie space given back (docs/operations.md "Space given back"; docs/api.md "Admin",
a bookie's storage and garbage collection) on a real cluster: three bookies with a short
grace and interval, one gateway.

Ledgers deleted while a bookie was down are listed orphaned by its storage report once
it is back, then freed after the grace, and the file's used bytes fall to what its live
ledgers need; live ledgers read back whole. Ledgers created and written while passes run
in a loop never lose an entry (a ledger's metadata exists before its first entry)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from services.cli.app import app as cli_app
from services.cluster.processes import ServiceProcess, poll_client
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    metric_value,
    ok,
    one_gateway,
    payload_for,
    wait_writable,
)

GRACE_S = 2.0
GC_ARGS = ["--gc-grace-s", str(GRACE_S), "--gc-interval-s", "0.5"]
ALL_THREE = {"ensemble_size": 3, "write_quorum": 3, "ack_quorum": 3}
PAGE_BYTES = 16384  # bookie/limits.py PAGE_SIZE_BYTES


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory) -> Iterator[tuple[Cluster, list[ServiceProcess], Gateway]]:  # type: ignore[no-untyped-def]
    with one_gateway(zookeeper, tmp_path_factory.mktemp("gc"), GC_ARGS) as cluster_env:
        yield cluster_env


def written_ledger(gateway: Gateway, entries: int, size: int) -> tuple[int, list[bytes]]:
    lid = int(gateway.create(**ALL_THREE)["ledger_id"])
    payloads = [payload_for(n, size) for n in range(entries)]
    for at in range(0, entries, 10):
        gateway.add_batch(lid, payloads[at : at + 10])
    gateway.close(lid)
    return lid, payloads


def storage(gateway: Gateway, bookie: ServiceProcess) -> dict:
    report: dict = ok(gateway.request("GET", f"/v1/admin/bookies/{bookie.address}/storage"))
    return report


def used(report: dict) -> int:
    return int(report["file_bytes"] - report["free_pages_bytes"])


def test_ledgers_deleted_while_a_bookie_was_down_are_orphaned_then_freed(env) -> None:  # type: ignore[no-untyped-def]
    """A bookie down while ledgers are deleted keeps their data; once back, its storage
    report lists them orphaned (metadata missing, waiting for the grace), then a pass
    after the grace frees them: the file's used bytes fall to about what its live
    ledgers need, by the report, and the live ledgers still read back whole."""
    _, bookies, gateway = env
    live = [written_ledger(gateway, 10, 1024) for _ in range(2)]
    doomed = [written_ledger(gateway, 40, 4096)[0] for _ in range(6)]
    down = bookies[2]
    down.stop()
    for lid in doomed:
        assert gateway.request("DELETE", f"/v1/ledgers/{lid}").status_code == 204
    down.start()
    down.wait_healthy(30.0)
    wait_writable(gateway, 3)

    def orphaned() -> dict | None:
        report = storage(gateway, down)
        return report if {o["ledger_id"] for o in report["orphaned"]} == set(doomed) else None

    seen = wait_for(orphaned, 10.0, "the deleted ledgers listed orphaned")
    assert isinstance(seen, dict)
    for item in seen["orphaned"]:
        assert item["bytes"] == 40 * 4096
        assert item["reason"].startswith("metadata missing since ")
    assert seen["orphaned_bytes"] == 6 * 40 * 4096
    used_before = used(seen)
    assert used_before > 6 * 40 * 4096

    def freed() -> dict | None:
        report = storage(gateway, down)
        done = report["orphaned_count"] == 0 and report["pending_delete_count"] == 0
        # A pass's deletes answer at once; their entries go in the background purge.
        done = done and report["purging"] == {"ledgers": 0, "bytes": 0}
        return report if done and report["live"]["ledgers"] == len(live) else None

    after = wait_for(freed, 10.0 + 2 * GRACE_S, "the orphaned ledgers freed")
    assert isinstance(after, dict)
    assert after["live"]["bytes"] == 2 * 10 * 1024
    # The purge freed the pages (and the paced vacuum gives them back): what is used is
    # what the live ledgers need, plus the tables' own pages.
    assert used(after) <= after["live"]["bytes"] + 16 * PAGE_BYTES
    assert used(after) < used_before // 4
    metrics = poll_client().get(f"{down.url}/metrics", timeout=10.0).text
    assert metric_value(metrics, "quire_bookie_gc_freed_ledgers_total") >= len(doomed)
    listed = poll_client().get(f"{down.url}/v1/ledgers", timeout=10.0).json()["ledgers"]
    assert not set(doomed) & set(listed)
    for lid, payloads in live:
        assert [data for _, data in gateway.read_all(lid)] == payloads
    # The bookies that were up deleted at once: nothing of the doomed ledgers there.
    for bookie in bookies[:2]:
        report = storage(gateway, bookie)
        assert report["orphaned_count"] == report["pending_delete_count"] == 0


def test_cli_storage_and_gc(env) -> None:  # type: ignore[no-untyped-def]
    """`quire admin storage` prints each running bookie's report (--json: the API's
    objects) and `quire admin gc --dry-run` answers a pass that deleted nothing."""
    _, bookies, gateway = env
    base = ["--gateway", gateway.url, "admin"]
    runner = CliRunner()
    listing = runner.invoke(cli_app, [*base, "storage", "--json"])
    assert listing.exit_code == 0, listing.output
    assert {doc["bookie"] for doc in json.loads(listing.stdout)} == {b.address for b in bookies}
    table = runner.invoke(cli_app, [*base, "storage", bookies[0].address])
    assert table.exit_code == 0 and f"Storage of {bookies[0].address}" in table.stdout
    dry = runner.invoke(cli_app, [*base, "gc", bookies[0].address, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["dry_run"] is True
    text = runner.invoke(cli_app, [*base, "gc", bookies[0].address])
    assert text.exit_code == 0 and "freed" in text.stdout


def test_no_live_ledger_loses_an_entry_while_passes_run(env) -> None:  # type: ignore[no-untyped-def]
    """50 rounds of creating a ledger and adding to it while every bookie runs passes in
    a loop (POST /v1/gc from another thread): every entry of every ledger is still on
    every bookie and reads back (the metadata is created before the first entry)."""
    _, bookies, gateway = env
    stop = threading.Event()
    passes = [0]
    failures: list[str] = []

    def collect() -> None:
        with httpx.Client(timeout=30.0) as http:
            while not stop.is_set():
                for bookie in bookies:
                    r = http.post(f"{bookie.url}/v1/gc", params={"dry_run": "false"})
                    if r.status_code != 200:
                        failures.append(r.text)
                    passes[0] += 1

    thread = threading.Thread(target=collect, name="gc-loop")
    thread.start()
    written: list[tuple[int, list[bytes]]] = []
    try:
        for _ in range(50):
            lid = int(gateway.create(**ALL_THREE)["ledger_id"])
            payloads = [payload_for(n, 128) for n in range(4)]
            gateway.add(lid, payloads[0])
            gateway.add_batch(lid, payloads[1:])
            written.append((lid, payloads))
    finally:
        stop.set()
        thread.join(30.0)
    assert not failures and passes[0] > 3
    with httpx.Client(timeout=10.0) as http:
        for lid, payloads in written:
            assert [data for _, data in gateway.read_all(lid)] == payloads
            for bookie in bookies:
                stored = http.get(f"{bookie.url}/v1/ledgers/{lid}/stored")
                assert stored.status_code == 200, stored.text
                assert stored.json()["ranges"] == [[0, 3]]
