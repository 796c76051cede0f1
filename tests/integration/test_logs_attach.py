"""What the Spark connector stands on, on a real cluster: the binary range read
(``Accept: application/vnd.quire.entries``) and attaching task ledgers to a log in one
CAS with an exactly-once commit id (``POST /v1/logs/{name}/ledgers``)."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from kazoo.client import KazooClient

from services.protocol import log_records
from services.wire.entries_stream import MEDIA_TYPE, FrameDecoder
from services.zk import paths as zkpaths
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
    return int(lid)


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
    writer (on another gateway) is fenced off; the role is left free at a higher epoch,
    so the old writer's gateway takes it again on its next append, in a new ledger after
    the attached ones; the same commit id and sequence again changes nothing
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
    late = ok(a.request("POST", "/v1/logs/attach-1/records", content=b"late", headers=RAW))
    assert late["position"]["ledger_id"] not in out["log"]["ledgers"]
    assert log_records_of(a, "attach-1")[-2:] == [b"t1-a", b"late"]  # A writes it now
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
    # A writer can take the role again after a commit, at the next epoch (A's late
    # append took it once between the commits).
    assert ok(a.request("POST", "/v1/logs/attach-1/writer"))["epoch"] == epoch + 4


def test_attach_refuses_ledgers_it_must_not_take(env: Env) -> None:
    """Unknown, OPEN, password-protected, made for another log, marked as a log writer's
    own (quire.log.writer, whose record times the window's rebuild trusts), already listed
    ledgers, an empty list, a bad commit id and an unknown log: 400 / 404, and the log is
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
    forged = {"quire.log": "attach-2", "quire.log.writer": "127.0.0.1:1"}
    marked = ok(g.request("POST", "/v1/ledgers", json={"metadata": forged}), 201)["ledger_id"]
    ok(g.request("POST", f"/v1/ledgers/{marked}/close"))
    fresh = task_ledger(g, "attach-2", [b"w"])
    for ledgers in ([999_999], [open_one], [other_log], [pw["ledger_id"]], [marked],
                    [fresh, good], [], [fresh, fresh]):  # fmt: skip
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


def test_attach_retry_is_the_same_attach(env: Env) -> None:
    """An attach sent again after it landed (its answer lost) is recognised as the same
    attach: committed true with the log as it is, with or without a commit, and nothing
    changes; ledgers that are only partly in the log are still refused."""
    g = env.a
    ok(g.request("PUT", "/v1/logs/attach-3"), 201)
    first, second = task_ledger(g, "attach-3", [b"p"]), task_ledger(g, "attach-3", [b"q"])
    body = {"ledgers": [first, second], "commit": {"id": "query-3", "sequence": 9}}
    out = ok(g.request("POST", "/v1/logs/attach-3/ledgers", json=body))
    assert out["committed"] is True
    again = ok(env.b.request("POST", "/v1/logs/attach-3/ledgers", json=body))
    assert again == out
    plain = task_ledger(g, "attach-3", [b"r"])
    out = ok(g.request("POST", "/v1/logs/attach-3/ledgers", json={"ledgers": [plain]}))
    again = ok(g.request("POST", "/v1/logs/attach-3/ledgers", json={"ledgers": [plain]}))
    assert again == out and again["committed"] is True
    assert log_records_of(g, "attach-3") == [b"p", b"q", b"r"]
    fresh = task_ledger(g, "attach-3", [b"s"])
    for ledgers in ([second, fresh], [second, first]):
        r = g.request("POST", "/v1/logs/attach-3/ledgers", json={"ledgers": ledgers})
        assert_error(r, 400, "invalid_argument")
    assert ok(g.request("GET", "/v1/logs/attach-3"))["ledgers"] == [first, second, plain]


def test_a_ledger_a_log_lists_cannot_be_deleted(env: Env) -> None:
    """DELETE of a ledger that a log lists (attached, or made by the log's writer) is
    409 ledger_in_log and the ledger stays; once truncated away it is gone; a ledger
    made for the log but never attached is deleted as usual."""
    g = env.a
    ok(g.request("PUT", "/v1/logs/attach-4"), 201)
    attached = task_ledger(g, "attach-4", [b"kept"])
    ok(g.request("POST", "/v1/logs/attach-4/ledgers", json={"ledgers": [attached]}))
    written = ok(g.request("POST", "/v1/logs/attach-4/writer"))["ledger_id"]
    ok(g.request("POST", "/v1/logs/attach-4/records", content=b"more", headers=RAW))
    for lid in (attached, written):
        assert_error(env.b.request("DELETE", f"/v1/ledgers/{lid}"), 409, "ledger_in_log")
        assert g.request("GET", f"/v1/ledgers/{lid}").status_code == 200
    assert log_records_of(g, "attach-4") == [b"kept", b"more"]
    ok(g.request("POST", "/v1/logs/attach-4/truncate", params={"before": f"{written}:0"}))
    assert g.request("GET", f"/v1/ledgers/{attached}").status_code == 404
    spare = task_ledger(g, "attach-4", [b"spare"])
    assert env.b.request("DELETE", f"/v1/ledgers/{spare}").status_code == 204


def test_read_of_a_log_listing_a_missing_ledger_fails_loudly(env: Env) -> None:
    """A log read that meets a listed ledger whose metadata is gone (lost outside the
    API) fails with 500 log_ledger_missing naming it, rather than ending the read there
    as if the log ended: nothing after it is skipped silently."""
    g = env.a
    ok(g.request("PUT", "/v1/logs/attach-5"), 201)
    ledgers = [task_ledger(g, "attach-5", [b"one"]), task_ledger(g, "attach-5", [b"two"]),
               task_ledger(g, "attach-5", [b"three"])]  # fmt: skip
    ok(g.request("POST", "/v1/logs/attach-5/ledgers", json={"ledgers": ledgers}))
    zk = KazooClient(hosts=env.cluster.zk_connect + env.cluster.zk_root, timeout=10.0)
    zk.start(10.0)
    try:
        zk.delete(zkpaths.ledger(ledgers[1]))
    finally:
        zk.stop()
        zk.close()
    r = g.request("GET", "/v1/logs/attach-5/records")
    assert_error(r, 500, "log_ledger_missing")
    assert str(ledgers[1]) in r.json()["message"]
    first = ok(g.request("GET", "/v1/logs/attach-5/records", params={"limit": 1}))
    assert [base64.b64decode(x["data"]) for x in first["records"]] == [b"one"]


def test_attach_racing_a_delete_never_lists_a_deleted_ledger(env: Env) -> None:
    """An attach and a DELETE of one of its ledgers racing (an abort's clean-up against
    a late commit), at many relative timings: either the attach lists the ledger and the
    delete is refused, or the delete wins and the attach fails; the log never lists a
    ledger that does not exist."""
    log = "attach-6"
    ok(env.a.request("PUT", f"/v1/logs/{log}"), 201)
    outcomes: set[tuple[int, int]] = set()
    for round_ in range(40):
        # The log's last ledger OPEN on gateway a: the attach on b recovers it first,
        # which widens the window between its checks and its CAS.
        ok(env.a.request("POST", f"/v1/logs/{log}/writer"))
        ok(env.a.request("POST", f"/v1/logs/{log}/records", content=b"w", headers=RAW))
        lid = task_ledger(env.a, log, [f"t{round_}".encode()])
        start = threading.Barrier(2)
        answers: dict[str, httpx.Response] = {}

        def attach(lid: int, start: threading.Barrier, answers: dict[str, httpx.Response]) -> None:
            start.wait()
            answers["attach"] = env.b.request(
                "POST", f"/v1/logs/{log}/ledgers", json={"ledgers": [lid]}
            )

        def delete(
            lid: int, start: threading.Barrier, answers: dict[str, httpx.Response], delay_s: float
        ) -> None:
            start.wait()
            time.sleep(delay_s)
            answers["delete"] = env.a.request("DELETE", f"/v1/ledgers/{lid}")

        delay_s = (round_ % 20) * 0.002
        threads = [
            threading.Thread(target=attach, args=(lid, start, answers)),
            threading.Thread(target=delete, args=(lid, start, answers, delay_s)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        outcomes.add((answers["attach"].status_code, answers["delete"].status_code))
        listed = ok(env.a.request("GET", f"/v1/logs/{log}"))["ledgers"]
        missing = [x for x in listed if env.a.request("GET", f"/v1/ledgers/{x}").status_code != 200]
        assert missing == [], (round_, answers["attach"].text, answers["delete"].status_code)
    assert outcomes <= {(200, 409), (400, 204)}, outcomes
