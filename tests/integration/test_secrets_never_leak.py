"""No secret leaves a service (docs/security.md, "What is tested"): a cluster holding
every kind of secret there is (the cluster secret, scoped tokens, ZooKeeper digest
credentials, TLS keys, ledger passwords), driven through calls that succeed and calls
that fail (a wrong token, a wrong password, a forbidden scope, bad input, a stream, a
SIGHUP reload, a full audit), and then every log line of every process,
every answer body, every `/metrics` and every `/openapi.json` is searched for each
secret, raw and in the encodings a leak would take (base64, hex, URL-encoded). The
services run at log level debug, where the most is written. One cluster for the
module."""

from __future__ import annotations

import base64
import signal
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from gateway.http.scopes import token_digest
from services.cluster.processes import ServiceProcess
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    log_text,
    loopback_tls,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.stream_support import Stream

BOOKIES = 3
CLUSTER_SECRET = "leak-scan-cluster-secret-6f0a2c"
ADMIN_TOKEN = "leak-scan-admin-token-b81e47"
WRITER_TOKEN = "leak-scan-writer-token-2d93c5"
UNKNOWN_TOKEN = "leak-scan-unknown-token-a7f310"
ZK_PASSWORD = "leak-scan-zk-password-54bd19"
LEDGER_PASSWORD = "leak-scan-ledger-pass-0e6c88"
WRONG_PASSWORD = "leak-scan-wrong-pass-93a1fb"
DEBUG = ["--log-level", "debug"]


def _tokens() -> str:
    rows = (
        ("admin", ADMIN_TOKEN, "admin", 'ledgers = "*"\nlogs = "*"'),
        ("writer", WRITER_TOKEN, "write", 'logs = ["leak-*"]'),
    )
    return "".join(
        f'[[token]]\nname = "{name}"\nsha256 = "{token_digest(token)}"\nscope = "{scope}"\n'
        f"{cover}\n\n"
        for name, token, scope, cover in rows
    )


@dataclass
class Env:
    cluster: Cluster
    gateway: Gateway
    bookies: list[ServiceProcess]
    others: list[ServiceProcess]
    key_pem: bytes
    tokens: Path
    bodies: list[bytes] = field(default_factory=list)

    def call(self, method: str, path: str, token: str | None, **kw) -> httpx.Response:  # type: ignore[no-untyped-def]
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        r = self.gateway.request(method, path, headers=headers, **kw)
        self.bodies.append(r.content)
        return r


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("leaks")
    _, files = loopback_tls(base, "leak scan CA")
    auth = base / "zk-auth"
    auth.write_text(f"quire-leak-scan:{ZK_PASSWORD}\n")
    auth.chmod(0o600)
    tokens = base / "tokens.toml"
    tokens.write_text(_tokens())
    with module_cluster(zookeeper, base, CLUSTER_SECRET, tls=files, zk_auth_file=auth) as cluster:
        bookies = start_bookies(cluster, BOOKIES, [*DEBUG, "--tls-client-auth"])
        gateway = start_gateway(cluster, [*DEBUG, "--token-file", str(tokens)], token=ADMIN_TOKEN)
        others = [
            cluster.start("auditor", [*DEBUG, "--lost-bookie-delay", "1"], wait=False),
            cluster.start(
                "replicator", [*DEBUG, "--marks-poll-interval", "1", "--open-ledger-grace", "1"],
                wait=False,
            ),
        ]  # fmt: skip
        for proc in others:
            proc.wait_healthy(30.0)
        wait_writable(gateway, BOOKIES)
        try:
            yield Env(cluster, gateway, bookies, others, files.key.read_bytes(), tokens)
        finally:
            gateway.close_client()


def _forms(secret: bytes) -> list[bytes]:
    """A secret as a leak could write it."""
    return [
        secret,
        base64.b64encode(secret),
        base64.urlsafe_b64encode(secret).rstrip(b"="),
        secret.hex().encode(),
        urllib.parse.quote(secret.decode(), safe="").encode(),
    ]


def _secrets(env: Env) -> dict[str, list[bytes]]:
    key_lines = [
        line.encode()
        for line in env.key_pem.decode().splitlines()
        if line and not line.startswith("-----") and len(line) >= 16
    ]
    named = {
        "cluster secret": CLUSTER_SECRET,
        "admin token": ADMIN_TOKEN,
        "writer token": WRITER_TOKEN,
        "unknown token": UNKNOWN_TOKEN,
        "ZooKeeper password": ZK_PASSWORD,
        "ledger password": LEDGER_PASSWORD,
        "wrong password": WRONG_PASSWORD,
    }
    found = {name: _forms(value.encode()) for name, value in named.items()}
    found["TLS key"] = key_lines
    return found


def _drive(env: Env) -> None:
    """Successes and failures of every kind, each answer body kept."""
    gw = env.gateway
    created = env.call("POST", "/v1/ledgers", ADMIN_TOKEN, json={
        "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2, "password": LEDGER_PASSWORD,
    })  # fmt: skip
    assert created.status_code == 201, created.text
    lid = created.json()["ledger_id"]
    pw = {"X-Ledger-Password": LEDGER_PASSWORD}
    for i in range(5):
        r = env.call("POST", f"/v1/ledgers/{lid}/entries", ADMIN_TOKEN, content=b"e%d" % i,
                     headers=pw)  # fmt: skip
        assert r.status_code == 200, r.text
    stream = Stream.open(
        gw.url, f"/v1/ledgers/{lid}/stream", token=ADMIN_TOKEN, password=LEDGER_PASSWORD,
        ssl_context=gw.proc.client_context(),
    )  # fmt: skip
    try:
        assert stream.send_all([b"streamed"]), stream.error
        assert stream.end() == 1000
    finally:
        stream.close()
    wrong = {"X-Ledger-Password": WRONG_PASSWORD}
    assert env.call("GET", f"/v1/ledgers/{lid}/entries", ADMIN_TOKEN, headers=wrong
                    ).status_code == 401  # fmt: skip
    assert env.call("GET", f"/v1/ledgers/{lid}/entries", ADMIN_TOKEN, headers=pw).status_code == 200
    assert env.call("GET", "/v1/ledgers", UNKNOWN_TOKEN).status_code == 401
    assert env.call("POST", "/v1/ledgers", WRITER_TOKEN, json={}).status_code == 403
    assert env.call("GET", "/v1/admin/cluster", WRITER_TOKEN).status_code == 403
    assert env.call("POST", "/v1/ledgers", ADMIN_TOKEN, content=b"{not json").status_code == 400
    assert env.call("PUT", "/v1/logs/leak-orders", WRITER_TOKEN).status_code in (200, 201)
    assert env.call("POST", "/v1/logs/leak-orders/writer", WRITER_TOKEN).status_code == 200
    r = env.call("POST", "/v1/logs/leak-orders/records", WRITER_TOKEN, content=b"one")
    assert r.status_code == 200, r.text
    assert env.call("POST", "/v1/logs/billing/records", WRITER_TOKEN, content=b"x"
                    ).status_code == 403  # fmt: skip

    # A bookie asked with a wrong cluster secret, and with the right one.
    context = gw.proc.client_context()
    bookie = env.bookies[0]
    for secret in ("not-the-secret", CLUSTER_SECRET):
        r = httpx.get(f"{bookie.url}/v1/info", headers={"X-Cluster-Secret": secret},
                      verify=context or True)  # fmt: skip
        env.bodies.append(r.content)

    # Reloads: the token file and the TLS files on SIGHUP.
    env.tokens.write_text(_tokens())
    gw.proc.signal(signal.SIGHUP)
    wait_for(lambda: "reloaded" in log_text(env.cluster), 10.0, "a reload logged")

    assert env.call("POST", f"/v1/ledgers/{lid}/close", ADMIN_TOKEN, headers=pw).status_code == 200
    # A full audit asked through the gateway: the auditor reads every ledger's metadata.
    assert env.call("POST", "/v1/admin/audit", ADMIN_TOKEN).status_code == 202


def test_no_secret_in_any_log_body_metric_or_document(env: Env) -> None:
    _drive(env)
    context = env.gateway.proc.client_context() or True
    services = [env.gateway.proc, *env.bookies, *env.others]
    for proc in services:
        for path in ("/metrics", "/openapi.json"):
            r = httpx.get(f"{proc.url}{path}", verify=context, timeout=10.0)
            assert r.status_code == 200, (proc.name, path, r.status_code)
            env.bodies.append(r.content)
    logs = {
        proc.name: Path(proc.log_path).read_bytes()
        for proc in env.cluster.processes
        if Path(proc.log_path).exists()
    }
    assert len(logs) >= BOOKIES + 3
    assert sum(len(text) for text in logs.values()) > 10_000  # debug logs were written
    leaks = [
        f"{name} in {where}"
        for name, forms in _secrets(env).items()
        for where, text in [*logs.items(), *((f"body {i}", b) for i, b in enumerate(env.bodies))]
        if any(form in text for form in forms)
    ]
    assert leaks == []
