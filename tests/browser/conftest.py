"""A real headless Chromium (Debian's ``chromium``, driven by Playwright) per test module.

Playwright's own browser download cannot work here, so it launches
``/usr/bin/chromium`` (``make browser`` installs it) with the flags this machine needs;
each launch gets a fresh, empty user-data dir. Every page records its console errors
and uncaught exceptions (``page_errors``): the tests assert there are none."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1366, "height": 768}  # a laptop screen
# Every ``expect`` waits for its condition up to this long (Playwright's default is 5 s).
# The page follows the cluster by a poll a second; a headless Chromium beside a busy
# test run can take seconds more to fetch and redraw. The page's own promise (a poll at
# most a second apart) is checked exactly in tests/unit/gateway/test_admin_page_poll.py.
expect.set_options(timeout=10_000)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (make browser installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


class Page:
    """A tab with its console errors and page errors recorded."""

    def __init__(self, browser: Any, shots: Path) -> None:
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.shots = shots
        self.page.on(
            "console",
            lambda msg: self.errors.append(f"console: {msg.text}") if msg.type == "error" else None,
        )
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))

    def log_in(self, gateway_url: str, token: str) -> Any:
        """Open the gateway's admin page, give its token form ``token``, and wait for the
        page's main part; the Playwright page."""
        page = self.page
        page.goto(f"{gateway_url}/admin")
        expect(page.locator("#token-form")).to_be_visible()
        page.fill("#token", token)
        page.press("#token", "Enter")
        expect(page.locator("#main")).to_be_visible()
        return page

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Any, tmp_path: Path) -> Iterator[Page]:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    page = Page(browser, shots)
    try:
        yield page
    finally:
        page.close()
        keep = Path("/tmp/quire-admin-shots")
        if keep.exists():  # while developing: mkdir it to keep the screenshots
            for png in shots.glob("*.png"):
                shutil.copy(png, keep / png.name)
