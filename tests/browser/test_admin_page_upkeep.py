"""The admin page's views of logs that look after themselves (issue 41), in a real
headless Chromium against a real cluster (ZooKeeper, three bookies whose garbage
collection runs only on demand with a short grace, a gateway with an admin token): a
log's durable cursors with their position, lag and last ack, as the API answers them and
following new appends; a bookie's storage report; and a garbage-collection pass from the
page, a dry run first, then a confirmed pass, on a ledger deleted while the bookie was
down (the page says so clearly while it is down), with the bookie's bytes counted by log
on demand.

The tests share one cluster and run in file order."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from services.cluster.processes import ServiceProcess
from tests.browser.conftest import Page
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    module_cluster,
    ok,
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)

ADMIN_TOKEN = "admin-token-upkeep-7f31"
GRACE_S = 2.0
# No pass on its own (interval 0): every look the grace counts from is one the page asked for.
GC_ARGS = ["--gc-grace-s", str(GRACE_S), "--gc-interval-s", "0"]
STORAGE_REFRESH_S = 5.0  # admin.js STORAGE_REFRESH_MS
REFRESHED_MS = int((STORAGE_REFRESH_S + 3.0) * 1000)  # one refresh, a poll and slack
RECORDS = 12
RECORD_BYTES = 100
MARKUP = "<b>not bold</b>"


@dataclass
class Env:
    cluster: Cluster
    gateway: Gateway
    bookies: list[ServiceProcess]


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("admin-upkeep")) as cluster:
        bookies = start_bookies(cluster, 3, GC_ARGS)
        gateway = start_gateway(cluster, ["--admin-token", ADMIN_TOKEN], token=ADMIN_TOKEN)
        try:
            wait_writable(gateway, 3)
            yield Env(cluster, gateway, bookies)
        finally:
            gateway.close_client()


def login(tab: Page, env: Env) -> Any:
    page = tab.log_in(env.gateway.url, ADMIN_TOKEN)
    expect(page.locator("#status")).to_have_attribute("data-updated", re.compile(r"\d+"))
    return page


def open_log(page: Any, name: str) -> None:
    page.fill("#log-prefix", name)
    page.press("#log-prefix", "Enter")
    page.get_by_role("button", name=name, exact=True).click()
    expect(page.locator("#h-detail")).to_have_text(f"Log {name}")


def append(env: Env, log: str, n: int) -> str:
    doc = ok(env.gateway.request("POST", f"/v1/logs/{log}/records", content=payload_for(n, 100)))
    return f"{doc['position']['ledger_id']}:{doc['position']['entry_id']}"  # as cursors say it


def storage(env: Env, bookie: ServiceProcess) -> dict[str, Any]:
    path = f"/v1/admin/bookies/{bookie.address}/storage"
    report: dict[str, Any] = ok(env.gateway.request("GET", path))
    return report


# ------------------------------------------------------------------- retention


def test_a_log_shows_its_retention_policy_and_usage(tab: Page, env: Env) -> None:
    """A log's detail shows its retention policy (or says it has none) and what it
    holds, as ``GET /v1/logs/{name}?usage=true`` answers it, following a policy change
    and new appends within the page's polling."""
    gw = env.gateway
    policy = {"max_age_s": 3600, "max_records": 1000, "retain_for_cursors": True,
              "max_backlog_bytes": 1 << 20}  # fmt: skip
    ok(gw.request("PUT", "/v1/logs/kept", json={"retention": policy}), 201)
    ok(gw.request("PUT", "/v1/logs/plain"), 201)
    for n in range(5):
        append(env, "kept", n)
    shown = ok(gw.request("GET", "/v1/logs/kept", params={"usage": "true"}))
    assert shown["usage"]["records"] == 5

    page = login(tab, env)
    open_log(page, "kept")
    expect(page.locator("#retention-max-age")).to_have_text("3,600 s")
    expect(page.locator("#retention-max-records")).to_have_text("1,000")
    expect(page.locator("#retention-max-bytes")).to_have_text("none")
    expect(page.locator("#retention-cursors")).to_contain_text("yes, up to")
    expect(page.locator("#retention-cursors span span")).to_have_attribute(
        "data-bytes", str(1 << 20)
    )
    expect(page.locator("#usage-records")).to_have_text("5")
    expect(page.locator("#usage-ledgers")).to_have_text("1")
    expect(page.locator("#usage-bytes span")).to_have_attribute(
        "data-bytes", str(shown["usage"]["bytes"])
    )
    expect(page.locator("#usage-oldest time")).to_have_attribute(
        "data-ms", str(shown["usage"]["oldest_ms"])
    )
    # A change of policy and more records show without reopening the log.
    ok(gw.request("PATCH", "/v1/logs/kept", json={"retention": {"max_records": 50}}))
    append(env, "kept", 5)
    expect(page.locator("#retention-max-records")).to_have_text("50")
    expect(page.locator("#usage-records")).to_have_text("6")
    tab.shot("retention")

    open_log(page, "plain")
    expect(page.locator("#retention-none")).to_contain_text("No retention policy")
    expect(page.locator("#usage-records")).to_have_text("0")
    assert tab.errors == [], tab.errors


# ------------------------------------------------------------------- cursors


def test_a_log_lists_its_cursors_with_their_lag_and_last_ack(tab: Page, env: Env) -> None:
    """A log's detail lists its durable cursors by name with the API's position, lag in
    records and bytes and last ack (human-readable, the raw ms in the element): after 12
    appends and an ack of the 5th record the lag is 7 records; it follows new appends
    within the page's polling; a cursor never acked says so; a log without cursors
    says it has none."""
    gw = env.gateway
    for name in ("clicks", "quiet"):
        assert gw.request("PUT", f"/v1/logs/{name}").status_code in (200, 201)
    positions = [append(env, "clicks", n) for n in range(RECORDS)]
    for cursor in ("billing", "search"):
        ok(gw.request("PUT", f"/v1/logs/clicks/cursors/{cursor}", json={"start": "earliest"}), 201)
    acked = ok(
        gw.request("POST", "/v1/logs/clicks/cursors/billing/ack", json={"position": positions[4]})
    )
    assert acked["moved"] is True
    listed = {c["name"]: c for c in ok(gw.request("GET", "/v1/logs/clicks/cursors"))["cursors"]}
    billing, search = listed["billing"], listed["search"]
    assert billing["lag_records"] == RECORDS - 5
    assert search["lag_records"] == RECORDS
    assert search["position"] is None and search["acked_at"] is None

    page = login(tab, env)
    open_log(page, "clicks")
    rows = page.locator("#cursors tbody tr")
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-cursor") for i in range(2)] == ["billing", "search"]
    expect(page.locator("#h-cursors")).to_have_text("Cursors (2)")
    row = page.locator('tr[data-cursor="billing"]')
    expect(row.locator(".position")).to_have_text(positions[4])
    expect(row.locator(".lag-records")).to_have_text(str(RECORDS - 5))
    expect(row.locator(".lag-bytes span")).to_have_attribute(
        "data-bytes", str(billing["lag_bytes"])
    )
    assert billing["lag_bytes"] >= (RECORDS - 5) * RECORD_BYTES
    ack = row.locator(".acked-at time")
    expect(ack).to_have_attribute("data-ms", str(billing["acked_at"]))
    expect(ack).to_contain_text(" ago)")
    expect(ack).to_have_attribute("title", re.compile(rf"acked_at: {billing['acked_at']}\b"))
    other = page.locator('tr[data-cursor="search"]')
    expect(other.locator(".position")).to_have_text("none (before the first record)")
    expect(other.locator(".lag-records")).to_have_text(str(RECORDS))
    expect(other.locator(".acked-at")).to_have_text("never")
    expect(other.locator(".skipped")).to_have_text("none")  # retention removed nothing unread
    tab.shot("cursors")

    # The view is live: three more appends show on the page by its next polls.
    for n in range(RECORDS, RECORDS + 3):
        append(env, "clicks", n)
    expect(row.locator(".lag-records")).to_have_text(str(RECORDS - 5 + 3))
    expect(other.locator(".lag-records")).to_have_text(str(RECORDS + 3))
    after = ok(gw.request("GET", "/v1/logs/clicks/cursors/billing"))
    expect(row.locator(".lag-bytes span")).to_have_attribute("data-bytes", str(after["lag_bytes"]))
    assert after["lag_bytes"] > billing["lag_bytes"]

    open_log(page, "quiet")
    expect(page.locator("#cursors-empty")).to_have_text("No durable cursor on this log.")
    expect(page.locator("#cursors")).to_have_count(0)
    assert tab.errors == [], tab.errors


# ------------------------------------------------------------------- storage and gc


def test_storage_and_a_gc_pass_from_the_page(tab: Page, env: Env) -> None:
    """A bookie's storage view says clearly when the bookie is down; once it is back it
    shows the report's figures. A ledger deleted meanwhile is still stored there: the
    dry run frees nothing (its grace has not started) and deletes nothing; a confirmed
    pass starts the grace, and the view lists the ledger orphaned with its bytes and
    reason, then pending delete; a dry run then says it would free exactly that ledger,
    and a confirmed pass frees it: the view lists nothing left and the bookie no longer
    stores it. Cancel sends nothing, and a real pass is offered only after a dry run.
    Counting by log, on demand, shows the API's per-log rows, the deleted ledger as
    metadata missing, and a log name from metadata as text."""
    gw = env.gateway
    doomed = int(gw.create(ensemble_size=3, write_quorum=3, ack_quorum=3)["ledger_id"])
    gw.add_batch(doomed, [payload_for(n, 1000) for n in range(20)])
    gw.close(doomed)
    doomed_bytes = 20 * 1000
    # A ledger whose metadata names a "log" that is markup: the count by log shows it as text.
    marked = int(
        gw.create(ensemble_size=3, write_quorum=3, ack_quorum=3, metadata={"quire.log": MARKUP})[
            "ledger_id"
        ]
    )
    gw.add_batch(marked, [payload_for(n, 300) for n in range(4)])
    gw.close(marked)
    bookie = env.bookies[2]
    page = login(tab, env)

    bookie.stop()
    try:
        page.get_by_role("button", name=f"Storage of {bookie.address}").click()
        expect(page.locator("#h-detail")).to_have_text(f"Bookie {bookie.address}: storage")
        problem = page.locator("#storage-figures .problem")
        expect(problem).to_contain_text(f"No storage report from bookie {bookie.address}")
        expect(problem).to_contain_text("bookie_unavailable")
        tab.shot("storage-bookie-down")
        assert gw.request("DELETE", f"/v1/ledgers/{doomed}").status_code == 204
    finally:
        bookie.start()
    bookie.wait_healthy(30.0)
    wait_writable(gw, 3)

    # Back: the view shows the report (the live figures are the API's).
    report = storage(env, bookie)
    assert report["orphaned_count"] == report["pending_delete_count"] == 0
    live = page.locator("#storage-live")
    expect(live).to_contain_text(f"{report['live']['ledgers']} ledger", timeout=REFRESHED_MS)
    expect(live.locator("span")).to_have_attribute("data-bytes", str(report["live"]["bytes"]))
    expect(page.locator("#storage-file span")).to_have_attribute(
        "data-bytes", re.compile(r"[1-9]\d*")
    )
    expect(page.locator("#storage-orphaned-list-empty")).to_have_text("No ledger is orphaned.")
    expect(page.locator("#storage-last-pass")).to_have_text("none since the bookie started")
    # A small store is counted afresh for each report (docs/api.md, "GET /v1/storage").
    expect(page.locator("#storage-counted")).to_contain_text(
        re.compile(r"\(the count took \d+ ms\)")
    )
    expect(page.locator("#storage-gc")).to_contain_text(f"grace {GRACE_S:g} s")

    # By log, on demand: the page's rows are the API's count; the deleted ledger's bytes
    # are metadata missing; a log name from metadata is text, never markup.
    expect(page.locator("#by-log-table")).to_have_count(0)
    page.get_by_role("button", name="Count by log").click()
    expect(page.locator("#by-log-summary")).to_contain_text("looked at")
    by_log = ok(
        gw.request("GET", f"/v1/admin/bookies/{bookie.address}/storage", params={"by_log": "true"})
    )["by_log"]
    assert by_log["metadata_missing"] == {"ledgers": 1, "bytes": doomed_bytes}
    assert MARKUP in {row["log"] for row in by_log["logs"]}
    table = page.locator("#by-log-table")
    expect(table.locator('tr[data-bucket="metadata_missing"] span')).to_have_attribute(
        "data-bytes", str(doomed_bytes)
    )
    expect(table.locator("tbody tr[data-log]")).to_have_count(len(by_log["logs"]))
    for row in by_log["logs"]:
        shown = table.locator("tbody tr[data-log]").filter(has_text=row["log"])
        expect(shown.locator("span")).to_have_attribute("data-bytes", str(row["bytes"]))
    expect(table.locator("tbody tr[data-log] th").filter(has_text=MARKUP)).to_have_count(1)
    expect(table.locator("b")).to_have_count(0)
    tab.shot("storage-by-log")

    run = page.locator("#gc-run")
    expect(run).to_be_disabled()  # a dry run first
    page.click("#gc-dry-run")
    summary = page.locator("#gc-summary")
    expect(summary).to_contain_text("a pass now would free 0 ledgers")
    expect(page.locator("#gc-waiting")).to_contain_text("Waiting for the grace: 1 ledger found")
    assert storage(env, bookie)["orphaned_count"] == 0  # a dry run records no look

    # Cancel sends nothing.
    expect(run).to_be_enabled()
    run.click()
    expect(page.locator("#confirm")).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text("would free 0 ledgers")
    page.keyboard.press("Escape")
    expect(page.locator("#confirm")).to_be_hidden()
    assert storage(env, bookie)["last_pass"] is None

    # A pass: the first look, the grace starts.
    run.click()
    page.click("#confirm-ok")
    expect(summary).to_contain_text("freed 0 ledgers")
    expect(run).to_be_disabled()  # the next pass asks for a new dry run
    orphan = page.locator(f'#storage-orphaned-list tr[data-ledger="{doomed}"]')
    expect(orphan.locator(".bytes span")).to_have_attribute("data-bytes", str(doomed_bytes))
    expect(orphan.locator(".reason")).to_contain_text("metadata missing since")
    expect(page.locator("#storage-orphaned")).to_contain_text("1 ledger, ")
    expect(page.locator("#storage-last-pass")).to_contain_text("freed 0 ledgers")
    tab.shot("storage-orphaned")

    def pending() -> bool:
        report = storage(env, bookie)
        return [item["ledger_id"] for item in report["pending_delete"]] == [doomed]

    wait_for(pending, 3 * GRACE_S, "the orphaned ledger past its grace")
    pending_row = page.locator(f'#storage-pending-list tr[data-ledger="{doomed}"]')
    expect(pending_row.locator(".reason")).to_contain_text(
        "still past the grace", timeout=REFRESHED_MS
    )
    expect(page.locator("#storage-orphaned-list-empty")).to_be_visible()

    page.click("#gc-dry-run")
    expect(summary).to_contain_text("a pass now would free 1 ledger (")
    expect(summary.locator("span")).to_have_attribute("data-bytes", str(doomed_bytes))
    freed = page.locator("#gc-freed tbody tr")
    expect(freed).to_have_count(1)
    expect(freed).to_have_attribute("data-ledger", str(doomed))
    assert storage(env, bookie)["pending_delete_count"] == 1  # nothing deleted

    run.click()
    expect(page.locator("#confirm-text")).to_contain_text("would free 1 ledger (")
    page.click("#confirm-ok")
    expect(summary).to_contain_text("Pass at ")
    expect(summary).to_contain_text("freed 1 ledger (")
    expect(page.locator("#gc-result")).not_to_have_attribute("data-dry-run", "true")
    expect(freed).to_have_attribute("data-ledger", str(doomed))
    expect(page.locator("#storage-pending-list-empty")).to_have_text("No ledger is pending delete.")
    expect(page.locator("#storage-orphaned-list-empty")).to_be_visible()
    expect(page.locator("#storage-last-pass")).to_contain_text("freed 1 ledger (")
    tab.shot("storage-freed")
    after = storage(env, bookie)
    assert after["last_pass"]["freed_ledgers"] == 1
    assert after["last_pass"]["freed_bytes"] == doomed_bytes
    stored = httpx.get(f"{bookie.url}/v1/ledgers", timeout=10.0).json()["ledgers"]
    assert doomed not in stored
    # The only console errors are the browser's own notes of the down bookie's 503.
    assert all("503" in error for error in tab.errors), tab.errors
