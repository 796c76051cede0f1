"""Certificates, the CA and the token file rotated while `quire bench` loads the
cluster (docs/security.md, "TLS": rotation without downtime): every service serves
HTTPS, the bookies require client certificates, the gateway takes scoped tokens from a
file.
While the bench adds over keep-alive connections, the services move to certificates of
a new CA (the bundle already trusted both, as an operator distributes it first), are
sent SIGHUP, and the token file is rewritten (one token out, one in); the bench ends with no failed
operation and every reload took effect. One cluster for the module."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509

from gateway.http.scopes import token_digest
from services.cluster.processes import ServiceProcess
from services.tls.certificates import CertificateAuthority
from services.tls.contexts import TlsFiles
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    log_text,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.test_gateway_scoped_tokens import replace_file

QUIRE = Path(sys.executable).parent / "quire"
BOOKIES = 3
SECRET = "rotation-cluster-secret-4be1"
BENCH_TOKEN = "bench-token-77c2a9d10e"
OLD_TOKEN = "retired-token-0f3b5c8e21"
NEW_TOKEN = "incoming-token-d94a61b7c3"
BENCH_S = 8.0


def token_file(*tokens: tuple[str, str]) -> str:
    """Admin tokens over every ledger and log, one ``[[token]]`` table per (name, token)."""
    return "".join(
        f'[[token]]\nname = "{name}"\nsha256 = "{token_digest(token)}"\nscope = "admin"\n'
        'ledgers = "*"\nlogs = "*"\n\n'
        for name, token in tokens
    )


@dataclass
class Env:
    cluster: Cluster
    files: TlsFiles
    tokens: Path
    bookies: list[ServiceProcess]
    gateway: Gateway


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("rotation")
    old_ca = CertificateAuthority.create("rotation CA, old")
    new_ca = CertificateAuthority.create("rotation CA, new")
    # The bundle every service and the bench trust: both CAs, before any certificate
    # of the new one is served.
    (base / "ca.pem").write_bytes(old_ca.certificate_pem() + new_ca.certificate_pem())
    old_ca.issue("services", ["localhost"], ["127.0.0.1"]).write(
        base / "cert.pem", base / "key.pem"
    )
    new_ca.issue("services", ["localhost"], ["127.0.0.1"]).write(
        base / "next-cert.pem", base / "next-key.pem"
    )
    files = TlsFiles(base / "cert.pem", base / "key.pem", base / "ca.pem")
    tokens = base / "tokens.toml"
    tokens.write_text(token_file(("bench", BENCH_TOKEN), ("retired", OLD_TOKEN)))
    with module_cluster(zookeeper, base, SECRET, tls=files) as cluster:
        bookies = start_bookies(cluster, BOOKIES, ["--tls-client-auth"])
        gateway = start_gateway(cluster, ["--token-file", str(tokens)], token=BENCH_TOKEN)
        wait_writable(gateway, BOOKIES)
        try:
            yield Env(cluster, files, tokens, bookies, gateway)
        finally:
            gateway.close_client()


def _served_issuer(env: Env) -> str:
    """The issuer of the certificate the gateway serves a new connection."""
    context = env.gateway.proc.client_context()
    assert context is not None
    with (
        socket.create_connection(("127.0.0.1", env.gateway.proc.port), timeout=10.0) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).issuer.rfc4514_string()


def _status(env: Env, token: str) -> int:
    return env.gateway.request(
        "GET", "/v1/ledgers", headers={"Authorization": f"Bearer {token}"}
    ).status_code


def test_certificates_ca_and_tokens_rotate_under_quire_bench(env: Env, tmp_path: Path) -> None:
    """`quire bench` over HTTPS with the bundle: meanwhile every service moves to a
    certificate of the new CA on SIGHUP and the token file drops one token and gains
    another; the bench reports no error, new connections get the new CA's certificate,
    the dropped token is 401 and the new one works."""
    assert "old" in _served_issuer(env)
    bench = subprocess.Popen(
        [
            str(QUIRE), "bench", "--gateway", env.gateway.url, "--ca-file", str(env.files.ca),
            "--token", BENCH_TOKEN, "--ledgers", "2", "--concurrency", "4", "--warmup", "0.5",
            "--duration", str(BENCH_S),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")},
    )  # fmt: skip
    try:

        def adding() -> bool:
            # The bench's ledgers exist once it loads: then rotate under load.
            listed = env.gateway.request("GET", "/v1/ledgers").json()
            return bool(listed.get("ledgers"))

        wait_for(adding, 30.0, "the bench adding")

        base = env.files.cert.parent
        replace_file(env.files.key, (base / "next-key.pem").read_text())
        replace_file(env.files.cert, (base / "next-cert.pem").read_text())
        for proc in [*env.bookies, env.gateway.proc]:
            proc.signal(signal.SIGHUP)
        wait_for(lambda: "new" in _served_issuer(env), 10.0, "the new CA's certificate served")

        replace_file(env.tokens, token_file(("bench", BENCH_TOKEN), ("incoming", NEW_TOKEN)))
        wait_for(lambda: _status(env, NEW_TOKEN) == 200, 10.0, "the new token accepted")
        assert _status(env, OLD_TOKEN) == 401

        out, err = bench.communicate(timeout=BENCH_S + 60.0)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["errors"] == 0, summary
    assert summary["adds_per_s"] > 0, summary
    text = log_text(env.cluster)
    assert "not reloaded" not in text
    assert text.count("TLS certificate, key and CA bundle reloaded") >= BOOKIES + 1
    assert BENCH_TOKEN not in text and NEW_TOKEN not in text and OLD_TOKEN not in text
