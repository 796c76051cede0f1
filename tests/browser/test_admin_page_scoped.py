"""The admin page with a scoped read token (docs/api.md "Scoped tokens"), in a real
headless Chromium against a gateway of the standard cluster (tests/shared.py) started
with a token file: the page shows the cluster, and an action is refused with the 403's
message in its banner while the page goes on working."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from gateway.http.scopes import token_digest
from tests.browser.conftest import Page
from tests.integration.gateway_support import Gateway
from tests.shared import StandardCluster

READER = "page-reader-token-6e2d90b1"
ADMIN = "page-admin-token-c47a3f58"


@pytest.fixture(scope="module")
def gateway(shared_cluster: StandardCluster, tmp_path_factory: pytest.TempPathFactory) -> Gateway:
    path: Path = tmp_path_factory.mktemp("page-tokens") / "tokens.toml"
    path.write_text(
        "".join(
            f'[[token]]\nname = "{name}"\nsha256 = "{token_digest(token)}"\n'
            f'scope = "{scope}"\nledgers = "*"\nlogs = "*"\n\n'
            for name, token, scope in (("reader", READER, "read"), ("admin", ADMIN, "admin"))
        )
    )
    return shared_cluster.gateway(["--token-file", str(path)], token=ADMIN)


def test_a_read_token_shows_the_cluster_and_its_actions_are_refused_clearly(
    tab: Page, gateway: Gateway
) -> None:
    """The page asks for a token (the gateway requires one), shows the cluster with a
    read token, and a confirmed action answers 403: the banner says it was refused and
    which scope is missing, the replication state is unchanged and polling goes on."""
    page = tab.log_in(gateway.url, READER)
    expect(page.locator("#replication")).to_have_text("enabled")

    page.click("#replication-disable")
    with page.expect_response(lambda r: r.status == 403):
        page.click("#confirm-ok")
    banner = page.locator("#error")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Refused (403 forbidden)")
    expect(banner).to_contain_text("lacks the admin scope on the cluster")
    # Still there after the next polls (which succeed): the refusal does not flash by.
    updated = page.locator("#status").get_attribute("data-updated")
    expect(page.locator("#status")).not_to_have_attribute("data-updated", updated or "")
    expect(banner).to_contain_text("lacks the admin scope on the cluster")
    tab.shot("refused")
    expect(page.locator("#main")).to_be_visible()
    expect(page.locator("#replication")).to_have_text("enabled")
    assert gateway.request("GET", "/v1/admin/cluster").json()["replication_enabled"]
    assert READER not in page.locator("body").inner_text()
    # The only console errors are the browser's own note of the 403 answer.
    assert all("403" in error for error in tab.errors), tab.errors


def test_a_read_token_sees_a_bookies_storage_and_its_gc_pass_is_refused_clearly(
    tab: Page, gateway: Gateway, shared_cluster: StandardCluster
) -> None:
    """With a read token a bookie's storage view shows the report (a GET), and a dry run
    answers 403: the view says it was refused and which scope is missing, and both GC
    buttons are disabled from then on; no pass ran (the bookie's last pass is unchanged)."""
    bookie = shared_cluster.bookies[0].address
    before = gateway.request("GET", f"/v1/admin/bookies/{bookie}/storage").json()
    page = tab.log_in(gateway.url, READER)
    page.get_by_role("button", name=f"Storage of {bookie}").click()
    expect(page.locator("#h-detail")).to_have_text(f"Bookie {bookie}: storage")
    expect(page.locator("#storage-file span")).to_have_attribute(
        "data-bytes", re.compile(r"[1-9][0-9]*")
    )
    expect(page.locator("#storage-gc")).to_contain_text(f"grace {before['gc']['grace_s']:g} s")
    expect(page.locator("#gc-run")).to_be_disabled()
    with page.expect_response(lambda r: r.status == 403):
        page.click("#gc-dry-run")
    result = page.locator("#gc-result .problem")
    expect(result).to_contain_text("The dry run failed: Refused (403 forbidden)")
    expect(result).to_contain_text("lacks the admin scope on the cluster")
    expect(result).to_contain_text("garbage collection needs a token with the admin scope")
    expect(page.locator("#gc-dry-run")).to_be_disabled()
    expect(page.locator("#gc-run")).to_be_disabled()
    tab.shot("gc-refused")
    after = gateway.request("GET", f"/v1/admin/bookies/{bookie}/storage").json()
    assert after["last_pass"] == before["last_pass"]
    assert READER not in page.locator("body").inner_text()
    assert all("403" in error for error in tab.errors), tab.errors
