"""The bookie's add lane (bookie.fastpath.AddLane: a plain add with a body of at most
64 KiB answered by the HTTP protocol itself) keeps the ASGI fast path's contract: the
same add sent plainly (the lane) and with a chunked body (which the lane is never
offered: the ASGI path) gets the same status, body and headers, for good and bad adds
and a wrong cluster secret; a body over the lane's bound is served by the ASGI path."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import pytest

from bookie.limits import LANE_BODY_MAX_BYTES
from services.wire import framing
from tests.harness import Cluster, fresh_chroot
from tests.integration.bookie_support import Bookie, sealed

SECRET = "lane-secret-5c2"
# Answer headers whose values differ between any two answers.
_VARYING = {"date", "x-request-id", "content-length"}


class Answer:
    def __init__(self, status: int, names: list[str], headers: dict[str, str], body: bytes):
        self.status, self.names, self.headers, self.body = status, names, headers, body

    def shape(self, lid: int) -> tuple[int, object, list[tuple[str, str]]]:
        """Status, body (the ledger id ``lid`` written as 0) and headers."""
        text = re.sub(rf"\b{lid}\b", "0", self.body.decode())
        body = json.loads(text) if text else None
        headers = sorted((k, "" if k in _VARYING else v) for k, v in self.headers.items())
        return self.status, body, headers

    @property
    def via_lane(self) -> bool:
        """Which path served a 200: the lane writes content-length right after the
        server's headers, the ASGI fast path the app's content-type first (their error
        answers have the same order)."""
        return self.names.index("content-length") < self.names.index("content-type")


def _send(port: int, body: bytes, secret: str = SECRET, chunked: bool = False) -> Answer:
    head = (
        f"POST /v1/entries HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"X-Cluster-Secret: {secret}\r\nContent-Type: {framing.MEDIA_TYPE}\r\n"
    ).encode()
    if chunked:
        payload = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
        request = head + b"Transfer-Encoding: chunked\r\n\r\n" + payload
    else:
        request = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    with socket.create_connection(("127.0.0.1", port), timeout=10.0) as sock:
        sock.sendall(request)
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = sock.recv(65536)
            assert chunk, raw
            raw += chunk
        head_bytes, _, rest = raw.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        names = [line.split(":", 1)[0].lower() for line in lines[1:]]
        headers = {
            n: line.split(":", 1)[1].strip() for n, line in zip(names, lines[1:], strict=True)
        }
        length = int(headers["content-length"])
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk, rest
            rest += chunk
    return Answer(int(lines[0].split()[1]), names, headers, rest[:length])


@pytest.fixture(scope="module")
def bookie(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bookie]:  # type: ignore[no-untyped-def]
    cluster = Cluster(
        zookeeper.connect_string, fresh_chroot(), tmp_path_factory.mktemp("lane"), SECRET
    )
    try:
        b = Bookie(cluster.start_bookie(), SECRET)
        try:
            yield b
        finally:
            b.close()
    finally:
        cluster.stop_all()


def _bad_digest(lid: int, eid: int) -> framing.FramedRecord:
    return sealed(lid, eid)._replace(digest=bytes(4))


CASES = {
    "one entry": lambda lid: framing.encode([sealed(lid, 0)]),
    "three entries": lambda lid: framing.encode([sealed(lid, e) for e in range(3)]),
    "one bad digest of two": lambda lid: framing.encode([sealed(lid, 0), _bad_digest(lid, 1)]),
    "empty body": lambda lid: b"",
    "not framed": lambda lid: b"this is not framing",
    "a cut frame": lambda lid: framing.encode([sealed(lid, 0)])[:-3],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_lane_answers_as_the_asgi_path(bookie: Bookie, case: str) -> None:
    """The same add (to a ledger of its own on each path) through the lane and through
    the ASGI path: equal status, body and headers; and what each stored is the same."""
    base = 1000 + 10 * sorted(CASES).index(case)
    port = bookie.proc.port
    lane = _send(port, CASES[case](base))
    asgi = _send(port, CASES[case](base + 1), chunked=True)
    assert lane.shape(base) == asgi.shape(base + 1)
    if lane.status == 200:
        assert lane.via_lane and not asgi.via_lane
    assert lane.headers["x-quire-bookie-instance"] == bookie.info()["instance_id"]
    if lane.status == 200:
        stored = json.loads(lane.body)["stored"]
        assert stored >= 1
        for lid in (base, base + 1):
            assert [r.entry_id for r in bookie.read_range(lid, 0, stored - 1)] == list(
                range(stored)
            )


def test_a_fenced_ledger_refuses_the_lane_s_add_per_record(bookie: Bookie) -> None:
    bookie.add([sealed(1200, 0)])
    bookie.fence(1200)
    lane = _send(bookie.proc.port, framing.encode([sealed(1200, 1)]))
    assert lane.via_lane and lane.status == 200
    assert json.loads(lane.body) == {
        "stored": 0,
        "rejected": [{"ledger_id": 1200, "entry_id": 1, "error": "ledger_fenced"}],
    }


def test_a_wrong_secret_is_401_whichever_path(bookie: Bookie) -> None:
    """The lane does not take a call without the right secret: the stack's middleware
    answers it, as it answers the chunked one."""
    body = framing.encode([sealed(1300, 0)])
    plain = _send(bookie.proc.port, body, secret="not-the-secret")
    chunked = _send(bookie.proc.port, body, secret="not-the-secret", chunked=True)
    assert plain.status == chunked.status == 401
    assert json.loads(plain.body)["error"] == json.loads(chunked.body)["error"] == "unauthorized"
    assert "not-the-secret" not in plain.body.decode()
    assert 1300 not in bookie.ledgers()


def test_a_body_over_the_lane_s_bound_is_served_by_the_asgi_path(bookie: Bookie) -> None:
    """An add of more than 64 KiB (a gateway's batch) is stored all the same."""
    payload = b"x" * 4096
    records = [sealed(1400, e, payload) for e in range(20)]
    body = framing.encode(records)
    assert len(body) > LANE_BODY_MAX_BYTES
    answer = _send(bookie.proc.port, body)
    assert answer.status == 200 and not answer.via_lane
    assert json.loads(answer.body) == {"stored": 20, "rejected": []}
    assert [r.payload for r in bookie.read_range(1400, 0, 19)] == [payload] * 20
