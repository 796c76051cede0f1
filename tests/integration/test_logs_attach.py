"""What the Spark connector stands on, on a real cluster: the binary range read
(``Accept: application/vnd.quire.entries``) and attaching task ledgers to a log in one
CAS with an exactly-once commit id (``POST /v1/logs/{name}/ledgers``)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from services.protocol import log_records
from services.wire.entries_stream import MEDIA_TYPE, FrameDecoder
from tests.harness import Cluster
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    ok,
    two_gateways,
)

RAW = {"Content-Type": "application/octet-stream"}


@dataclass
class Env:
    cluster: Cluster
    a: Gateway
    b: Gateway


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with two_gateways(zookeeper, tmp_path_factory.mktemp("logs-attach")) as (cluster, a, b):
        yield Env(cluster, a, b)


def task_ledger(g: Gateway, log: str, records: list[bytes], close: bool = True) -> int:
    """A ledger written the way a Spark task writes one: made for ``log``, records in
    their envelope, closed."""
    meta = {"quire.log": log, "quire.job": "job-1", "quire.task": "0.0"}
    lid = ok(g.request("POST", "/v1/ledgers", json={"metadata": meta}), 201)["ledger_id"]
    if records:
        entries = log_records.encode(records, int(time.time() * 1000))
        body = {"entries": [base64.b64encode(e).decode() for e in entries]}
        ok(g.request("POST", f"/v1/ledgers/{lid}/entries", json=body))
    if close:
        ok(g.request("POST", f"/v1/ledgers/{lid}/close"))
    return lid


def log_records_of(g: Gateway, name: str) -> list[bytes]:
    body = ok(g.request("GET", f"/v1/logs/{name}/records"))
    return [base64.b64decode(r["data"]) for r in body["records"]]


def test_binary_range_read_is_the_json_read_in_frames(env: Env) -> None:
    """A range read with Accept: application/vnd.quire.entries streams the same entries
    as the JSON page (bytes and ids), as frames, with the readable end in a header;
    from/to cut it the same way; an unknown ledger is the usual JSON 404."""
    g = env.a
    lid = ok(g.request("POST", "/v1/ledgers", json={}), 201)["ledger_id"]
    payloads = [bytes([n]) * (n * 37) for n in range(40)]
    body = {"entries": [base64.b64encode(p).decode() for p in payloads]}
    ok(g.request("POST", f"/v1/ledgers/{lid}/entries", json=body))
    r = g.request("GET", f"/v1/ledgers/{lid}/entries", headers={"Accept": MEDIA_TYPE})
    assert r.status_code == 200 and r.headers["content-type"] == MEDIA_TYPE
    assert r.headers["x-last-add-confirmed"] == "39"
    decoder = FrameDecoder()
    frames = decoder.feed(r.content)
    assert decoder.pending == 0
    assert frames == list(enumerate(payloads))
    r = g.request(
        "GET",
        f"/v1/ledgers/{lid}/entries",
        params={"from": 5, "to": 9},
        headers={"Accept": MEDIA_TYPE},
    )
    assert FrameDecoder().feed(r.content) == [(n, payloads[n]) for n in range(5, 10)]
    assert_error(
        g.request("GET", "/v1/ledgers/999999/entries", headers={"Accept": MEDIA_TYPE}),
        404,
        "ledger_not_found",
    )


def test_attach_appends_task_ledgers_in_one_cas_exactly_once(env: Env) -> None:
    """Attached ledgers join the log in the order given, after what the writer wrote; the
    writer (on another gateway) is fenced off and answers not_writer; the role is left
    free at a higher epoch; the same commit id and sequence again changes nothing
    (committed false), a higher sequence attaches again; GET commits tells the last."""
    a, b = env.a, env.b
    ok(a.request("PUT", "/v1/logs/attach-1"), 201)
    epoch = ok(a.request("POST", "/v1/logs/attach-1/writer"))["epoch"]
    ok(a.request("POST", "/v1/logs/attach-1/records", content=b"by-writer", headers=RAW))
    first = task_ledger(b, "attach-1", [b"t0-a", b"t0-b"])
    second = task_ledger(b, "attach-1", [b"t1-a"])
    empty = task_ledger(b, "attach-1", [])
    body = {"ledgers": [first, second, empty], "commit": {"id": "query-7", "sequence": 3}}
    out = ok(b.request("POST", "/v1/logs/attach-1/ledgers", json=body))
    assert out["committed"] is True and out["epoch"] == epoch + 1
    assert out["log"]["writer"] is None
    assert out["log"]["ledgers"][-3:] == [first, second, empty]
    assert log_records_of(b, "attach-1") == [b"by-writer", b"t0-a", b"t0-b", b"t1-a"]
    assert_error(
        a.request("POST", "/v1/logs/attach-1/records", content=b"late", headers=RAW),
        409,
        "not_writer",
    )
    again = task_ledger(b, "attach-1", [b"dup"])
    body = {"ledgers": [again], "commit": {"id": "query-7", "sequence": 3}}
    out = ok(b.request("POST", "/v1/logs/attach-1/ledgers", json=body))
    assert out["committed"] is False and again not in out["log"]["ledgers"]
    assert ok(b.request("GET", "/v1/logs/attach-1/commits/query-7")) == {
        "id": "query-7",
        "sequence": 3,
    }
    body = {"ledgers": [again], "commit": {"id": "query-7", "sequence": 4}}
    assert ok(b.request("POST", "/v1/logs/attach-1/ledgers", json=body))["committed"] is True
    assert log_records_of(a, "attach-1")[-1] == b"dup"
    assert_error(b.request("GET", "/v1/logs/attach-1/commits/other"), 404, "not_found")
    # A writer can take the role again after a commit, at the next epoch.
    assert ok(a.request("POST", "/v1/logs/attach-1/writer"))["epoch"] == epoch + 3


def test_attach_refuses_ledgers_it_must_not_take(env: Env) -> None:
    """Unknown, OPEN, password-protected, made for another log, already listed ledgers,
    an empty list, a bad commit id and an unknown log: 400 / 404, and the log is
    unchanged."""
    g = env.a
    ok(g.request("PUT", "/v1/logs/attach-2"), 201)
    good = task_ledger(g, "attach-2", [b"x"])
    ok(g.request("POST", "/v1/logs/attach-2/ledgers", json={"ledgers": [good]}))
    before = ok(g.request("GET", "/v1/logs/attach-2"))
    open_one = task_ledger(g, "attach-2", [b"y"], close=False)
    other_log = task_ledger(g, "not-attach-2", [b"z"])
    meta = {"quire.log": "attach-2"}
    pw = ok(g.request("POST", "/v1/ledgers", json={"metadata": meta, "password": "pw-1"}), 201)
    ok(
        g.request(
            "POST", f"/v1/ledgers/{pw['ledger_id']}/close", headers={"X-Ledger-Password": "pw-1"}
        )
    )
    fresh = task_ledger(g, "attach-2", [b"w"])
    for ledgers in ([999_999], [open_one], [other_log], [pw["ledger_id"]], [good], [],
                    [fresh, fresh]):  # fmt: skip
        r = g.request("POST", "/v1/logs/attach-2/ledgers", json={"ledgers": ledgers})
        assert_error(r, 400, "invalid_argument")
    bad_commit = {"ledgers": [fresh], "commit": {"id": "no spaces", "sequence": 1}}
    assert_error(g.request("POST", "/v1/logs/attach-2/ledgers", json=bad_commit), 400,
                 "invalid_argument")  # fmt: skip
    assert ok(g.request("GET", "/v1/logs/attach-2")) == before
    assert_error(
        g.request("POST", "/v1/logs/no-such-log/ledgers", json={"ledgers": [fresh]}),
        404,
        "log_not_found",
    )
