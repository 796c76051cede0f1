"""The JavaScript streaming example of docs/streaming.md ("From JavaScript"), run as written
against a real cluster (the standard cluster of tests/shared.py, a gateway of it with
an API token): in a real headless Chromium, the example's own target ("browsers: the
token here"), and with Node's standard ``WebSocket``. Only the gateway's address, the
ledger id and the token are swapped in. Each run must end with the example's "closed
1000" (its ``end`` message answered by a normal close), no error thrown, and the ledger
holding the example's 1,000 records in order, each once."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Page
from tests.integration.gateway_support import Gateway
from tests.shared import StandardCluster

API_TOKEN = "api-token-readme-js-5e81"
DOC = Path(__file__).resolve().parents[2] / "docs" / "streaming.md"
RECORDS = [b"r%d" % i for i in range(1000)]  # what the example sends
RUN_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def gateway(shared_cluster: StandardCluster) -> Gateway:
    """A gateway of the standard cluster (tests/shared.py) with an API token."""
    return shared_cluster.gateway(["--api-token", API_TOKEN], token=API_TOKEN)


def example(gateway: Gateway, ledger_id: int) -> str:
    """The JavaScript streaming example of docs/streaming.md with this gateway, ledger
    and token."""
    doc = DOC.read_text()
    section = doc[doc.index("## From JavaScript") :]
    code = section[section.index("```javascript\n") + len("```javascript\n") :]
    code = code[: code.index("```")]
    host = gateway.url.removeprefix("http://")
    for old, new in [
        ("ws://localhost:8080/v1/ledgers/7/stream", f"ws://{host}/v1/ledgers/{ledger_id}/stream"),
        ('{ token: "T" }', f'{{ token: "{API_TOKEN}" }}'),
    ]:
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    return code


def new_ledger(gateway: Gateway) -> int:
    return int(gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"])


def assert_all_records(gateway: Gateway, ledger_id: int) -> None:
    entries = gateway.read_all(ledger_id)
    assert [eid for eid, _ in entries] == list(range(len(RECORDS)))
    assert [data for _, data in entries] == RECORDS
    assert gateway.lac(ledger_id) == len(RECORDS) - 1


def test_in_chromium(browser: Any, tmp_path: Path, gateway: Gateway) -> None:
    ledger_id = new_ledger(gateway)
    tab = Page(browser, tmp_path)
    try:
        page = tab.page
        # A page of the gateway's own origin: from about:blank, Chromium's local network
        # access checks refuse a connection to a loopback address (as they would from any
        # public site's page to a gateway on a private network).
        page.route("**/favicon.ico", lambda route: route.fulfill(status=204))  # not an API's
        page.goto(f"{gateway.url}/health")
        with page.expect_console_message(
            lambda msg: msg.text.startswith("closed"), timeout=RUN_TIMEOUT_S * 1000
        ) as closed:
            page.evaluate(f"() => {{ {example(gateway, ledger_id)} }}")
        assert closed.value.text == "closed 1000"
        assert tab.errors == [], tab.errors
    finally:
        tab.close()
    assert_all_records(gateway, ledger_id)


def _node() -> list[str]:
    """Node with its standard ``WebSocket``: built in from Node 22, behind
    ``--experimental-websocket`` from 20.10 (the same implementation, undici's)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make node installs it)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+", version.stdout.strip())
    assert match is not None, version.stdout
    major, minor = int(match.group(1)), int(match.group(2))
    if major >= 22:
        return [node]
    if (major, minor) >= (20, 10):
        return [node, "--experimental-websocket"]
    pytest.skip(f"node {version.stdout.strip()} has no standard WebSocket")


def test_with_node(tmp_path: Path, gateway: Gateway) -> None:
    command = _node()
    ledger_id = new_ledger(gateway)
    script = tmp_path / "stream.mjs"
    script.write_text(example(gateway, ledger_id))
    done = subprocess.run(
        [*command, str(script)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "closed 1000", done.stdout + done.stderr
    assert_all_records(gateway, ledger_id)
