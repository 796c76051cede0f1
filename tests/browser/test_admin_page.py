"""The admin page (GET /admin) in a real headless Chromium against a real cluster
(ZooKeeper, five bookies, a gateway with an admin token): what it shows matches the
Admin API, it follows changes without a reload (its staleness bound, two seconds with a
poll every second, is checked on the page's code: tests/unit/gateway/test_admin_page_poll.py),
its browsers page and search, its buttons act after a confirmation that works from the
keyboard, and it never logs a console error.

The tests share one cluster and one browser and run in file order: the ones that kill
or decommission bookies come last. Screenshots go to each test's temp dir."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kazoo.client import KazooClient
from playwright.sync_api import expect

from services.cluster.processes import ServiceProcess
from services.zk import paths as zkpaths
from tests.browser.conftest import Page
from tests.harness import Cluster, wait_for, wait_healthy
from tests.integration.gateway_support import (
    Appender,
    Gateway,
    module_cluster,
    start_gateway,
    wait_writable,
)

ADMIN_TOKEN = "admin-token-page-41d2"
BOOKIES = 5
RACKS = ("rack-a", "rack-a", "rack-b", "rack-b", "rack-c")  # one per bookie
# How long the browser tests wait for the page to follow a change. The page promises
# two seconds (it polls every second); that promise is checked exactly on the page's code
# (tests/unit/gateway/test_admin_page_poll.py). Here headless Chromium on a loaded
# two-core machine fetches and redraws: a page that does not follow at all, or only on a
# reload, still fails.
FOLLOW_WAIT_MS = 10_000
PAGE_SIZE = 20  # ledgers per page in the ledger browser


@dataclass
class Env:
    cluster: Cluster
    gateway: Gateway
    bookies: list[ServiceProcess]
    zk: KazooClient

    def get(self, path: str, **params: object) -> Any:
        r = self.gateway.request("GET", path, params=params)
        assert r.status_code == 200, r.text
        return r.json()

    def post(self, path: str, **kw: Any) -> Any:
        r = self.gateway.request("POST", path, **kw)
        assert r.status_code in (200, 201, 202), r.text
        return r.json()

    def put(self, path: str) -> Any:
        r = self.gateway.request("PUT", path)
        assert r.status_code in (200, 201), r.text
        return r.json()

    def states(self) -> dict[str, str]:
        return {b["id"]: b["state"] for b in self.get("/v1/admin/bookies")["bookies"]}


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("admin-page")
    with module_cluster(zookeeper, base) as cluster:
        args = ["--zk-session-timeout", "4", "--rack"]
        bookies = [cluster.start_bookie(extra_args=[*args, r], wait=False) for r in RACKS]
        wait_healthy(bookies)
        gateway = start_gateway(cluster, ["--admin-token", ADMIN_TOKEN], token=ADMIN_TOKEN)
        wait_writable(gateway, BOOKIES)
        zk = KazooClient(hosts=zookeeper.connect_string + cluster.zk_root, timeout=10.0)
        zk.start(10.0)
        try:
            yield Env(cluster, gateway, bookies, zk)
        finally:
            zk.stop()
            zk.close()
            gateway.close_client()


def login(tab: Page, env: Env) -> Any:
    """Open the page, give it the admin token, and wait for the first poll's figures."""
    page = tab.log_in(env.gateway.url, ADMIN_TOKEN)
    expect(page.locator("#status")).to_have_attribute("data-updated", _any())
    return page


def _any() -> Any:
    import re

    return re.compile(r"\d+")


def no_errors(tab: Page) -> None:
    assert tab.errors == [], tab.errors


def create_ledger(env: Env, entries: int, e: int = 3, qw: int = 2, qa: int = 2) -> int:
    doc = env.post("/v1/ledgers", json={"ensemble_size": e, "write_quorum": qw, "ack_quorum": qa})
    ledger_id = int(doc["ledger_id"])
    for n in range(entries):
        r = env.gateway.request("POST", f"/v1/ledgers/{ledger_id}/entries", content=b"e%d" % n)
        assert r.status_code == 200, r.text
    return ledger_id


# ------------------------------------------------------------------- the token


def test_the_token_is_asked_for_kept_in_the_tab_and_never_in_a_url(tab: Page, env: Env) -> None:
    """With an admin token set the page shows only the token form; a wrong token is
    refused (the form again, nothing shown), the right one shows the cluster; the token
    lives in session storage, never in the URL or local storage."""
    page = tab.page
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.goto(f"{env.gateway.url}/admin")
    expect(page.locator("#token-form")).to_be_visible()
    expect(page.locator("#main")).to_be_hidden()
    expect(page.get_by_label("Admin token")).to_be_focused()

    assert not any("/v1/" in url for url in requests), requests  # no call bound to be 401
    page.fill("#token", "not-the-token")
    with page.expect_response(lambda r: r.status == 401):
        page.press("#token", "Enter")
    expect(page.locator("#token-form")).to_be_visible()
    expect(page.locator("#status")).to_have_text("Waiting for a token")
    expect(page.locator("#main")).to_be_hidden()

    page.fill("#token", ADMIN_TOKEN)
    page.click("text=Use token")
    expect(page.locator("#main")).to_be_visible()
    expect(page.locator("#token-form")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('quire-admin-token')") == ADMIN_TOKEN
    assert page.evaluate("localStorage.length") == 0
    assert page.locator("#token").input_value() == ""
    assert all(ADMIN_TOKEN not in url and "not-the-token" not in url for url in requests)
    assert ADMIN_TOKEN not in page.url
    # The only errors are the browser's own notes of the 401 answers to the wrong token.
    assert tab.errors and all("401" in e for e in tab.errors), tab.errors


def test_the_page_and_its_assets_are_served_without_a_token(env: Env) -> None:
    anonymous = Gateway(env.gateway.proc)
    try:
        page = anonymous.request("GET", "/admin")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        for name, kind in (("admin.js", "text/javascript"), ("admin.css", "text/css")):
            r = anonymous.request("GET", f"/admin/assets/{name}")
            assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
        missing = anonymous.request("GET", "/admin/assets/secrets.txt")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        assert anonymous.request("GET", "/v1/admin/cluster").status_code == 401
    finally:
        anonymous.close_client()


# ------------------------------------------------------------------- the live part


def test_cluster_and_bookies_match_the_api(tab: Page, env: Env) -> None:
    """Every figure on the page is the API's: the cluster cards (racks and placement
    violations included), and one row per bookie with its address, state, rack, ledger
    count and free disk."""
    create_ledger(env, 3)
    page = login(tab, env)
    cluster = env.get("/v1/admin/cluster")
    bookies = env.get("/v1/admin/bookies")["bookies"]
    counts = cluster["bookies"]
    expect(page.locator("#bookie-counts")).to_have_text(
        f"{counts['writable']} / {counts['readonly']} / {counts['unavailable']}"
    )
    expect(page.locator("#auditor")).to_have_text("none elected")
    expect(page.locator("#replication")).to_have_text("enabled")
    expect(page.locator("#under-count")).to_have_text("0")
    expect(page.locator("#under-empty")).to_be_visible()
    expect(page.locator("#racks")).to_have_text("rack-a (2), rack-b (2), rack-c (1)")
    expect(page.locator("#placement-count")).to_have_text("–")  # no auditor has checked
    rows = page.locator("#bookies tbody tr")
    expect(rows).to_have_count(BOOKIES)
    assert [rows.nth(i).get_attribute("data-bookie") for i in range(BOOKIES)] == [
        b["id"] for b in bookies
    ]
    for b in bookies:
        row = page.locator(f'tr[data-bookie="{b["id"]}"]')
        expect(row.locator("th")).to_have_text(b["address"])
        expect(row.locator(".state")).to_have_text("writable")
        expect(row.locator(".rack")).to_have_text(b["rack"])
        expect(row.locator(".ledgers")).to_have_text(str(b["ledgers"]))
        expect(row.locator(".free")).to_contain_text(f"({100 * b['free_ratio']:.0f}%)")
        expect(row.get_by_role("button", name=f"Decommission {b['id']}")).to_be_enabled()
    tab.shot("cluster")
    no_errors(tab)


def test_adds_per_second_follow_the_traffic(tab: Page, env: Env) -> None:
    """While a writer adds entries, the bookies storing them show a rate above zero;
    when it stops, the rate falls back to zero."""
    ledger_id = create_ledger(env, 0, e=BOOKIES, qw=BOOKIES, qa=BOOKIES)
    page = login(tab, env)
    appender = Appender(env.gateway.url, ledger_id, batch=10, token=ADMIN_TOKEN).start()
    try:
        appender.wait_count(200)
        for b in env.bookies:
            cell = page.locator(f'tr[data-bookie="{b.address}"] .adds')
            expect(cell).to_have_text(_positive(), timeout=FOLLOW_WAIT_MS)
    finally:
        appender.stop()
    assert not appender.errors, appender.errors
    for b in env.bookies:
        cell = page.locator(f'tr[data-bookie="{b.address}"] .adds')
        expect(cell).to_have_text("0", timeout=FOLLOW_WAIT_MS)
    no_errors(tab)


def _positive() -> Any:
    import re

    return re.compile(r"^[1-9]\d*$")


def test_a_ledger_shows_its_fragments_and_a_live_lac(tab: Page, env: Env) -> None:
    """Searching a ledger id shows its state, LAC and a fragments grid: one row per
    bookie of its ensemble, each marked with its ensemble index over the entry range;
    entries added later move the LAC on the page without a reload (its polls)."""
    ledger_id = create_ledger(env, 5)
    meta = env.get(f"/v1/ledgers/{ledger_id}")
    page = login(tab, env)
    page.fill("#ledger-id", str(ledger_id))
    page.press("#ledger-id", "Enter")
    expect(page.locator("#h-detail")).to_have_text(f"Ledger {ledger_id}")
    expect(page.locator("#ledger-state")).to_have_text("OPEN")
    expect(page.locator("#ledger-lac")).to_have_text("4")
    grid = page.locator("table.fragments")
    expect(grid.locator("thead th")).to_have_text(["Bookie", "entries 0–4"])
    (ensemble,) = [f["bookies"] for f in meta["fragments"]]
    expect(grid.locator("tbody tr")).to_have_count(len(ensemble))
    for index, bookie in enumerate(ensemble):
        expect(grid.locator(f'tr[data-bookie="{bookie}"] td')).to_have_text(f"#{index}")
    tab.shot("ledger")

    for n in range(3):
        r = env.gateway.request("POST", f"/v1/ledgers/{ledger_id}/entries", content=b"m%d" % n)
        assert r.status_code == 200
    expect(page.locator("#ledger-lac")).to_have_text("7", timeout=FOLLOW_WAIT_MS)
    env.post(f"/v1/ledgers/{ledger_id}/close")
    expect(page.locator("#ledger-state")).to_have_text("CLOSED", timeout=3000)
    expect(grid.locator("thead th")).to_have_text(["Bookie", "entries 0–7"])
    no_errors(tab)


def test_the_ledger_browser_pages_like_the_api(tab: Page, env: Env) -> None:
    """The ledger list shows the API's pages of 20 ids; Next goes to the API's next page,
    First back; a listed ledger opens its detail."""
    while len(env.get("/v1/ledgers", limit=1000)["ledgers"]) <= PAGE_SIZE:
        create_ledger(env, 0)
    first = env.get("/v1/ledgers", limit=PAGE_SIZE)
    second = env.get("/v1/ledgers", limit=PAGE_SIZE, after=first["next"])
    page = login(tab, env)
    items = page.locator("#ledgers li button")
    expect(items).to_have_text([f"ledger {i}" for i in first["ledgers"]])
    page.click("#ledgers-next")
    expect(items).to_have_text([f"ledger {i}" for i in second["ledgers"]])
    page.click("#ledgers-first")
    expect(items).to_have_text([f"ledger {i}" for i in first["ledgers"]])
    target = first["ledgers"][1]
    page.click(f"text=ledger {target}")
    expect(page.locator("#h-detail")).to_have_text(f"Ledger {target}")
    no_errors(tab)


def test_logs_search_and_a_log_shows_its_ledgers_in_order(tab: Page, env: Env) -> None:
    """The log search lists exactly the names with that prefix (the API's ?prefix=);
    a log's detail lists its ledgers in order with their positions and its writer."""
    for name in ("orders-eu", "orders-us", "users"):
        env.put(f"/v1/logs/{name}")
    writer = env.post("/v1/logs/orders-eu/writer")
    for n in range(3):
        env.post("/v1/logs/orders-eu/records", content=b"r%d" % n)
    env.post("/v1/logs/orders-eu/roll")
    env.post("/v1/logs/orders-eu/records", content=b"after the roll")
    log = env.get("/v1/logs/orders-eu")
    assert len(log["ledgers"]) == 2
    assert env.get("/v1/logs", prefix="orders")["logs"] == ["orders-eu", "orders-us"]

    page = login(tab, env)
    page.fill("#log-prefix", "orders")
    page.press("#log-prefix", "Enter")
    expect(page.locator("#logs li")).to_have_text(["orders-eu", "orders-us"])
    page.fill("#log-prefix", "nothing-like-this")
    page.press("#log-prefix", "Enter")
    expect(page.locator("#logs li")).to_have_text(["no log"])
    page.fill("#log-prefix", "orders")
    page.press("#log-prefix", "Enter")
    page.get_by_role("button", name="orders-eu").click()
    expect(page.locator("#h-detail")).to_have_text("Log orders-eu")
    expect(page.locator("#log-summary")).to_contain_text(
        f"Writer: {log['writer']['gateway']}, epoch {writer['epoch']}. 2 ledgers."
    )
    rows = page.locator("#log-ledgers tbody tr")
    expect(rows).to_have_count(2)
    first, last = log["ledgers"]
    expect(rows.nth(0).locator("th, td")).to_have_text(
        [str(first), "CLOSED", f"{first}:0", f"{first}:2"]
    )
    expect(rows.nth(1).locator("th, td")).to_have_text([str(last), "OPEN", f"{last}:0", "open"])
    expect(page.locator("#cursors-empty")).to_have_text("No durable cursor on this log.")
    tab.shot("log")
    no_errors(tab)


def test_under_replication_shows_each_repair_live(tab: Page, env: Env) -> None:
    """Under-replicated ledgers appear with their missing bookies; a worker's progress
    is drawn as a bar that follows the lock's progress; cleared marks leave the page."""
    ids = [11, 12]
    for ledger_id in ids:
        doc = {"missing_bookies": ["127.0.0.1:9"], "marked_at": int(time.time() * 1000)}
        env.zk.create(zkpaths.under_replicated(ledger_id), json.dumps(doc).encode(), makepath=True)
    lock_path = zkpaths.replication_lock(12)

    def lock(done: int) -> bytes:
        progress = {"fragments_done": done, "fragments_total": 4, "entries_copied": 10 * done}
        return json.dumps({"worker": "127.0.0.1:8092", "since": 1, "progress": progress}).encode()

    env.zk.create(lock_path, lock(1), makepath=True)
    try:
        page = login(tab, env)
        expect(page.locator("#under-count")).to_have_text("2")
        expect(page.locator("#under tbody tr")).to_have_count(2)
        waiting = page.locator('#under tr[data-ledger="11"]')
        expect(waiting.locator("td").nth(0)).to_have_text("127.0.0.1:9")
        expect(waiting).to_contain_text("waiting for a worker")
        running = page.locator('#under tr[data-ledger="12"]')
        expect(running).to_contain_text("127.0.0.1:8092")
        bar = running.get_by_role("progressbar", name="ledger 12 repair")
        expect(bar).to_have_attribute("value", "1")
        expect(bar).to_have_attribute("max", "4")
        env.zk.set(lock_path, lock(3))
        expect(bar).to_have_attribute("value", "3", timeout=FOLLOW_WAIT_MS)
        expect(running).to_contain_text("3/4 fragments, 30 entries")
        tab.shot("under-replication")
    finally:
        env.zk.delete(lock_path)
        for ledger_id in ids:
            env.zk.delete(zkpaths.under_replicated(ledger_id))
    expect(page.locator("#under-empty")).to_be_visible(timeout=FOLLOW_WAIT_MS)
    expect(page.locator("#under-count")).to_have_text("0")
    no_errors(tab)


def test_the_replication_switch_works_from_the_keyboard_after_a_confirmation(
    tab: Page, env: Env
) -> None:
    """Disable opens a confirmation dialog with Cancel focused: Escape or Cancel changes
    nothing; Confirm (reached with Tab, pressed with Enter) disables replication in the
    cluster; Enable turns it back on."""
    page = login(tab, env)
    disable = page.get_by_role("button", name="Disable")
    disable.focus()
    page.keyboard.press("Enter")
    dialog = page.locator("#confirm")
    expect(dialog).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text("Disable re-replication")
    expect(page.locator("#confirm-cancel")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    disable.focus()
    page.keyboard.press("Enter")  # Cancel (focused) this time
    expect(dialog).to_be_visible()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    assert env.get("/v1/admin/cluster")["replication_enabled"] is True

    disable.focus()
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.locator("#confirm-ok")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#replication")).to_have_text("disabled")
    assert env.get("/v1/admin/cluster")["replication_enabled"] is False
    expect(disable).to_be_disabled()
    tab.shot("replication-disabled")

    page.get_by_role("button", name="Enable").click()
    page.locator("#confirm-ok").click()
    expect(page.locator("#replication")).to_have_text("enabled")
    assert env.get("/v1/admin/cluster")["replication_enabled"] is True
    no_errors(tab)


# ------------------------------------------------------------------- kills and decommissions


def test_a_killed_bookie_shows_down_on_the_page(tab: Page, env: Env) -> None:
    """SIGKILL a bookie: once the API says it is down, the page says so by its polls,
    in its row and in the counts; a ledger written through the loss
    draws its second fragment without the dead bookie."""
    ledger_id = create_ledger(env, 3, e=3, qw=3, qa=2)
    ensemble = env.get(f"/v1/ledgers/{ledger_id}")["fragments"][0]["bookies"]
    victim = next(b for b in env.bookies if b.address == ensemble[0])
    page = login(tab, env)
    victim.kill()
    wait_for(lambda: env.states()[victim.address] == "down", 30.0, "the API to say down")
    row = page.locator(f'tr[data-bookie="{victim.address}"]')
    expect(row.locator(".state")).to_have_text("down", timeout=FOLLOW_WAIT_MS)
    expect(page.locator("#bookie-counts")).to_have_text(f"{BOOKIES - 1} / 0 / 1")
    expect(row.locator(".ledgers")).to_have_text("–")

    for n in range(2):  # the first add after the loss changes the ensemble
        r = env.gateway.request("POST", f"/v1/ledgers/{ledger_id}/entries", content=b"x%d" % n)
        assert r.status_code == 200, r.text
    fragments = env.get(f"/v1/ledgers/{ledger_id}")["fragments"]
    assert len(fragments) == 2 and victim.address not in fragments[1]["bookies"]
    page.fill("#ledger-id", str(ledger_id))
    page.press("#ledger-id", "Enter")
    grid = page.locator("table.fragments")
    second = fragments[1]["first_entry_id"]
    expect(grid.locator("thead th")).to_have_text(
        ["Bookie", f"entries 0–{second - 1}", f"entries {second}–4"]
    )
    dead = grid.locator(f'tr[data-bookie="{victim.address}"] td')
    expect(dead).to_have_text(["#0", ""])
    replacement = next(b for b in fragments[1]["bookies"] if b not in ensemble)
    expect(grid.locator(f'tr[data-bookie="{replacement}"] td')).to_have_text(["", "#0"])
    tab.shot("bookie-down")
    no_errors(tab)


def test_decommission_from_the_page(tab: Page, env: Env) -> None:
    """The Decommission button of a bookie asks first; Confirm sends the decommission:
    the API and the page say "decommissioning" and the button is disabled."""
    running = [b.address for b in env.bookies if b.alive()]
    target = running[-1]
    page = login(tab, env)
    button = page.get_by_role("button", name=f"Decommission {target}")
    button.click()
    expect(page.locator("#confirm-text")).to_contain_text(f"Decommission bookie {target}?")
    page.locator("#confirm-cancel").click()
    assert env.states()[target] == "writable"
    button.click()
    page.locator("#confirm-ok").click()
    row = page.locator(f'tr[data-bookie="{target}"]')
    expect(row.locator(".state")).to_have_text(_decommission_states())
    assert env.states()[target] in ("decommissioning", "decommissioned")
    expect(button).to_be_disabled()
    tab.shot("decommission")
    no_errors(tab)


def _decommission_states() -> Any:
    import re

    return re.compile(r"^decommission(ing|ed)$")
