"""The clients generated from openapi/gateway.json (openapi/clients/) against a live
cluster (ZooKeeper, three bookies, a gateway with an API token and an admin token):
the Python package ``quire_client`` (openapi-python-client) called here, and the
TypeScript client (openapi-typescript + openapi-fetch) run by ``npm test`` with Node's
own test runner. Both: a ledger (raw and batch adds, a page, NDJSON, close), a
password-protected ledger, a log (writer, idempotent append, read, tail), the admin
cluster object, and an error answer as a typed error with its code."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from quire_client import AuthenticatedClient
from quire_client.api.admin import get_cluster, list_gateways
from quire_client.api.ledgers import (
    add_entries,
    close_ledger,
    create_ledger,
    get_ledger,
    read_entries,
)
from quire_client.api.logs import append_records, create_log, read_records, take_writer
from quire_client.models import (
    AddEntriesJsonBody,
    AddResult,
    AppendRecordsJsonBody,
    BatchAddResult,
    BatchAppended,
    Cluster,
    CreateLedger,
    EntryPage,
    Error,
    ErrorError,
    GatewayList,
    Ledger,
    RecordPage,
)
from quire_client.types import UNSET, File

from services.cluster.processes import ServiceProcess
from tests.integration.gateway_support import (
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

API_TOKEN = "api-token-clients-7f3a"
ADMIN_TOKEN = "admin-token-clients-21c9"
TS_DIR = Path(__file__).resolve().parents[2] / "openapi" / "clients" / "typescript"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Env:
    gateway: ServiceProcess
    api: AuthenticatedClient  # API token
    admin: AuthenticatedClient  # admin token


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("generated-clients")
    with module_cluster(zookeeper, base) as cluster:
        start_bookies(cluster, 3)
        args = ["--api-token", API_TOKEN, "--admin-token", ADMIN_TOKEN]
        gateway = start_gateway(cluster, args, token=ADMIN_TOKEN)
        wait_writable(gateway, 3)
        gateway.close_client()
        api = AuthenticatedClient(base_url=gateway.url, token=API_TOKEN, timeout=None)
        admin = AuthenticatedClient(base_url=gateway.url, token=ADMIN_TOKEN, timeout=None)
        with api, admin:
            yield Env(gateway.proc, api, admin)


def new_ledger(env: Env, password: str | None = None) -> int:
    body = CreateLedger(ensemble_size=3, write_quorum=2, ack_quorum=2)
    if password is not None:
        body.password = password
    created = create_ledger.sync(client=env.api, body=body)
    assert isinstance(created, Ledger), created
    assert created.state == "OPEN"
    return created.ledger_id


# ------------------------------------------------------------------- Python


def test_python_client_ledger_round_trip(env: Env) -> None:
    ledger_id = new_ledger(env)
    one = add_entries.sync(ledger_id, client=env.api, body=File(payload=b"raw entry"))
    assert isinstance(one, AddResult) and one.entry_id == 0
    batch = add_entries.sync(
        ledger_id, client=env.api, body=AddEntriesJsonBody(entries=[b64(b"two"), b64(b"three")])
    )
    assert isinstance(batch, BatchAddResult)
    assert (batch.first_entry_id, batch.last_entry_id, batch.last_add_confirmed) == (1, 2, 2)

    page = read_entries.sync(ledger_id, client=env.api, from_=0, to=2)
    assert isinstance(page, EntryPage)
    assert [(e.entry_id, base64.b64decode(e.data)) for e in page.entries] == [
        (0, b"raw entry"),
        (1, b"two"),
        (2, b"three"),
    ]
    # NDJSON is read through the client's own httpx client: no model to parse into.
    r = env.api.get_httpx_client().get(
        f"/v1/ledgers/{ledger_id}/entries",
        params={"from": 1, "to": 2},
        headers={"Accept": "application/x-ndjson"},
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert [(d["entry_id"], base64.b64decode(d["data"])) for d in lines] == [
        (1, b"two"),
        (2, b"three"),
    ]

    closed = close_ledger.sync(ledger_id, client=env.api)
    assert isinstance(closed, Ledger) and closed.state == "CLOSED" and closed.last_entry_id == 2


def test_python_client_password_protected_ledger(env: Env) -> None:
    ledger_id = new_ledger(env, password="s3cret")
    body = AddEntriesJsonBody(entries=[b64(b"guarded")])
    added = add_entries.sync(ledger_id, client=env.api, body=body, x_ledger_password="s3cret")
    assert isinstance(added, BatchAddResult)
    page = read_entries.sync(ledger_id, client=env.api, from_=0, to=0, x_ledger_password="s3cret")
    assert isinstance(page, EntryPage) and base64.b64decode(page.entries[0].data) == b"guarded"
    refused = read_entries.sync_detailed(ledger_id, client=env.api, from_=0, to=0)
    assert refused.status_code == 401
    assert isinstance(refused.parsed, Error) and refused.parsed.error == ErrorError.UNAUTHORIZED


def test_python_client_log(env: Env) -> None:
    name = "py-client-log"
    created = create_log.sync(name, client=env.api)
    assert created is not None and created.name == name  # type: ignore[union-attr]
    writer = take_writer.sync(name, client=env.api)
    assert writer is not None and writer.epoch == 1  # type: ignore[union-attr]
    body = AppendRecordsJsonBody(entries=[b64(b"alpha"), b64(b"beta")])
    first = append_records.sync(name, client=env.api, body=body, idempotency_key="py-1")
    again = append_records.sync(name, client=env.api, body=body, idempotency_key="py-1")
    assert isinstance(first, BatchAppended) and isinstance(again, BatchAppended)
    assert again.to_dict() == first.to_dict()  # the retry answers the same positions

    page = read_records.sync(name, client=env.api, limit=10)
    assert isinstance(page, RecordPage) and page.caught_up is True
    assert [base64.b64decode(r.data) for r in page.records] == [b"alpha", b"beta"]

    tailed: list[RecordPage] = []

    def tail() -> None:
        found = read_records.sync(name, client=env.api, from_=page.next_, wait_ms=20_000)
        assert isinstance(found, RecordPage)
        tailed.append(found)

    reader = threading.Thread(target=tail)
    reader.start()
    append_records.sync(name, client=env.api, body=File(payload=b"gamma"))
    reader.join(30)
    assert not reader.is_alive() and len(tailed) == 1
    assert [base64.b64decode(r.data) for r in tailed[0].records] == [b"gamma"]

    # Issue 40's additions: a conditional append, a read from a time, the gateways.
    stale = append_records.sync_detailed(
        name, client=env.api, body=File(payload=b"delta"), expected_last_position="none"
    )
    assert stale.status_code == 412 and isinstance(stale.parsed, Error)
    assert stale.parsed.error == ErrorError.POSITION_MISMATCH
    gamma = tailed[0].records[0]
    whole = read_records.sync(name, client=env.api)
    since = read_records.sync(name, client=env.api, from_time=str(gamma.time))
    assert isinstance(whole, RecordPage) and isinstance(since, RecordPage)
    assert gamma.time is not None
    at_or_after = [r.to_dict() for r in whole.records if (r.time or 0) >= gamma.time]
    assert [r.to_dict() for r in since.records] == at_or_after and at_or_after[
        -1
    ] == gamma.to_dict()
    gateways = list_gateways.sync(client=env.admin)
    assert isinstance(gateways, GatewayList) and len(gateways.gateways) == 1


def test_python_client_admin_cluster_and_token(env: Env) -> None:
    cluster = get_cluster.sync(client=env.admin)
    assert isinstance(cluster, Cluster) and cluster.bookies.writable == 3
    refused = get_cluster.sync_detailed(client=env.api)  # the API token is not enough
    assert refused.status_code == 401 and isinstance(refused.parsed, Error)


def test_python_client_error_is_typed_with_its_code(env: Env) -> None:
    missing = get_ledger.sync_detailed(2**53, client=env.api)
    assert missing.status_code == 404
    error = missing.parsed
    assert isinstance(error, Error), error  # the one typed error of every answer
    assert error.error == ErrorError.LEDGER_NOT_FOUND and error.error.value == "ledger_not_found"
    assert str(2**53) in error.message


# ------------------------------------------------------------------- TypeScript


def test_typescript_client_with_node_test(env: Env) -> None:
    """``npm test`` compiles the client and its test with tsc and runs them with
    ``node --test`` against this gateway: every test passes."""
    npm_test(dict(os.environ, QUIRE_GATEWAY=env.gateway.url, QUIRE_TOKEN=ADMIN_TOKEN))


def npm_test(environ: dict[str, str]) -> None:
    """``npm test`` of the TypeScript client with ``environ``: every one of its tests
    passes."""
    npm = shutil.which("npm")
    assert npm is not None, "npm is missing: run 'make setup'"
    assert (TS_DIR / "node_modules" / ".bin" / "tsc").exists(), "run 'make setup' (npm ci)"
    done = subprocess.run(
        [npm, "test", "--silent"],
        cwd=TS_DIR,
        env=environ,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "# pass 5" in output and "# fail 0" in output, output


def test_docs_python_example_runs(env: Env) -> None:
    """The "From Python" example of docs/clients.md, run as written against this gateway
    (its URL and token swapped in): it must not go stale as the client is regenerated."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "clients.md").read_text()
    section = doc[doc.index("## From Python") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    assert 'base_url="http://localhost:8080", token=""' in code
    code = code.replace(
        'base_url="http://localhost:8080", token=""',
        f'base_url="{env.gateway.url}", token="{API_TOKEN}"',
    ).replace('"orders"', '"readme-orders"')
    exec(compile(code, "docs/clients.md (From Python)", "exec"), {"print": lambda *a: None})


def test_docs_streaming_python_example_runs(env: Env) -> None:
    """The Python streaming example of docs/streaming.md (websockets), run as written
    against this gateway's log: every record it sends is in the log afterwards, in order,
    once."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text()
    section = doc[doc.index("## From Python") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    host = env.gateway.url.removeprefix("http://")
    for old, new in [
        ("ws://localhost:8080/v1/logs/orders/stream", f"ws://{host}/v1/logs/readme-stream/stream"),
        ('"Bearer T"', f'"Bearer {API_TOKEN}"'),
        ("range(10_000)", "range(500)"),
    ]:
        assert old in code, old
        code = code.replace(old, new)
    assert create_log.sync("readme-stream", client=env.api) is not None
    assert take_writer.sync("readme-stream", client=env.api) is not None
    exec(compile(code, "docs/streaming.md (From Python)", "exec"), {})
    got: list[bytes] = []
    start: str | None = None
    while True:
        page = read_records.sync("readme-stream", client=env.api, from_=start or UNSET, limit=1000)
        assert isinstance(page, RecordPage)
        got += [base64.b64decode(r.data) for r in page.records]
        if page.caught_up:
            break
        start = page.next_
    assert got == [b"order-%d" % i for i in range(500)]
