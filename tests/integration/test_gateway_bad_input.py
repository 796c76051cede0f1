"""Bad input on every Ledgers endpoint of a real gateway: a 4xx with the docs/api.md code and
a body of exactly ``{"error", "message"}``, never a 500, and nothing partially written
by a rejected request."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from services.limits import BATCH_ENTRIES_MAX, BODY_SIZE_MAX_BYTES, ENTRY_SIZE_MAX_BYTES
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    one_gateway,
)

ID_MAX = 2**63 - 1
BAD_IDS = ["abc", "-1", "1.5", "1e3", str(2**63), str(2**64), "1.0", "+1", "%201", "01", "1%20"]
JSON = "application/json"
RAW = "application/octet-stream"


@dataclass
class Env:
    gateway: Gateway
    open_id: int  # OPEN, entries 0..2, on this gateway
    closed_id: int  # CLOSED at entry 1
    missing_id: int  # never created


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with one_gateway(zookeeper, tmp_path_factory.mktemp("gateway-bad-input")) as (_, _, gateway):
        open_id = gateway.create()["ledger_id"]
        gateway.add_batch(open_id, [b"a", b"b", b"c"])
        closed_id = gateway.create()["ledger_id"]
        gateway.add_batch(closed_id, [b"x", b"y"])
        gateway.close(closed_id)
        yield Env(gateway, open_id, closed_id, ID_MAX)


def _ledger_paths(lid: str) -> list[tuple[str, str]]:
    return [
        ("GET", f"/v1/ledgers/{lid}"),
        ("DELETE", f"/v1/ledgers/{lid}"),
        ("POST", f"/v1/ledgers/{lid}/entries"),
        ("GET", f"/v1/ledgers/{lid}/entries"),
        ("GET", f"/v1/ledgers/{lid}/entries/0"),
        ("GET", f"/v1/ledgers/{lid}/lac"),
        ("POST", f"/v1/ledgers/{lid}/close"),
        ("POST", f"/v1/ledgers/{lid}/recover"),
    ]


BAD_ID_CASES = [case for bad in BAD_IDS for case in _ledger_paths(bad)] + [
    ("GET", f"/v1/ledgers/{{open}}/entries/{bad}") for bad in BAD_IDS
]


@pytest.mark.parametrize(("method", "path"), BAD_ID_CASES)
def test_bad_ids_are_400(env: Env, method: str, path: str) -> None:
    """Non-integer, negative and over 2^63-1 ledger or entry ids: 400 invalid_argument."""
    r = env.gateway.request(method, path.format(open=env.open_id), content=b"x")
    assert_error(r, 400, "invalid_argument")


@pytest.mark.parametrize("form", ["{}.0", "+{}", "%20{}", "{}%20", "0{}", "{}%00"])
def test_an_existing_ledger_has_one_url(env: Env, form: str) -> None:
    """Ids are canonical decimal integers: 1.0, +1, ' 1', '1 ' and 01 do not name ledger
    1 (or entry 1); they are 400 invalid_argument on every route."""
    g, lid = env.gateway, env.open_id
    assert g.request("GET", f"/v1/ledgers/{lid}").status_code == 200
    for method, path in _ledger_paths(form.format(lid)):
        assert_error(g.request(method, path, content=b"x"), 400, "invalid_argument")
    r = g.request("GET", f"/v1/ledgers/{lid}/entries/{form.format(1)}")
    assert_error(r, 400, "invalid_argument")
    assert g.lac(lid) >= 2  # nothing was added, closed or deleted
    assert g.metadata(lid)["state"] == "OPEN"


@pytest.mark.parametrize(("method", "path"), _ledger_paths("{missing}"))
def test_unknown_ledger_is_404(env: Env, method: str, path: str) -> None:
    """Every call on a ledger that does not exist: 404 ledger_not_found."""
    r = env.gateway.request(method, path.format(missing=env.missing_id), content=b"x")
    assert_error(r, 404, "ledger_not_found")


def test_entry_past_the_readable_end_is_404(env: Env) -> None:
    """A single entry past the LAC (open) or the last entry (closed): 404
    entry_not_found; a range is cut at that end instead."""
    g = env.gateway
    for path in (
        f"/v1/ledgers/{env.open_id}/entries/3",
        f"/v1/ledgers/{env.open_id}/entries/{ID_MAX}",
        f"/v1/ledgers/{env.closed_id}/entries/2",
    ):
        assert_error(g.request("GET", path), 404, "entry_not_found")
    assert [e["entry_id"] for e in g.page(env.open_id, **{"from": 1, "to": 99})["entries"]] == [
        1,
        2,
    ]
    for params in ({"from": 3}, {"from": 3, "to": 5}, {"from": ID_MAX}):
        page = g.page(env.open_id, **params)
        assert page["entries"] == [] and page["next"] is None
        assert page["last_add_confirmed"] == 2
    assert g.page(env.closed_id, **{"from": 2})["entries"] == []


QUERY_CASES = [
    ("GET", "/v1/ledgers/{open}/entries", {"from": 2, "to": 1}),
    ("GET", "/v1/ledgers/{open}/entries", {"from": -1}),
    ("GET", "/v1/ledgers/{open}/entries", {"to": -1}),
    ("GET", "/v1/ledgers/{open}/entries", {"from": "x"}),
    ("GET", "/v1/ledgers/{open}/entries", {"to": str(2**63)}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": "x"}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": -2}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": str(2**63)}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": 0, "wait_ms": -1}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": 0, "wait_ms": "soon"}),
    ("GET", "/v1/ledgers", {"limit": 0}),
    ("GET", "/v1/ledgers", {"limit": "x"}),
    ("GET", "/v1/ledgers", {"after": -2}),
    ("GET", "/v1/ledgers", {"after": str(2**63)}),
    # canonical decimal integers only
    ("GET", "/v1/ledgers/{open}/entries", {"from": "+1"}),
    ("GET", "/v1/ledgers/{open}/entries", {"from": "0", "to": "1.0"}),
    ("GET", "/v1/ledgers/{open}/entries", {"from": "01"}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": " 0"}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": "0", "wait_ms": "1e3"}),
    ("GET", "/v1/ledgers/{open}/lac", {"after": "0", "wait_ms": str(2**63)}),
    ("GET", "/v1/ledgers", {"limit": "+5"}),
    ("GET", "/v1/ledgers", {"after": "-01"}),
]


@pytest.mark.parametrize(("method", "path", "params"), QUERY_CASES)
def test_bad_query_parameters_are_400(env: Env, method: str, path: str, params: dict) -> None:
    """Bad query parameters, including from > to: 400 invalid_argument."""
    r = env.gateway.request(method, path.format(open=env.open_id), params=params)
    assert_error(r, 400, "invalid_argument")


CREATE_CASES = [
    # not E >= Qw >= Qa >= 1
    ({"ensemble_size": 2, "write_quorum": 3, "ack_quorum": 2}, 400, "invalid_argument"),
    ({"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 3}, 400, "invalid_argument"),
    ({"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 0}, 400, "invalid_argument"),
    ({"ensemble_size": 0, "write_quorum": 0, "ack_quorum": 0}, 400, "invalid_argument"),
    ({"ensemble_size": -1}, 400, "invalid_argument"),
    ({"write_quorum": 4}, 400, "invalid_argument"),  # E defaults to 3
    ({"ensemble_size": 2.5}, 400, "invalid_argument"),
    ({"ensemble_size": "3"}, 400, "invalid_argument"),
    ({"ensemble_size": True}, 400, "invalid_argument"),
    # 1.0 is the integer 1, as in JSON Schema (tests/integration/test_fuzz_findings.py)
    ({"ensemble_size": 1, "write_quorum": 1.5, "ack_quorum": 1}, 400, "invalid_argument"),
    ({"ensemble_size": True, "write_quorum": True, "ack_quorum": True}, 400, "invalid_argument"),
    ({"ensemble_size": None}, 400, "invalid_argument"),
    ({"ensemble_size": 2**70}, 400, "invalid_argument"),
    # more than the writable bookies
    ({"ensemble_size": 4, "write_quorum": 2, "ack_quorum": 2}, 503, "not_enough_bookies"),
    ({"ensemble_size": 64, "write_quorum": 1, "ack_quorum": 1}, 503, "not_enough_bookies"),
    # digest, password, metadata, unknown fields
    ({"digest": "md5"}, 400, "invalid_argument"),
    ({"digest": "CRC32C"}, 400, "invalid_argument"),
    ({"digest": 1}, 400, "invalid_argument"),
    ({"password": 7}, 400, "invalid_argument"),
    ({"password": ""}, 400, "invalid_argument"),
    ({"metadata": [1, 2]}, 400, "invalid_argument"),
    ({"metadata": "k=v"}, 400, "invalid_argument"),
    ({"metadata": {"big": "x" * (70 * 1024)}}, 400, "invalid_argument"),
    ({"ensemble": 3}, 400, "invalid_argument"),
    # metadata: a flat map of bounded strings (item 13)
    ({"metadata": {"k": {"k": "v"}}}, 400, "invalid_argument"),
    ({"metadata": {"k": 1}}, 400, "invalid_argument"),
    ({"metadata": {"k": None}}, 400, "invalid_argument"),
    ({"metadata": {"k": ["v", 1]}}, 400, "invalid_argument"),
    ({"metadata": {f"k{i}": "v" for i in range(65)}}, 400, "invalid_argument"),
    ({"metadata": {"k" * 257: "v"}}, 400, "invalid_argument"),
    ({"metadata": {"k": "v" * 4097}}, 400, "invalid_argument"),
    ({"metadata": {f"k{i}": "v" * 4096 for i in range(4)}}, 400, "invalid_argument"),
    # passwords: 1-256 printable ASCII characters (item 16); hmac needs one (item 4)
    ({"password": "пароль€"}, 400, "invalid_argument"),
    ({"password": "caf\u00e9"}, 400, "invalid_argument"),
    ({"password": "a\x01b"}, 400, "invalid_argument"),
    ({"password": "tab\tbed"}, 400, "invalid_argument"),
    ({"password": "x" * 257}, 400, "invalid_argument"),
    ({"password": " padded "}, 400, "invalid_argument"),
    ({"digest": "hmac-sha256"}, 400, "invalid_argument"),
]


@pytest.mark.parametrize(("body", "status", "code"), CREATE_CASES)
def test_bad_create_is_refused_and_creates_nothing(
    env: Env, body: dict, status: int, code: str
) -> None:
    """Create with bad sizes, digest, password or metadata: 400; more E than writable
    bookies: 503 not_enough_bookies; in every case no ledger appears."""
    before = env.gateway.request("GET", "/v1/ledgers").json()["ledgers"]
    assert_error(env.gateway.request("POST", "/v1/ledgers", json=body), status, code)
    assert env.gateway.request("GET", "/v1/ledgers").json()["ledgers"] == before


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{", JSON),
        (b"not json", JSON),
        (b"\xff\xfe", JSON),
        (b"[]", JSON),
        (b'"text"', JSON),
        (b"3", JSON),
        (b"null", JSON),
        (b"{}x", JSON),
    ],
)
def test_create_needs_a_json_object(env: Env, body: bytes, content_type: str) -> None:
    """Malformed or non-object JSON on create: 400 invalid_argument."""
    r = env.gateway.request(
        "POST", "/v1/ledgers", content=body, headers={"Content-Type": content_type}
    )
    assert_error(r, 400, "invalid_argument")


def _deep(depth: int, inner: bytes = b'"v"') -> bytes:
    return b'{"x": ' * depth + inner + b"}" * depth


HOSTILE_CREATE_BODIES = [
    b'{"metadata": ' + _deep(500) + b"}",  # was 201, then GET/close/recover 500 for ever
    b'{"metadata": ' + _deep(1_000) + b"}",  # was 500 (recursion limit)
    b'{"metadata": ' + _deep(100_000) + b"}",
    b"[" * 1_000 + b"]" * 1_000,
    b'{"metadata": {"k": NaN}}',  # was 500, and the ledger was created
    b'{"metadata": {"k": Infinity}}',
    b'{"ensemble_size": NaN}',
    b'{"metadata": {"k": "\\ud800"}}',  # a lone surrogate: was 500, ledger created
    b'{"metadata": {"\\udfff": "v"}}',
    b'{"password": "\\ud800"}',
    b'{"\\ud800": 1}',
]


@pytest.mark.parametrize("body", HOSTILE_CREATE_BODIES, ids=range(len(HOSTILE_CREATE_BODIES)))
def test_hostile_create_bodies_are_400_and_create_nothing(env: Env, body: bytes) -> None:
    """Deeply nested JSON (metadata or not), NaN / Infinity and lone surrogates on create:
    400 invalid_argument, no ledger appears, and the gateway stays healthy."""
    g = env.gateway
    before = g.request("GET", "/v1/ledgers").json()["ledgers"]
    r = g.request("POST", "/v1/ledgers", content=body, headers={"Content-Type": JSON})
    assert_error(r, 400, "invalid_argument")
    assert g.request("GET", "/v1/ledgers").json()["ledgers"] == before
    assert g.request("GET", "/health").status_code == 200


def test_metadata_and_password_at_their_bounds_work(env: Env) -> None:
    """A password of 256 printable ASCII characters (spaces inside) and metadata at its
    bounds are accepted; the ledger then answers GET, add, read, close and recover."""
    g = env.gateway
    password = ("pass word~!" * 24)[:256]
    metadata = {"k" * 256: "v" * 4096, "ключ": "значение €", **{f"k{i}": "" for i in range(62)}}
    created = g.create(password=password, digest="hmac-sha256", metadata=metadata)
    lid = created["ledger_id"]
    assert created["metadata"] == metadata
    assert g.metadata(lid)["metadata"] == metadata
    assert g.add(lid, b"one", password=password)["entry_id"] == 0
    assert g.entry(lid, 0, password=password) == b"one"
    assert g.close(lid, password=password)["last_entry_id"] == 0
    assert g.recover(lid, password=password)["state"] == "CLOSED"
    r = g.request("DELETE", f"/v1/ledgers/{lid}", headers={"X-Ledger-Password": password})
    assert r.status_code == 204, r.text


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


ADD_CASES = [
    (b"{", JSON, 400, "invalid_argument"),
    (b"not json", JSON, 400, "invalid_argument"),
    (b"[]", JSON, 400, "invalid_argument"),
    (b'["AAAA"]', JSON, 400, "invalid_argument"),
    (b'"AAAA"', JSON, 400, "invalid_argument"),
    (b"{}", JSON, 400, "invalid_argument"),
    (b'{"entry": ["AAAA"]}', JSON, 400, "invalid_argument"),
    (b'{"entries": "AAAA"}', JSON, 400, "invalid_argument"),
    (b'{"entries": null}', JSON, 400, "invalid_argument"),
    (b'{"entries": []}', JSON, 400, "invalid_argument"),
    (b'{"entries": ["@@@@"]}', JSON, 400, "invalid_argument"),
    (b'{"entries": ["AAA"]}', JSON, 400, "invalid_argument"),
    (b'{"entries": ["AAAA", "not base64!"]}', JSON, 400, "invalid_argument"),
    (b'{"entries": ["AAAA", 5]}', JSON, 400, "invalid_argument"),
    (b'{"entries": [null]}', JSON, 400, "invalid_argument"),
    (b'{"entries": [["AAAA"]]}', JSON, 400, "invalid_argument"),
    (b'{"entries": ["AAAA"]}', "application/json; charset=utf-8", None, None),
]


@pytest.mark.parametrize(("body", "content_type", "status", "code"), ADD_CASES)
def test_bad_add_is_refused_and_writes_nothing(
    env: Env, body: bytes, content_type: str, status: int | None, code: str | None
) -> None:
    """A malformed JSON add (not an object, no entries, empty batch, bad base64, a bad
    item anywhere): 400 and the LAC is unchanged; JSON with parameters is still JSON."""
    g = env.gateway
    before = g.lac(env.open_id)
    r = g.request(
        "POST", f"/v1/ledgers/{env.open_id}/entries", content=body,
        headers={"Content-Type": content_type},
    )  # fmt: skip
    if status is None:
        assert r.status_code == 200, r.text
        assert r.json()["first_entry_id"] == before + 1
        return
    assert_error(r, status, code)
    assert g.lac(env.open_id) == before


HOSTILE_ADD_BODIES = [
    b'{"entries": [' + b"[" * 1_000 + b"]" * 1_000 + b"]}",  # was 500 (recursion limit)
    b'{"entries": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
    b"[" * 5_000,
    b'{"entries": ["AAAA"], "x": ' + _deep(40) + b"}",
    b'{"entries": ["AAAA", NaN]}',
    b'{"entries": ["AAAA"], "n": -Infinity}',
    b'{"entries": ["\\ud800"]}',
]


@pytest.mark.parametrize("body", HOSTILE_ADD_BODIES, ids=range(len(HOSTILE_ADD_BODIES)))
def test_hostile_add_bodies_are_400_and_write_nothing(env: Env, body: bytes) -> None:
    """Deeply nested JSON, NaN / Infinity and lone surrogates on a batch add: 400
    invalid_argument (not 500) and the LAC is unchanged."""
    g = env.gateway
    before = g.lac(env.open_id)
    r = g.request(
        "POST", f"/v1/ledgers/{env.open_id}/entries", content=body,
        headers={"Content-Type": JSON},
    )  # fmt: skip
    assert_error(r, 400, "invalid_argument")
    assert g.lac(env.open_id) == before


@pytest.fixture(scope="module")
def size_ledger(env: Env) -> int:
    """A ledger of its own for the size limits (big entries stay out of the others)."""
    return env.gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]


def test_size_limits(env: Env, size_ledger: int) -> None:
    """An entry of exactly 5 MiB is accepted (raw and JSON); one byte more is 413, as is a
    batch of 10,001 entries and a body over 64 MiB; a rejected request writes nothing."""
    g, lid = env.gateway, size_ledger
    path = f"/v1/ledgers/{lid}/entries"
    exact = bytes(range(256)) * (ENTRY_SIZE_MAX_BYTES // 256)
    assert len(exact) == ENTRY_SIZE_MAX_BYTES
    assert g.add(lid, exact)["entry_id"] == 0
    assert g.add_batch(lid, [exact])["first_entry_id"] == 1

    over = exact + b"!"
    r = g.request("POST", path, content=over, headers={"Content-Type": RAW})
    assert_error(r, 413, "payload_too_large")
    r = g.request("POST", path, json={"entries": [_b64(b"ok"), _b64(over)]})
    assert_error(r, 413, "payload_too_large")
    r = g.request("POST", path, json={"entries": [_b64(b"")] * (BATCH_ENTRIES_MAX + 1)})
    assert_error(r, 413, "payload_too_large")
    huge = b'{"entries": ["' + b"A" * BODY_SIZE_MAX_BYTES + b'"]}'
    try:
        r = g.request("POST", path, content=huge, headers={"Content-Type": JSON})
    except httpx.TransportError:
        # The gateway may answer 413 before reading the body and close the connection
        # while the client is still sending; read it again with a declared length only.
        r = _declared_only(g.url, path, len(huge))
    assert_error(r, 413, "payload_too_large")
    assert g.lac(lid) == 1

    batch = g.add_batch(lid, [b"z"] * BATCH_ENTRIES_MAX)  # exactly 10,000 is fine
    assert (batch["first_entry_id"], batch["last_entry_id"]) == (2, 1 + BATCH_ENTRIES_MAX)
    assert g.entry(lid, 0) == exact
    assert g.entry(lid, 1) == exact


def _declared_only(url: str, path: str, length: int) -> httpx.Response:
    """Send only the head of a request declaring ``length`` bytes of body."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: {JSON}\r\n"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return httpx.Response(status, content=body, headers={"Content-Type": JSON})


ROUTE_CASES = [
    ("GET", "/nope", 404, "not_found"),
    ("GET", "/v1", 404, "not_found"),
    ("GET", "/v1/nope", 404, "not_found"),
    ("POST", "/v1/ledger", 404, "not_found"),
    ("GET", "/v1/ledgers/{open}/nope", 404, "not_found"),
    ("GET", "/v1/ledgers/{open}/entries/0/more", 404, "not_found"),
    ("GET", "/v1/ledgers/", 404, "not_found"),  # a trailing slash: not a redirect
    ("POST", "/v1/ledgers/", 404, "not_found"),
    ("GET", "/v1/ledgers/{open}/", 404, "not_found"),
    ("PUT", "/v1/ledgers", 405, "method_not_allowed"),
    ("DELETE", "/v1/ledgers", 405, "method_not_allowed"),
    ("PATCH", "/v1/ledgers/{open}", 405, "method_not_allowed"),
    ("PUT", "/v1/ledgers/{open}", 405, "method_not_allowed"),
    ("GET", "/v1/ledgers/{open}/close", 405, "method_not_allowed"),
    ("GET", "/v1/ledgers/{open}/recover", 405, "method_not_allowed"),
    ("DELETE", "/v1/ledgers/{open}/entries", 405, "method_not_allowed"),
    ("POST", "/v1/ledgers/{open}/entries/0", 405, "method_not_allowed"),
    ("DELETE", "/v1/ledgers/{open}/entries/0", 405, "method_not_allowed"),
    ("POST", "/v1/ledgers/{open}/lac", 405, "method_not_allowed"),
    ("POST", "/health", 405, "method_not_allowed"),
]


@pytest.mark.parametrize(("method", "path", "status", "code"), ROUTE_CASES)
def test_unknown_routes_and_wrong_methods(
    env: Env, method: str, path: str, status: int, code: str
) -> None:
    """Unknown routes: 404 not_found; a known route with another method: 405
    method_not_allowed; both with an {"error", "message"} body."""
    r = env.gateway.request(method, path.format(open=env.open_id), content=b"x")
    assert_error(r, status, code)


def test_rejected_requests_left_the_ledgers_intact(env: Env) -> None:
    """After the whole matrix the ledgers still hold exactly what was written, and the
    gateway never answered 500 (it logged no unexpected error)."""
    g = env.gateway
    assert [d for _, d in g.read_all(env.closed_id)] == [b"x", b"y"]
    assert g.metadata(env.closed_id)["last_entry_id"] == 1
    entries = g.read_all(env.open_id)
    assert [d for _, d in entries[:3]] == [b"a", b"b", b"c"]
    log = g.proc.log_path.read_text(errors="replace")
    assert "unexpected error" not in log


def test_chunked_bodies_are_bounded_too(env: Env, size_ledger: int) -> None:
    """A body sent chunked (no Content-Length) is one raw entry like any other, and is
    refused with 413 once it passes 5 MiB for a raw entry; nothing is written then."""
    g, lid = env.gateway, size_ledger
    path = f"/v1/ledgers/{lid}/entries"

    def chunks(total: int, size: int = 256 * 1024) -> Iterator[bytes]:
        sent = 0
        while sent < total:
            n = min(size, total - sent)
            sent += n
            yield b"c" * n

    before = g.lac(lid)
    r = g.request("POST", path, content=chunks(1000, 100), headers={"Content-Type": RAW})
    assert r.status_code == 200, r.text
    assert r.json()["entry_id"] == before + 1
    assert g.entry(lid, before + 1) == b"c" * 1000
    try:
        r = g.request(
            "POST", path, content=chunks(ENTRY_SIZE_MAX_BYTES + 1), headers={"Content-Type": RAW}
        )
    except httpx.TransportError:
        pytest.skip("the gateway closed the connection before the client finished sending")
    assert_error(r, 413, "payload_too_large")
    assert g.lac(lid) == before + 1
