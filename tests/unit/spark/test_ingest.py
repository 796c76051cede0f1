"""The write side of the Spark connector without Spark: requests split by count and
size, each request one envelope batch, task ledgers attached in partition order, an
attach of unknown outcome settled by reading the log, and an abort that never deletes a
ledger the log holds."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from services.limits import ENTRY_SIZE_MAX_BYTES
from services.protocol import log_records
from services.spark import ingest
from services.spark import limits as spark_limits
from services.spark.client import QuireSparkError
from services.spark.ingest import IngestClient, WriteOptions


@dataclass(frozen=True)
class Message:
    ledger_id: int | None
    partition_id: int


def test_split_by_record_count() -> None:
    """Requests hold at most records_max records, in order, none empty."""
    payloads = [str(i).encode() for i in range(25)]
    requests = list(ingest.split_requests(payloads, records_max=10, bytes_max=1 << 30))
    assert [len(r) for r in requests] == [10, 10, 5]
    assert [p for r in requests for p in r] == payloads


def test_split_by_stored_bytes() -> None:
    """A request's records with their largest envelopes stay within bytes_max."""
    record = b"x" * 1000
    stored = len(record) + log_records.ENVELOPE_MAX_BYTES
    requests = list(ingest.split_requests([record] * 7, records_max=100, bytes_max=3 * stored))
    assert [len(r) for r in requests] == [3, 3, 1]


def test_default_bounds() -> None:
    """The defaults: 10,000 records and 16 MiB per request."""
    small = list(ingest.split_requests([b"a"] * 10_001))
    assert [len(r) for r in small] == [10_000, 1]
    big = [b"b" * (4 * 1024 * 1024)] * 5
    sizes = [len(r) for r in ingest.split_requests(big)]
    assert sizes == [3, 2]
    for request in ingest.split_requests(big):
        stored = sum(len(e) for e in log_records.encode(request, 0))
        assert stored <= spark_limits.REQUEST_PAYLOAD_MAX_BYTES


def test_record_too_large_refused() -> None:
    """A record whose enveloped entry would pass the API's entry bound is refused with
    a clear error; one at the bound is taken."""
    at_bound = b"z" * ingest.RECORD_SIZE_MAX_BYTES
    (request,) = ingest.split_requests([at_bound])
    (entry,) = log_records.encode(request, 1)
    assert len(entry) == ENTRY_SIZE_MAX_BYTES
    with pytest.raises(QuireSparkError, match="payload_too_large"):
        list(ingest.split_requests([at_bound + b"z"]))


def test_request_is_one_envelope_batch() -> None:
    """A request's entries decode to its records, the first a head that counts them,
    and each says how many of its batch follow."""
    payloads = [b"one", b"", b"three"]
    body = ingest.request_body(payloads, 1234)
    entries = [base64.b64decode(e) for e in body["entries"]]
    records = [log_records.decode(e) for e in entries]
    assert [r.data for r in records] == payloads
    assert [r.remaining for r in records] == [2, 1, 0]
    assert records[0].head == log_records.Head(1234, 3)
    assert records[1].head is None and records[2].head is None


def test_payload_of_bytes_and_strings() -> None:
    """Binary data as it is; a string as UTF-8; null refused."""
    assert ingest.as_payload(b"\x00\xff") == b"\x00\xff"
    assert ingest.as_payload(bytearray(b"ab")) == b"ab"
    assert ingest.as_payload("héllo") == "héllo".encode()
    with pytest.raises(QuireSparkError, match="null"):
        ingest.as_payload(None)
    with pytest.raises(QuireSparkError, match="binary or string"):
        ingest.as_payload(12)


def test_ledger_order_is_partition_order() -> None:
    """Ledgers go in partition order whatever order the messages came in; an empty
    partition or a failed task adds nothing; a repeated partition counts once."""
    messages = [Message(30, 2), None, Message(10, 0), Message(None, 1), Message(40, 3)]
    messages.append(Message(99, 2))
    assert ingest.ledger_order(messages) == [10, 30, 40]
    assert ingest.all_ledgers(messages) == [30, 10, 40, 99]


def test_task_metadata() -> None:
    assert ingest.task_metadata("orders", "job-1", 3, 1) == {
        "quire.log": "orders",
        "quire.job": "job-1",
        "quire.task": "3.1",
    }


def test_options() -> None:
    """gateway and log are required; a bare host gets http://; a password or a ledger
    list is refused with a message naming the option."""
    opts = WriteOptions.parse({"Gateway": "localhost:8080/", "log": "x", "token": "t"})
    assert (opts.gateway, opts.log, opts.token) == ("http://localhost:8080", "x", "t")
    assert (
        WriteOptions.parse({"gateway": "g", "log": "x", "request_records": "2"}).request_records
        == 2
    )
    assert WriteOptions.parse({"gateway": "g", "log": "x", "write_quorum": "3"}).ledger == {
        "write_quorum": 3
    }
    for bad, words in [
        ({"log": "x"}, "gateway"),
        ({"gateway": "g"}, '"log"'),
        ({"gateway": "g", "log": "x", "password": "p"}, "password"),
        ({"gateway": "g", "log": "x", "ledgers": "1,2"}, "ledgers"),
        ({"gateway": "g", "log": "x", "ack_quorum": "two"}, "ack_quorum"),
        ({"gateway": "g", "log": "x", "request_records": "0"}, "request_records"),
        ({"gateway": "g", "log": "x", "request_records": "10001"}, "request_records"),
    ]:
        with pytest.raises(QuireSparkError, match=words):
            WriteOptions.parse(bad)


# ------------------------------------------------------------------ a fake gateway


class FakeGateway:
    """Answers the calls of one log as the gateway does (the same attach again answers
    committed; a listed ledger is not deleted: 409 ledger_in_log); ``lose_next_attach``
    applies an attach but answers a 503 (the outcome unknown to the caller)."""

    def __init__(self) -> None:
        self.ledgers: list[int] = [1]
        self.commits: dict[str, int] = {}
        self.deleted: list[int] = []
        self.attach_calls = 0
        self.lose_next_attach = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        path, method = request.url.path, request.method
        if method == "GET" and path == "/v1/logs/x":
            return httpx.Response(200, json={"name": "x", "ledgers": self.ledgers})
        if method == "GET" and path.startswith("/v1/logs/x/commits/"):
            cid = path.rsplit("/", 1)[1]
            if cid not in self.commits:
                return httpx.Response(404, json={"error": "not_found", "message": "none"})
            return httpx.Response(200, json={"id": cid, "sequence": self.commits[cid]})
        if method == "POST" and path == "/v1/logs/x/ledgers":
            self.attach_calls += 1
            body: dict[str, Any] = json.loads(request.content)
            commit = body.get("commit")
            ids = body["ledgers"]
            if ids[0] in self.ledgers:
                at = self.ledgers.index(ids[0])
                if self.ledgers[at : at + len(ids)] == ids:  # the same attach again
                    return httpx.Response(200, json={"committed": True})
            if commit and self.commits.get(commit["id"], -1) >= commit["sequence"]:
                return httpx.Response(200, json={"committed": False})
            if any(lid in self.ledgers for lid in body["ledgers"]):
                return httpx.Response(
                    400, json={"error": "invalid_argument", "message": "is in the log already"}
                )
            self.ledgers += body["ledgers"]
            if commit:
                self.commits[commit["id"]] = commit["sequence"]
            if self.lose_next_attach:
                self.lose_next_attach = False
                return httpx.Response(503, json={"error": "unavailable", "message": "lost"})
            return httpx.Response(200, json={"committed": True})
        if method == "DELETE" and path.startswith("/v1/ledgers/"):
            ledger_id = int(path.rsplit("/", 1)[1])
            if ledger_id in self.ledgers:
                return httpx.Response(409, json={"error": "ledger_in_log", "message": "listed"})
            self.deleted.append(ledger_id)
            return httpx.Response(204)
        return httpx.Response(404, json={"error": "not_found", "message": path})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGateway:
    monkeypatch.setattr(spark_limits, "RETRY_DELAY_S", 0.0)
    return FakeGateway()


def client_of(fake: FakeGateway) -> IngestClient:
    options = WriteOptions("http://fake", "x")
    return IngestClient(options, transport=httpx.MockTransport(fake.handle))


def test_attach_commit_exactly_once(fake: FakeGateway) -> None:
    """The same commit sequence attached twice: the second answers False (skipped)."""
    with client_of(fake) as client:
        assert client.attach([5, 6], ("q", 0)) is True
        assert client.attach([7, 8], ("q", 0)) is False
    assert fake.ledgers == [1, 5, 6]


def test_attach_unknown_outcome_settled_by_sending_it_again(fake: FakeGateway) -> None:
    """An attach that landed but answered 503 is settled by sending the same attach
    again, which the gateway answers as committed: no duplicate, no error, also with a
    commit (the commit recorded by the lost attempt is ours, not someone else's)."""
    fake.lose_next_attach = True
    with client_of(fake) as client:
        assert client.attach([5, 6]) is True
    assert fake.ledgers == [1, 5, 6] and fake.attach_calls == 2
    fake.lose_next_attach = True
    with client_of(fake) as client:
        assert client.commit([7], [8], ("q", 3)) is True
    assert fake.ledgers == [1, 5, 6, 7] and fake.deleted == [8]


def test_attach_error_is_clear(fake: FakeGateway) -> None:
    """A refusal of the gateway is raised with its status, code and message."""
    fake.ledgers = [1, 5]
    with client_of(fake) as client, pytest.raises(QuireSparkError) as info:
        client.attach([6, 5])
    assert info.value.status == 400 and info.value.code == "invalid_argument"
    assert "gateway said 400 invalid_argument" in str(info.value)


def test_discard_spares_ledgers_in_the_log(fake: FakeGateway) -> None:
    """An abort deletes its ledgers, except one the log holds (an attach that landed:
    the gateway's 409 ledger_in_log leaves it, and is no failure)."""
    fake.ledgers = [1, 5]
    with client_of(fake) as client:
        client.discard([5, 6, 7])
    assert fake.deleted == [6, 7]


def test_failure_pickles() -> None:
    """A QuireSparkError travels from a worker to the driver with its fields."""
    import pickle

    exc = pickle.loads(pickle.dumps(QuireSparkError("log_not_found", "no log x", 404)))
    assert (exc.code, exc.message, exc.status) == ("log_not_found", "no log x", 404)
