"""Bad input on every endpoint of a real bookie: a 4xx with a docs/api.md-style error, nothing
stored, never a 500."""

from __future__ import annotations

import socket

import pytest

from services.cluster.processes import poll_client
from services.limits import BATCH_ENTRIES_MAX, STORED_ENTRY_SIZE_MAX_BYTES
from services.wire import digest, framing
from services.wire.framing import HEADER, FramedRecord
from tests.integration.bookie_support import Bookie, sealed

BIG = str(2**63)
GOOD = framing.encode([sealed(1, 1)])


def header(flags=0x02, lid=1, eid=1, lac=0, length=0, payload_len=0, digest_len=4) -> bytes:
    return HEADER.pack(flags, lid, eid, lac, length, payload_len, digest_len)


ENTRY = framing.MEDIA_TYPE
JSON = "application/json"

# (method, path, body, content type, status, error code)
CASES = [
    # POST /v1/entries: the framing
    ("POST", "/v1/entries", b"", ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", GOOD[:10], ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", GOOD[:-1], ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", GOOD + b"\x00", ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", GOOD + header(flags=0x10) + bytes(4), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", header(flags=0x06) + bytes(4), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", header(lid=-1) + bytes(4), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", header(eid=-1) + bytes(4), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", header(lac=-2) + bytes(4), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", header(length=-1) + bytes(4), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", header(digest_len=3) + bytes(3), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", header(digest_len=32) + bytes(32), ENTRY, 400, "invalid_argument"),
    ("POST", "/v1/entries", b'{"entries": []}', JSON, 400, "invalid_argument"),
    (
        "POST",
        "/v1/entries",
        GOOD + header(payload_len=STORED_ENTRY_SIZE_MAX_BYTES + 1),
        ENTRY,
        413,
        "payload_too_large",
    ),
    (
        "POST",
        "/v1/entries",
        framing.encode([sealed(1, 1, b"")]) * (BATCH_ENTRIES_MAX + 1),
        ENTRY,
        413,
        "payload_too_large",
    ),
    # single reads
    ("GET", "/v1/ledgers/abc/entries/0", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/-1/entries/0", b"", None, 400, "invalid_argument"),
    ("GET", f"/v1/ledgers/{BIG}/entries/0", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/1.5/entries/0", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries/-1", b"", None, 400, "invalid_argument"),
    ("GET", f"/v1/ledgers/7/entries/{BIG}", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries/x", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/8/entries/0", b"", None, 404, "ledger_not_found"),
    ("GET", "/v1/ledgers/7/entries/1", b"", None, 404, "entry_not_found"),
    # range reads
    ("GET", "/v1/ledgers/7/entries?from=-1", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?from=5&to=2", b"", None, 400, "invalid_argument"),
    ("GET", f"/v1/ledgers/7/entries?to={BIG}", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?to=x", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?max_entries=0", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?max_bytes=-5", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?stride=3", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?residues=1", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?stride=3&residues=3", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?stride=3&residues=-1", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?stride=3&residues=1,x", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?stride=3&residues=", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/entries?stride=65&residues=1", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/x/entries", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/8/entries", b"", None, 404, "ledger_not_found"),
    # LAC
    ("GET", "/v1/ledgers/8/lac", b"", None, 404, "ledger_not_found"),
    ("GET", "/v1/ledgers/-3/lac", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/lac?after=-2", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/lac?after=x", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/lac?after=0&wait_ms=-1", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers/7/lac?after=0&wait_ms=1.5", b"", None, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b"", JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b"{bad", JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b"{}", JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b"[5]", JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b'{"lac": "5"}', JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b'{"lac": 1.5}', JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b'{"lac": -2}', JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b'{"lac": ' + BIG.encode() + b"}", JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b'{"lac": 5, "x": 1}', JSON, 400, "invalid_argument"),
    ("POST", "/v1/ledgers/9/lac", b"lac=5", "text/plain", 400, "invalid_argument"),
    ("POST", f"/v1/ledgers/{BIG}/lac", b'{"lac": 5}', JSON, 400, "invalid_argument"),
    # fence, delete, list
    ("POST", "/v1/ledgers/-9/fence", b"", None, 400, "invalid_argument"),
    ("POST", f"/v1/ledgers/{BIG}/fence", b"", None, 400, "invalid_argument"),
    ("DELETE", "/v1/ledgers/8", b"", None, 404, "ledger_not_found"),
    ("DELETE", "/v1/ledgers/abc", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers?limit=0", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers?after=-2", b"", None, 400, "invalid_argument"),
    ("GET", "/v1/ledgers?limit=x", b"", None, 400, "invalid_argument"),
    # admin
    ("POST", "/v1/admin/disk-threshold", b"", JSON, 400, "invalid_argument"),
    ("POST", "/v1/admin/disk-threshold", b"{", JSON, 400, "invalid_argument"),
    (
        "POST",
        "/v1/admin/disk-threshold",
        b'{"readonly_free_ratio": 2}',
        JSON,
        400,
        "invalid_argument",
    ),
    (
        "POST",
        "/v1/admin/disk-threshold",
        b'{"readonly_free_ratio": "x"}',
        JSON,
        400,
        "invalid_argument",
    ),
    # unknown routes and wrong methods
    ("GET", "/v1/nope", b"", None, 404, "not_found"),
    ("GET", "/nope", b"", None, 404, "not_found"),
    ("GET", "/v1/ledgers/7/entries/0/extra", b"", None, 404, "not_found"),
    ("GET", "/v1/entries", b"", None, 405, "method_not_allowed"),
    ("PUT", "/v1/entries", GOOD, ENTRY, 405, "method_not_allowed"),
    ("POST", "/v1/ledgers/7/entries/0", b"", None, 405, "method_not_allowed"),
    ("PUT", "/v1/ledgers/7", b"", None, 405, "method_not_allowed"),
    ("GET", "/v1/ledgers/7/fence", b"", None, 405, "method_not_allowed"),
    ("DELETE", "/v1/info", b"", None, 405, "method_not_allowed"),
]


@pytest.fixture
def bookie(cluster):
    proc = cluster.start_bookie()
    b = Bookie(proc)
    b.add([sealed(7, 0, b"seed")])
    yield b
    b.close()


def test_bad_input_matrix(bookie):
    """Every malformed request on every endpoint gets its 4xx and {"error", "message"};
    nothing is stored and no request is a 500."""
    failures = []
    for method, path, body, content_type, status, code in CASES:
        headers = {"Content-Type": content_type} if content_type else {}
        r = bookie.http.request(method, path, content=body, headers=headers)
        try:
            doc = r.json()
        except ValueError:
            doc = {}
        if r.status_code != status or doc.get("error") != code or not doc.get("message"):
            failures.append(f"{method} {path[:60]} -> {r.status_code} {r.text[:200]}")
    assert not failures, "\n".join(failures)
    # Nothing stored: only the seed entry of ledger 7 exists, unchanged.
    assert bookie.ledgers() == [7]
    assert bookie.lac(7) == {"ledger_id": 7, "lac": -1, "last_entry_id": 0, "fenced": False}
    assert [r.entry_id for r in bookie.read_range(7, 0, 100)] == [0]
    assert bookie.info()["readonly_free_ratio"] == 0.05
    assert bookie.metric("quire_bookie_adds_total") == 1
    assert bookie.metric("quire_bookie_rejected_adds_total", 'reason="invalid_argument"') >= 12


def test_oversize_body_is_refused_before_it_is_read(bookie):
    """A body declared over 64 MiB is 413 payload_too_large at once, without being read."""
    host, port = bookie.proc.host, bookie.proc.port
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/entries HTTP/1.1\r\nHost: x\r\nContent-Type: "
            + ENTRY.encode()
            + b"\r\nContent-Length: "
            + str(64 * 1024 * 1024 + 1).encode()
            + b"\r\n\r\n"
            + GOOD
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert bookie.ledgers() == [7]


def test_entry_size_limit_is_inclusive(bookie):
    """An entry of exactly 5 MiB is stored and read back; one byte more is 413."""
    exact = sealed(11, 0, bytes(STORED_ENTRY_SIZE_MAX_BYTES))
    assert bookie.add([exact]) == {"stored": 1, "rejected": []}
    assert bookie.read(11, 0) == exact
    over = framing.encode([sealed(11, 1, bytes(STORED_ENTRY_SIZE_MAX_BYTES + 1))])
    r = bookie.http.post("/v1/entries", content=over)
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert bookie.lac(11)["last_entry_id"] == 0


def test_content_type_is_not_required_and_ids_at_the_limit_work(bookie):
    """An add without a content type is still framed bytes; the largest ids (2^63-1) are
    valid everywhere."""
    top = 2**63 - 1
    record = digest.seal(FramedRecord(top, top, top, b"top", b"", False, "crc32c", top))
    r = poll_client().post(f"{bookie.proc.url}/v1/entries", content=framing.encode([record]))
    assert r.status_code == 200 and r.json()["stored"] == 1
    assert bookie.read(top, top) == record
    assert bookie.lac(top) == {"ledger_id": top, "lac": top, "last_entry_id": top, "fenced": False}
    assert bookie.fence(top)["fenced"]
    assert bookie.http.get(f"/v1/ledgers?after={top}").json() == {"ledgers": [], "next": None}
    assert bookie.http.get("/v1/ledgers?after=7").json() == {"ledgers": [top], "next": None}


HMAC_KEY = digest.mac_key(b"a ledger password")


def _unverifiable(lid: int, eid: int, payload: bytes, digest_type: str) -> FramedRecord:
    """A record whose digest a bookie cannot check: hmac-sha256 (no key) or none."""
    record = FramedRecord(lid, eid, eid - 1, payload, b"", False, digest_type, (eid + 1) * 10)
    return digest.seal(record, HMAC_KEY)


@pytest.mark.parametrize("digest_type", ["hmac-sha256", "none"])
def test_a_record_corrupted_in_transit_is_refused_alone(bookie, digest_type):
    """An hmac-sha256 (or none) record with one payload bit flipped in transit is refused
    alone with invalid_argument (the framing's record checksum: the bookie has no HMAC
    key); the other records of the request, of the same and of another ledger, are
    stored and read back intact and verifiable; the same entry sent intact is stored."""
    lid = 30 if digest_type == "none" else 40
    records = [
        _unverifiable(lid, 0, b"first entry", digest_type),
        _unverifiable(lid, 1, b"second entry", digest_type),
        _unverifiable(lid + 1, 0, b"another ledger", digest_type),
    ]
    body = bytearray(framing.encode(records))
    body[len(framing.encode(records[:2])) - 1] ^= 0x01  # last payload byte of lid/1
    r = bookie.http.post("/v1/entries", content=bytes(body), headers={"Content-Type": ENTRY})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "stored": 2,
        "rejected": [{"ledger_id": lid, "entry_id": 1, "error": "invalid_argument"}],
    }
    for record in (records[0], records[2]):
        back = bookie.read(record.ledger_id, record.entry_id)
        assert back == record and back.transit_ok
        assert digest.record_ok(back, HMAC_KEY)
    missing = bookie.http.get(f"/v1/ledgers/{lid}/entries/1")
    assert missing.status_code == 404 and missing.json()["error"] == "entry_not_found"
    assert bookie.add([records[1]]) == {"stored": 1, "rejected": []}
    assert [r.payload for r in bookie.read_range(lid, 0, 9)] == [b"first entry", b"second entry"]


def test_a_striped_range_read_answers_only_its_residues(bookie):
    """``stride`` and ``residues`` (a gateway reading a striped ensemble asks each bookie
    for its share): only entries whose id mod stride is listed, in order, still bounded
    by max_entries; every residue of the stride is the same as no filter."""
    bookie.add([sealed(8, e, b"e%d" % e) for e in range(12)])
    ids = [r.entry_id for r in bookie.read_range(8, 1, 11, stride=3, residues="0,2")]
    assert ids == [2, 3, 5, 6, 8, 9, 11]
    assert [r.entry_id for r in bookie.read_range(8, 0, 11, stride=3, residues="1")] == [
        1,
        4,
        7,
        10,
    ]
    limited = bookie.read_range(8, 0, 11, stride=3, residues="2,0", max_entries=3)
    assert [r.entry_id for r in limited] == [0, 2, 3]
    every = bookie.read_range(8, 0, 11, stride=2, residues="1,0")
    assert [r.entry_id for r in every] == list(range(12))
    assert [r.payload for r in every] == [b"e%d" % e for e in range(12)]
