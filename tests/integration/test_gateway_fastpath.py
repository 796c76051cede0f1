"""The add fast path keeps the routes' contract to the letter: the same requests sent to
a gateway with it (the default) and to one with ``--no-fast-path`` (FastAPI's routes)
on one cluster get the same status, the same keys and the same error codes and
messages (ledger ids aside), for adds and log appends, good and bad."""

from __future__ import annotations

import base64
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from services.limits import ENTRY_SIZE_MAX_BYTES
from tests.integration.gateway_support import (
    Gateway,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

TOKEN = "fast-path-token-3e1"


@dataclass
class Pair:
    fast: Gateway
    routed: Gateway


@pytest.fixture(scope="module")
def pair(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("fastpath")) as cluster:
        start_bookies(cluster, 3)
        fast = start_gateway(cluster, ["--api-token", TOKEN], token=TOKEN)
        routed = start_gateway(cluster, ["--api-token", TOKEN, "--no-fast-path"], token=TOKEN)
        wait_writable(fast, 3)
        wait_writable(routed, 3)
        try:
            yield Pair(fast, routed)
        finally:
            fast.close_client()
            routed.close_client()


# Answer headers whose values differ between any two answers.
_VARYING_HEADERS = {"date", "x-request-id", "content-length"}


def _shape(r: httpx.Response, ids: dict[str, str]) -> tuple[int, Any, Any]:
    """What must be equal on both: the status, the body, with this gateway's own ledger
    ids and log positions replaced by their role, and the headers (by name, and their
    values where they do not vary from answer to answer)."""
    headers = sorted(
        (name, "" if name in _VARYING_HEADERS else value) for name, value in r.headers.items()
    )
    text = r.text
    for value, role in ids.items():
        text = re.sub(rf"\b{value}\b", role, text)
    if not text:
        return r.status_code, None, headers
    if r.headers.get("content-type", "").startswith("application/json"):
        body = r.json() if not ids else httpx.Response(200, text=text).json()
        if r.status_code == 200:
            return r.status_code, sorted(body), headers  # keys: values differ by ledger id
        return r.status_code, body, headers
    return r.status_code, text, headers


def both(pair: Pair, make: Any) -> tuple[tuple[int, Any, Any], tuple[int, Any, Any]]:
    """``make(gateway) -> (response, ids)`` on each gateway; their shapes."""
    return tuple(_shape(*make(g)) for g in (pair.fast, pair.routed))  # type: ignore[return-value]


def _ledger(g: Gateway, password: str | None = None) -> int:
    body: dict[str, Any] = {"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2}
    if password:
        body["password"] = password
    return int(g.create(**body)["ledger_id"])


ADDS = [
    ("raw", {}, b"one entry"),
    ("json", {"Content-Type": "application/json"}, b'{"entries": ["aGVsbG8=", "d29ybGQ="]}'),
    ("json+charset", {"Content-Type": "application/json; charset=utf-8"}, b'{"entries": ["eA=="]}'),
    ("not json", {"Content-Type": "application/json"}, b"{nope"),
    ("empty batch", {"Content-Type": "application/json"}, b'{"entries": []}'),
    ("bad base64", {"Content-Type": "application/json"}, b'{"entries": ["!!"]}'),
    ("not a list", {"Content-Type": "application/json"}, b'{"entries": "eA=="}'),
    ("nan", {"Content-Type": "application/json"}, b'{"entries": [NaN]}'),
    ("empty raw", {}, b""),
    ("too big", {}, b"x" * (ENTRY_SIZE_MAX_BYTES + 1)),
]


@pytest.mark.parametrize(("case", "headers", "body"), ADDS, ids=[a[0] for a in ADDS])
def test_ledger_adds_answer_the_same(pair: Pair, case: str, headers: dict, body: bytes) -> None:  # type: ignore[type-arg]
    def make(g: Gateway) -> tuple[httpx.Response, dict[str, str]]:
        lid = _ledger(g)
        return g.request("POST", f"/v1/ledgers/{lid}/entries", content=body, headers=headers), {
            str(lid): "L"
        }

    fast, routed = both(pair, make)
    assert fast == routed


def test_ledger_add_errors_answer_the_same(pair: Pair) -> None:
    cases = [
        "/v1/ledgers/987654321/entries",  # no such ledger
        "/v1/ledgers/0012/entries",  # not canonical
        "/v1/ledgers/9223372036854775808/entries",  # over the id range
    ]
    for path in cases:
        fast, routed = both(pair, lambda g: (g.request("POST", path, content=b"x"), {}))  # noqa: B023
        assert fast == routed and fast[0] in (400, 404), (path, fast, routed)

    anonymous = [Gateway(g.proc) for g in (pair.fast, pair.routed)]
    try:
        shapes = [
            _shape(g.request("POST", "/v1/ledgers/1/entries", content=b"x"), {}) for g in anonymous
        ]
        assert shapes[0] == shapes[1] and shapes[0][0] == 401
    finally:
        for g in anonymous:
            g.close_client()


def test_password_ledgers_answer_the_same(pair: Pair) -> None:
    for password in (None, "wrong", "right"):

        def make(g: Gateway) -> tuple[httpx.Response, dict[str, str]]:
            lid = _ledger(g, "right")
            headers = {"X-Ledger-Password": password} if password else {}  # noqa: B023
            r = g.request("POST", f"/v1/ledgers/{lid}/entries", content=b"x", headers=headers)
            return r, {str(lid): "L"}

        fast, routed = both(pair, make)
        assert fast == routed and fast[0] == (200 if password == "right" else 401), fast


def test_adds_to_a_closed_ledger_and_the_values_answer_the_same(pair: Pair) -> None:
    def make(g: Gateway) -> tuple[httpx.Response, dict[str, str]]:
        lid = _ledger(g)
        first = g.request("POST", f"/v1/ledgers/{lid}/entries", content=b"a")
        assert first.json() == {"entry_id": 0, "last_add_confirmed": 0}
        batch = g.add_batch(lid, [b"b", b"c"])
        assert batch == {"first_entry_id": 1, "last_entry_id": 2, "last_add_confirmed": 2}
        assert g.read_all(lid) == [(0, b"a"), (1, b"b"), (2, b"c")]
        g.close(lid)
        return g.request("POST", f"/v1/ledgers/{lid}/entries", content=b"d"), {str(lid): "L"}

    fast, routed = both(pair, make)
    assert fast == routed and fast[0] == 409, fast


def test_log_appends_answer_the_same(pair: Pair) -> None:
    b64 = base64.b64encode(b"rec").decode()
    for g, name in ((pair.fast, "fp-log"), (pair.routed, "fp-log-routed")):
        assert g.request("PUT", f"/v1/logs/{name}").status_code == 201
        assert g.request("POST", f"/v1/logs/{name}/writer").status_code == 200

    def shapes(suffix: str, headers: dict[str, Any], body: bytes) -> list[tuple[int, Any, Any]]:
        out = []
        for g, name in ((pair.fast, "fp-log"), (pair.routed, "fp-log-routed")):
            r = g.request("POST", f"/v1/logs/{name}{suffix}", content=body, headers=headers)
            out.append(_shape(r, {name: "N"}))
        return out

    json_headers = {"Content-Type": "application/json"}
    cases = [
        ("/records", {}, b"raw record"),
        ("/records", json_headers, f'{{"entries": ["{b64}", "{b64}"]}}'.encode()),
        ("/records", {"Idempotency-Key": "k-1"}, b"keyed"),
        ("/records", {"Idempotency-Key": "k-1"}, b"keyed"),  # the retry: same positions
        ("/records", {"Idempotency-Key": "k-1"}, b"another body"),  # 409 reused
        ("/records", {"Idempotency-Key": "k" * 129}, b"x"),
        ("/records", {"Idempotency-Key": "é".encode("latin-1")}, b"x"),
        ("/records", json_headers, b'{"entries": []}'),
        ("/records", {}, b"x" * (ENTRY_SIZE_MAX_BYTES + 1)),
    ]
    for suffix, headers, body in cases:
        fast, routed = shapes(suffix, headers, body)
        assert fast == routed, (headers, fast, routed)
    keyed = [
        g.request(
            "POST", f"/v1/logs/{n}/records", content=b"keyed", headers={"Idempotency-Key": "k-1"}
        )
        for g, n in ((pair.fast, "fp-log"), (pair.routed, "fp-log-routed"))
    ]
    assert keyed[0].status_code == 200 and "position" in keyed[0].json()

    for g in (pair.fast, pair.routed):  # the other's log: forwarded there; no such log
        other = "fp-log-routed" if g is pair.fast else "fp-log"
        forwarded = g.request("POST", f"/v1/logs/{other}/records", content=b"x")
        assert forwarded.status_code == 200 and "position" in forwarded.json(), forwarded.text
    fast, routed = both(
        pair, lambda g: (g.request("POST", "/v1/logs/nope/records", content=b"x"), {})
    )
    assert fast == routed and fast[0] == 404
    fast, routed = both(
        pair, lambda g: (g.request("POST", "/v1/logs/bad%20name/records", content=b"x"), {})
    )
    assert fast == routed and fast[0] == 400


def _raw_exchange(g: Gateway, requests: list[bytes], answers: int) -> list[tuple[bytes, bytes]]:
    """Send ``requests`` in one write on one connection (pipelined); read ``answers``
    answers back as (head, body)."""
    host, port = g.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"".join(requests))
        buffer, out = b"", []
        while len(out) < answers:
            while b"\r\n\r\n" not in buffer:
                chunk = sock.recv(65536)
                assert chunk, f"connection closed after {len(out)} answers"
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(buffer) < length:
                chunk = sock.recv(65536)
                assert chunk, "connection closed mid-body"
                buffer += chunk
            out.append((head, buffer[:length]))
            buffer = buffer[length:]
    return out


def test_pipelined_chunked_and_closing_adds_answer_the_same_byte_for_byte(pair: Pair) -> None:
    """On one connection, in one write: a plain add (on the fast gateway the protocol's
    lane serves it), then a chunked add, a plain add and one with ``Connection: close``
    queued behind it (served by the ASGI paths); then, alone on a new connection, a
    plain add with ``Connection: close`` (the lane's again). Both gateways answer each
    in order with the same status line, the same header names in the same order, and
    the same bodies (entry ids 0-4 of a new ledger)."""
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()

    def plain(lid: int, body: bytes, extra: bytes = b"") -> bytes:
        return (
            b"POST /v1/ledgers/%d/entries HTTP/1.1\r\nHost: x\r\n%s%sContent-Length: %d\r\n\r\n"
            % (lid, auth, extra, len(body))
            + body
        )

    def run(g: Gateway) -> list[tuple[bytes, bytes]]:
        lid = _ledger(g)
        chunked = (
            b"POST /v1/ledgers/%d/entries HTTP/1.1\r\nHost: x\r\n%s"
            b"Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n" % (lid, auth)
        )
        answers = _raw_exchange(
            g,
            [
                plain(lid, b"first"),
                chunked,
                plain(lid, b"third"),
                plain(lid, b"fourth", b"Connection: close\r\n"),
            ],
            4,
        )
        answers += _raw_exchange(g, [plain(lid, b"fifth", b"Connection: close\r\n")], 1)
        assert g.read_all(lid) == [
            (0, b"first"),
            (1, b"abc"),
            (2, b"third"),
            (3, b"fourth"),
            (4, b"fifth"),
        ]
        return answers

    def shape(answer: tuple[bytes, bytes]) -> tuple[bytes, list[bytes], bytes]:
        head, body = answer
        lines = head.split(b"\r\n")
        return lines[0], [line.split(b":", 1)[0].lower() for line in lines[1:]], body

    fast, routed = run(pair.fast), run(pair.routed)
    assert [shape(a) for a in fast] == [shape(a) for a in routed]
    assert [a[1] for a in fast] == [
        b'{"entry_id":%d,"last_add_confirmed":%d}' % (i, i) for i in range(5)
    ]
    assert shape(fast[3])[1][-1] == shape(fast[4])[1][-1] == b"connection"
