"""The generated clients (openapi/clients/) against a gateway that serves HTTPS only,
its certificate signed by a test CA (docs/clients.md, "TLS"; docs/security.md, "TLS"):
given the CA bundle, the Python client (``verify_ssl``: an ``ssl.SSLContext``) and the
TypeScript client in Node (``NODE_EXTRA_CA_CERTS``) work over https; without it, a call
fails with a certificate verification error and no answer. One TLS cluster for the
module (three bookies and a gateway, every hop over TLS as in
tests/integration/test_tls.py)."""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from quire_client import AuthenticatedClient
from quire_client.api.ledgers import add_entries, create_ledger, read_entries
from quire_client.models import AddEntriesJsonBody, BatchAddResult, CreateLedger, EntryPage, Ledger

from services.tls.certificates import CertificateAuthority
from tests.integration.gateway_support import (
    loopback_tls,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.test_generated_clients import npm_test

BOOKIES = 3
API_TOKEN = "api-token-clients-tls-5e2b"
ADMIN_TOKEN = "admin-token-clients-tls-90aa"
ROOT = Path(__file__).resolve().parents[2]
TS_DIR = ROOT / "openapi" / "clients" / "typescript"
DOCS = ROOT / "docs" / "clients.md"
# Node's codes for a certificate chain it cannot verify (which one depends on whether
# the server sends its CA along).
NODE_VERIFY_FAILURES = frozenset(
    {
        "SELF_SIGNED_CERT_IN_CHAIN",
        "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
        "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
    }
)
# A call of the built TypeScript client (dist/), printing what came of it.
NODE_CALL = """
import { createQuireClient } from "./dist/src/index.js";
const { QUIRE_GATEWAY: baseUrl, QUIRE_TOKEN: token } = process.env;
const quire = createQuireClient({ baseUrl, token });
try {
  const { response } = await quire.GET("/v1/admin/cluster");
  console.log("answered", response.status);
} catch (err) {
  console.log("failed", err.cause?.code ?? err.cause?.message ?? String(err));
}
"""


@dataclass
class Env:
    url: str
    ca_file: Path


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("generated-clients-tls")
    _, files = loopback_tls(base, "generated clients test CA")
    with module_cluster(zookeeper, base, tls=files) as cluster:
        start_bookies(cluster, BOOKIES)
        args = ["--api-token", API_TOKEN, "--admin-token", ADMIN_TOKEN]
        gateway = start_gateway(cluster, args, token=ADMIN_TOKEN)
        wait_writable(gateway, BOOKIES)
        gateway.close_client()
        yield Env(gateway.url, files.ca)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def docs_example(language: str) -> str:
    """The code block of ``language`` in docs/clients.md's section "TLS"."""
    doc = DOCS.read_text()
    section = doc[doc.index("## TLS") :]
    section = section[: section.index("\n## ", 1)]
    fence = f"```{language}\n"
    code = section[section.index(fence) + len(fence) :]
    return code[: code.index("```")]


def test_python_client_with_the_ca_bundle(env: Env) -> None:
    """With ``verify_ssl`` a context trusting the CA, a ledger is made, written and read
    over https (docs/api.md, "Ledgers")."""
    assert env.url.startswith("https://")
    trusted = ssl.create_default_context(cafile=env.ca_file)
    with AuthenticatedClient(base_url=env.url, token=API_TOKEN, verify_ssl=trusted) as quire:
        body = CreateLedger(ensemble_size=3, write_quorum=2, ack_quorum=2)
        created = create_ledger.sync(client=quire, body=body)
        assert isinstance(created, Ledger), created
        added = add_entries.sync(
            created.ledger_id, client=quire, body=AddEntriesJsonBody(entries=[b64(b"over tls")])
        )
        assert isinstance(added, BatchAddResult)
        page = read_entries.sync(created.ledger_id, client=quire, from_=0, to=0)
        assert isinstance(page, EntryPage) and page.entries[0].data == b64(b"over tls")


def test_python_client_without_the_ca_fails_to_verify(env: Env) -> None:
    """Without the CA (the default: the system's bundle) or trusting another CA, the
    client refuses the gateway: a certificate verification error, no answer."""
    other = ssl.create_default_context()
    other.load_verify_locations(
        cadata=CertificateAuthority.create("other").certificate_pem().decode()
    )
    for verify in (True, other):
        with AuthenticatedClient(base_url=env.url, token=API_TOKEN, verify_ssl=verify) as quire:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                create_ledger.sync(client=quire, body=CreateLedger())


def test_docs_python_tls_example_runs(env: Env) -> None:
    """The Python example of docs/clients.md's "TLS", run as written against this
    gateway (its URL, token and CA file swapped in)."""
    code = docs_example("python")
    for old, new in [
        ('"https://gateway.internal:8080"', repr(env.url)),
        ('token=""', f"token={API_TOKEN!r}"),
        ('cafile="ca.pem"', f"cafile={str(env.ca_file)!r}"),
    ]:
        assert old in code, old
        code = code.replace(old, new)
    exec(compile(code, "docs/clients.md (TLS)", "exec"), {"print": lambda *a: None})


def node_environment(env: Env, ca: Path | None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k != "NODE_EXTRA_CA_CERTS"}
    environ.update(QUIRE_GATEWAY=env.url, QUIRE_TOKEN=ADMIN_TOKEN)
    if ca is not None:
        environ["NODE_EXTRA_CA_CERTS"] = str(ca)
    return environ


def test_typescript_client_with_node_extra_ca_certs(env: Env) -> None:
    """``npm test`` (tsc, then every test of the TypeScript client) passes over https with
    NODE_EXTRA_CA_CERTS naming the CA; the same client without it gets no answer: its
    fetch fails with Node's certificate verification error."""
    npm_test(node_environment(env, env.ca_file))

    node = shutil.which("node")
    assert node is not None
    results = {}
    for name, ca in [("with", env.ca_file), ("without", None)]:
        call = subprocess.run(
            [node, "--input-type=module", "-e", NODE_CALL],
            cwd=TS_DIR,
            env=node_environment(env, ca),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        results[name] = call.stdout.strip() or call.stderr
    assert results["with"] == "answered 200", results
    assert results["without"] in {f"failed {code}" for code in NODE_VERIFY_FAILURES}, results
