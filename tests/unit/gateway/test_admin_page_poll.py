"""The admin page's staleness promise where it can be checked exactly: the page
(gateway/admin/static/admin.js) polls the Admin API at load and then every ``POLL_MS``,
which must be at most half the promised bound (docs: "<= 2 s staleness"), leaving a poll
a whole interval to fetch and redraw. The browser tests (tests/browser/test_admin_page.py)
check that the page follows changes, with a wait sized for a loaded machine, not for the
promise."""

from __future__ import annotations

import re
from pathlib import Path

import gateway.admin

STALENESS_MS = 2000  # what the page promises
ADMIN_JS = Path(gateway.admin.__file__).parent / "static" / "admin.js"


def test_the_page_polls_at_load_and_then_within_half_its_staleness_bound() -> None:
    source = ADMIN_JS.read_text(encoding="utf-8")
    (poll_ms,) = re.findall(r"^const POLL_MS = (\d+);$", source, re.MULTILINE)
    assert 0 < int(poll_ms) <= STALENESS_MS // 2, poll_ms
    assert f"<= {STALENESS_MS // 1000} s staleness" in source.splitlines()[0]
    # Polled every POLL_MS from load on (not a one-shot timer re-armed after each poll,
    # which would add the poll's own time to every interval), and once at load.
    assert re.findall(r"set(?:Interval|Timeout)\(poll\b[^)]*\)", source) == [
        "setInterval(poll, POLL_MS)"
    ]
    assert re.search(r"^\s*poll\(\)\.then\(", source, re.MULTILINE), "no poll at load"
