"""The HTTP server of every service under hostile input (issue 7, items 11 and 17): slow
and stuck sockets, connection floods from one address, oversized heads, malformed
requests, and the method details (405 with Allow, HEAD of GET routes). Real gateway
and bookie processes on 127.0.0.1; every socket is bounded in number and time and
closed."""

from __future__ import annotations

import json
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from services.cluster.processes import ServiceProcess
from tests.harness import wait_for
from tests.integration.gateway_support import Gateway, assert_error
from tests.shared import StandardCluster

SLOW_HEAD = b"GET /health HTTP/1.1\r\nHost: slow\r\n"  # and never the blank line
FLOOD_SOCKETS = 4500  # more than uvicorn's old concurrency limit (4,096)
FLOOD_ADDRESSES = 10
FLOOD_CAP = 500  # per client address on the flood gateway
STRICT_CAP = 8  # per client address on the strict gateway
STRICT_TIMEOUT_MS = 1500


@dataclass
class Env:
    flood: Gateway  # default timeouts, a cap of FLOOD_CAP per address
    strict: Gateway  # short head and body time-outs, a cap of STRICT_CAP per address
    bookie: ServiceProcess
    ledger_id: int  # an open ledger written through `flood`


@pytest.fixture(scope="module")
def env(shared_cluster: StandardCluster) -> Env:
    """Two gateways of the standard cluster (tests/shared.py) started for this module's
    flags (no other test asks for them), and one of its bookies."""
    flood = shared_cluster.gateway(["--connections-per-client-max", str(FLOOD_CAP)])
    strict = shared_cluster.gateway(
        [
            "--connections-per-client-max",
            str(STRICT_CAP),
            "--header-read-timeout-ms",
            str(STRICT_TIMEOUT_MS),
            "--body-read-timeout-ms",
            str(STRICT_TIMEOUT_MS),
        ]
    )
    ledger_id = flood.create()["ledger_id"]
    flood.add(ledger_id, b"first")
    return Env(flood, strict, shared_cluster.bookies[0], ledger_id)


# ------------------------------------------------------------------ raw HTTP


@contextmanager
def connection(port: int, source: str = "127.0.0.1", timeout_s: float = 10.0):  # type: ignore[no-untyped-def]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", port))
        yield sock
    finally:
        sock.close()


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one answer that closes the connection (or carries a
    Content-Length); the body is empty for HEAD."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return status, headers, body


def read_to_end(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def exchange(port: int, request: bytes, source: str = "127.0.0.1") -> tuple[int, dict, bytes]:
    """Send ``request`` (ignoring a reset while sending) and read the whole answer."""
    with connection(port, source) as sock:
        try:
            sock.sendall(request)
        except OSError:
            pass
        status, headers, body = read_answer(sock)
        if "content-length" in headers:
            while len(body) < int(headers["content-length"]):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                body += chunk
        else:
            body += read_to_end(sock)
        return status, headers, body


def assert_json_error(answer: tuple[int, dict, bytes], status: int, code: str) -> None:
    got_status, headers, body = answer
    assert got_status == status, answer
    assert headers["content-type"].startswith("application/json"), headers
    doc = json.loads(body)
    assert set(doc) == {"error", "message"} and doc["error"] == code, doc


def still_open(sock: socket.socket) -> bool:
    """True while the server has neither answered nor closed ``sock``."""
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
    return False


# ------------------------------------------------------------------ item 11


def test_slow_sockets_do_not_block_health_or_add(env: Env) -> None:
    """Thousands of sockets stuck in their request head (more than uvicorn's old limit
    of 4,096 connections) stay open, and meanwhile /health and an add are served."""
    port = env.flood.proc.port
    socks: list[socket.socket] = []
    try:
        for i in range(FLOOD_SOCKETS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.settimeout(10.0)
            sock.bind((f"127.0.0.{2 + i % FLOOD_ADDRESSES}", 0))
            sock.connect(("127.0.0.1", port))
            sock.sendall(SLOW_HEAD)
        started = time.monotonic()
        health = env.flood.request("GET", "/health")
        assert health.status_code == 200, health.text
        env.flood.add(env.ledger_id, b"during the flood")
        assert time.monotonic() - started < 5.0
        # The flood was really held open (none answered or refused).
        assert sum(still_open(s) for s in socks) == FLOOD_SOCKETS
    finally:
        for sock in socks:
            sock.close()


def test_head_that_never_completes_is_closed(env: Env) -> None:
    """A head that stops half-way gets a JSON 408 and the connection is closed after the
    header time-out; a connection that sends nothing is closed quietly."""
    port = env.strict.proc.port
    with connection(port) as sock:
        started = time.monotonic()
        sock.sendall(SLOW_HEAD)
        status, headers, body = read_answer(sock)
        body += read_to_end(sock)
        elapsed = time.monotonic() - started
    assert_json_error((status, headers, body), 408, "invalid_argument")
    assert elapsed < STRICT_TIMEOUT_MS / 1000 + 3.0, elapsed
    with connection(port) as sock:
        started = time.monotonic()
        assert read_to_end(sock) == b""
        assert time.monotonic() - started < STRICT_TIMEOUT_MS / 1000 + 3.0


def test_body_that_never_completes_is_cut(env: Env) -> None:
    """An add that declares 100 bytes and sends 10 gets a JSON 408 after the body
    time-out instead of holding its connection for ever."""
    path = f"/v1/ledgers/{env.ledger_id}/entries"
    request = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + b"0123456789"
    started = time.monotonic()
    answer = exchange(env.strict.proc.port, request)
    assert_json_error(answer, 408, "invalid_argument")
    assert time.monotonic() - started < STRICT_TIMEOUT_MS / 1000 + 3.0


def test_too_many_connections_from_one_address(env: Env) -> None:
    """Over the per-client cap, one more connection from that address gets the JSON 503
    `unavailable` at once, while another address is served; once they close, the
    address is served again."""
    port = env.strict.proc.port
    lid = env.flood.create()["ledger_id"]
    long_poll = f"GET /v1/ledgers/{lid}/lac?after=5&wait_ms=20000 HTTP/1.1\r\nHost: x\r\n\r\n"
    held: list[socket.socket] = []
    try:
        for _ in range(STRICT_CAP):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.settimeout(10.0)
            sock.bind(("127.0.0.20", 0))
            sock.connect(("127.0.0.1", port))
            sock.sendall(long_poll.encode())  # held by the app, not by a timer
        health = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        answer = exchange(port, health, source="127.0.0.20")
        assert_json_error(answer, 503, "unavailable")
        assert "127.0.0.20" in json.loads(answer[2])["message"]
        assert exchange(port, health, source="127.0.0.21")[0] == 200
    finally:
        for sock in held:
            sock.close()
    wait_for(
        lambda: exchange(port, health, source="127.0.0.20")[0] == 200,
        10.0,
        "the address served again",
    )


# ------------------------------------------------------------------ item 17


def test_oversized_head_is_431(env: Env) -> None:
    """A 1 MiB header or 10,000 headers: JSON 431 `invalid_argument`, never a 500."""
    port = env.flood.proc.port
    big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    assert_json_error(exchange(port, big), 431, "invalid_argument")
    many = b"GET /health HTTP/1.1\r\n" + b"X-H: v\r\n" * 10_000 + b"\r\n"
    assert_json_error(exchange(port, many), 431, "invalid_argument")
    # A head just within the bounds is served.
    fine = b"GET /health HTTP/1.1\r\n" + b"X-H: v\r\n" * 90 + b"Connection: close\r\n\r\n"
    assert exchange(port, fine)[0] == 200


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET /health HTTP/9.9\r\n\r\n",
    b"GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n",
    b"GET /health HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
    b"POST /v1/ledgers HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /he\x01alth HTTP/1.1\r\n\r\n",
]


@pytest.mark.parametrize("request_bytes", MALFORMED)
def test_malformed_http_is_json_400(env: Env, request_bytes: bytes) -> None:
    """Malformed HTTP (request line, header, length, chunking): JSON 400
    `invalid_argument`, from the gateway and from a bookie."""
    assert_json_error(exchange(env.flood.proc.port, request_bytes), 400, "invalid_argument")
    assert_json_error(exchange(env.bookie.port, request_bytes), 400, "invalid_argument")


@pytest.mark.parametrize(
    ("service", "method", "path", "allow"),
    [
        ("gateway", "DELETE", "/v1/ledgers", "GET, HEAD, POST"),
        ("gateway", "GET", "/v1/ledgers/{lid}/close", "POST"),
        ("gateway", "POST", "/health", "GET, HEAD"),
        ("gateway", "HEAD", "/v1/ledgers/{lid}/close", "POST"),
        ("bookie", "GET", "/v1/entries", "POST"),
        ("bookie", "DELETE", "/v1/info", "GET, HEAD"),
    ],
)
def test_405_carries_allow(env: Env, service: str, method: str, path: str, allow: str) -> None:
    """A 405 names every method the path accepts in `Allow` (HEAD wherever GET)."""
    port = env.flood.proc.port if service == "gateway" else env.bookie.port
    request = f"{method} {path.format(lid=env.ledger_id)} HTTP/1.1\r\nHost: x\r\n"
    status, headers, body = exchange(port, (request + "Connection: close\r\n\r\n").encode())
    assert status == 405, (status, body)
    assert headers["allow"] == allow
    if method != "HEAD":
        assert json.loads(body)["error"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("service", "path"),
    [
        ("gateway", "/health"),
        ("gateway", "/v1/ledgers/{lid}"),
        ("gateway", "/v1/ledgers/{lid}/entries/0"),
        ("gateway", "/metrics"),
        ("bookie", "/health"),
        ("bookie", "/v1/info"),
    ],
)
def test_head_answers_like_get_without_body(env: Env, service: str, path: str) -> None:
    """HEAD of a GET route: the GET's status and headers, no body (not 405). Some bodies
    change as the shared cluster works (a bookie's /v1/info counts its adds): the length
    is compared with GETs just before and just after the HEAD that agree."""
    port = env.flood.proc.port if service == "gateway" else env.bookie.port
    path = path.format(lid=env.ledger_id)
    get_request = f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    head_request = f"HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()

    def steady() -> tuple[tuple[int, dict, bytes], tuple[int, dict, bytes]] | None:
        before, head, after = (exchange(port, r) for r in (get_request, head_request, get_request))
        lengths = {before[1].get("content-length"), after[1].get("content-length")}
        return (before, head) if len(lengths) == 1 else None

    answers = wait_for(steady, 20, "a GET, HEAD, GET with the same body length")
    assert isinstance(answers, tuple)
    get, head = answers
    assert get[0] == head[0] == 200, (get, head)
    assert head[2] == b""
    assert head[1]["content-type"] == get[1]["content-type"]
    if "content-length" in get[1] and path != "/metrics":
        assert head[1]["content-length"] == get[1]["content-length"]


def test_head_of_unknown_route_is_404(env: Env) -> None:
    """HEAD of a path no route has is 404 (without a body), as GET is."""
    status, _, body = exchange(
        env.flood.proc.port, b"HEAD /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert (status, body) == (404, b"")
    r = env.flood.request("GET", "/nope")
    assert_error(r, 404, "not_found")


_UPGRADE_HEALTH = (
    b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
)


def test_upgrade_request_is_served_as_plain_http(env: Env) -> None:
    """A WebSocket upgrade request to a service that speaks no WebSocket (a bookie) is
    answered as plain HTTP, not left hanging outside every timer."""
    with connection(env.bookie.port) as sock:
        sock.sendall(_UPGRADE_HEALTH)
        status, _, _ = read_answer(sock)
    assert status == 200


def test_upgrade_to_a_path_without_websocket_gets_a_json_error(env: Env) -> None:
    """The gateway speaks WebSocket (streaming appends) but an upgrade to a path that is
    no WebSocket gets an HTTP answer at once: 404 with a docs/api.md error body."""
    with connection(env.flood.proc.port) as sock:
        sock.sendall(_UPGRADE_HEALTH)
        status, headers, body = read_answer(sock)
    assert status == 404
    assert headers["content-type"] == "application/json"
    assert json.loads(body[: int(headers["content-length"])])["error"] == "not_found"
