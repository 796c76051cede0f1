"""TLS across hosts (docs/security.md, "TLS" and "What is tested"): ZooKeeper, three
bookies requiring client certificates, a gateway, an auditor and a replication worker,
each on its own host with a certificate of the cluster's CA for its name and address.
From a host outside the cluster: a client holding the CA writes and reads; plain HTTP
gets no answer on any port; a client trusting another CA refuses the gateway, and a
certificate of another CA is refused by a bookie; a man in the middle on a host of its
own, answering for the gateway's name with a certificate it made, gets the handshake's
first message and nothing else: no token, no entry. One layout for the module."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.tls.certificates import CertificateAuthority
from tests.integration.gateway_support import Gateway
from tests.multihost.layout import HostService, Layout, start_layout
from tests.multihost.network import Host, HostTransport, Network

TOKEN_LIKE = b"Bearer mitm-would-steal-this-token-8e21"
PAYLOAD = b"an entry the man in the middle must not see"
CONNECT_S = 10.0


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.create("multi-host cluster CA")


@pytest.fixture(scope="module")
def layout(
    network: Network, ca: CertificateAuthority, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Layout]:
    started = start_layout(
        network,
        tmp_path_factory.mktemp("tls-hosts"),
        zookeepers=1,
        bookies=3,
        gateways=1,
        auditors=1,
        replicators=1,
        tls=ca,
    )
    try:
        yield started
    finally:
        started.stop()


def _trusting(ca: CertificateAuthority, tmp: Path) -> ssl.SSLContext:
    (tmp / "trust.pem").write_bytes(ca.certificate_pem())
    return ssl.create_default_context(cafile=tmp / "trust.pem")


def _connect(host: Host, address: str, port: int) -> socket.socket:
    sock = host.socket()
    sock.settimeout(CONNECT_S)
    sock.connect((address, port))
    return sock


def _services(layout: Layout) -> list[HostService]:
    return [*layout.gateways, *layout.bookies, *layout.auditors, *layout.replicators]


def test_a_client_outside_writes_and_reads_over_tls(
    layout: Layout, ca: CertificateAuthority, tmp_path: Path
) -> None:
    """Client → gateway → three bookies over mutual TLS: a ledger on every bookie takes
    entries and reads them back; the Admin API shows each bookie's disk, asked by the
    gateway from the bookies; every service answers /health over HTTPS."""
    context = _trusting(ca, tmp_path)
    gateway = Gateway(layout.gateways[0], transport=HostTransport(layout.client, context))
    try:
        lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
        payloads = [b"over tls %d" % i for i in range(10)]
        for payload in payloads:
            gateway.add(lid, payload)
        assert gateway.read_all(lid) == list(enumerate(payloads))
        bookies = gateway.request("GET", "/v1/admin/bookies").json()["bookies"]
        assert len(bookies) == 3 and all(b["free_bytes"] is not None for b in bookies)
    finally:
        gateway.close_client()
    with layout.client.http_client(timeout_s=10.0, ssl_context=context) as http:
        for proc in [layout.gateways[0], *layout.auditors, *layout.replicators]:
            assert http.get(f"{proc.url}/health").status_code == 200, proc.name


def test_plain_http_gets_no_answer_on_any_port(layout: Layout) -> None:
    """A plain HTTP request to any service from the client host gets no HTTP answer:
    the port speaks TLS only (at most a TLS alert comes back)."""
    for proc in _services(layout):
        with _connect(layout.client, proc.node.address, proc.port) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            received = b""
            try:
                while chunk := sock.recv(4096):
                    received += chunk
            except (ConnectionResetError, TimeoutError):
                pass
        assert b"HTTP/" not in received, (proc.name, received[:80])


def test_another_ca_is_refused_both_ways(
    layout: Layout, ca: CertificateAuthority, tmp_path: Path
) -> None:
    """A client trusting another CA refuses the gateway in the handshake; a client
    presenting a certificate of another CA (for the right name) is refused by a bookie,
    which requires certificates of the cluster's CA."""
    other = CertificateAuthority.create("another CA")
    gateway = layout.gateways[0]
    with (
        _connect(layout.client, gateway.node.address, gateway.port) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        _trusting(other, tmp_path).wrap_socket(raw, server_hostname=gateway.node.name)

    bookie = layout.bookies[0]
    member = ca.issue("client", ["client"], [layout.client.address])
    member.write(tmp_path / "member.pem", tmp_path / "member.key")
    impostor = other.issue("client", ["client"], [layout.client.address])
    impostor.write(tmp_path / "impostor.pem", tmp_path / "impostor.key")
    answers = {}
    for name in ("member", "impostor"):
        context = _trusting(ca, tmp_path)
        context.load_cert_chain(tmp_path / f"{name}.pem", tmp_path / f"{name}.key")
        answers[name] = _answer(layout.client, bookie, context)
    assert answers["member"].startswith(b"HTTP/1.1 200"), answers
    assert answers["impostor"] == b"", answers


def _answer(host: Host, proc: HostService, context: ssl.SSLContext) -> bytes:
    """What ``proc`` answers a ``GET /health`` from ``host`` over TLS with ``context``:
    nothing when it refuses (TLS 1.3 delivers a refused client certificate on the
    client's first read, after its side of the handshake seemed done)."""
    try:
        with (
            _connect(host, proc.node.address, proc.port) as raw,
            context.wrap_socket(raw, server_hostname=proc.node.name) as tls,
        ):
            tls.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            return tls.recv(4096)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return b""


def test_a_man_in_the_middle_gets_nothing(
    layout: Layout, ca: CertificateAuthority, tmp_path: Path
) -> None:
    """A host outside the cluster listens with a certificate it made for the gateway's
    name; a client that reaches it instead of the gateway (a poisoned name, a hijacked
    address) refuses in the handshake, so the only bytes the impostor receives are the
    handshake's first message: no token, no entry."""
    mitm = layout.network.add_host("mitm")
    own = CertificateAuthority.create("self-made")
    own.issue("gateway1", ["gateway1"], [mitm.address]).write(
        tmp_path / "mitm.pem", tmp_path / "mitm.key"
    )
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(tmp_path / "mitm.pem", tmp_path / "mitm.key")
    listener = mitm.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((mitm.address, 8443))
    listener.listen(4)
    listener.settimeout(CONNECT_S)
    received: list[bytes] = []
    handshakes: list[str] = []

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(CONNECT_S)
            first = conn.recv(65536, socket.MSG_PEEK)
            received.append(first)
            try:
                with serving.wrap_socket(conn, server_side=True) as tls:
                    handshakes.append("done")
                    while chunk := tls.recv(65536):
                        received.append(chunk)
            except (ssl.SSLError, OSError) as exc:
                handshakes.append(type(exc).__name__)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        with (
            _connect(layout.client, mitm.address, 8443) as raw,
            pytest.raises(ssl.SSLCertVerificationError),
            _trusting(ca, tmp_path).wrap_socket(raw, server_hostname="gateway1") as tls,
        ):
            tls.sendall(
                b"POST /v1/ledgers/1/entries HTTP/1.1\r\nHost: gateway1\r\nAuthorization: "
                + TOKEN_LIKE
                + b"\r\nContent-Length: %d\r\n\r\n" % len(PAYLOAD)
                + PAYLOAD
            )
        server.join(CONNECT_S)
    finally:
        listener.close()
    seen = b"".join(received)
    assert seen.startswith(b"\x16\x03")  # a TLS handshake record: the ClientHello
    assert handshakes and handshakes != ["done"], handshakes
    assert TOKEN_LIKE not in seen and PAYLOAD not in seen
    assert b"mitm-would-steal" not in seen and b"Authorization" not in seen
