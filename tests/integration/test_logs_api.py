"""The Logs API of a real cluster, route by route (docs/api.md "Logs"): the
exact success shapes (log object, writer, appends, roll, reads with paging and
tailing, truncate, list, delete), idempotent appends (also across a writer
hand-over), not_writer after a hand-over, and a 5 MiB record through a read."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from services.limits import ENTRY_SIZE_MAX_BYTES
from tests.harness import Cluster, wait_for
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
    with two_gateways(zookeeper, tmp_path_factory.mktemp("logs-api")) as (cluster, a, b):
        yield Env(cluster, a, b)


# ------------------------------------------------------------------ helpers


def pos(lid: int, eid: int) -> dict[str, int]:
    return {"ledger_id": lid, "entry_id": eid}


def create(gw: Gateway, name: str) -> dict[str, Any]:
    return ok(gw.request("PUT", f"/v1/logs/{name}"), 201)  # type: ignore[no-any-return]


def take(gw: Gateway, name: str) -> dict[str, int]:
    return ok(gw.request("POST", f"/v1/logs/{name}/writer"))  # type: ignore[no-any-return]


def append(gw: Gateway, name: str, data: bytes, key: str | None = None) -> httpx.Response:
    headers = {**RAW, **({"Idempotency-Key": key} if key is not None else {})}
    return gw.request("POST", f"/v1/logs/{name}/records", content=data, headers=headers)


def append_batch(
    gw: Gateway, name: str, payloads: list[bytes], key: str | None = None
) -> httpx.Response:
    body = {"entries": [base64.b64encode(p).decode() for p in payloads]}
    headers = {"Idempotency-Key": key} if key is not None else {}
    return gw.request("POST", f"/v1/logs/{name}/records", json=body, headers=headers)


def read(gw: Gateway, name: str, **params: Any) -> dict[str, Any]:
    return ok(gw.request("GET", f"/v1/logs/{name}/records", params=params))  # type: ignore[no-any-return]


def read_all(gw: Gateway, name: str) -> list[tuple[tuple[int, int], bytes]]:
    """Every readable record, following ``next`` until caught up."""
    out: list[tuple[tuple[int, int], bytes]] = []
    params: dict[str, Any] = {}
    for _ in range(1000):
        page = read(gw, name, **params)
        out += [
            ((r["position"]["ledger_id"], r["position"]["entry_id"]), base64.b64decode(r["data"]))
            for r in page["records"]
        ]
        params = {"from": page["next"]}
        if page["caught_up"]:
            return out
    raise AssertionError("the read never caught up")


def ledger_state(gw: Gateway, lid: int) -> str:
    return ok(gw.request("GET", f"/v1/ledgers/{lid}"))["state"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------ tests


def test_put_creates_then_answers_the_existing_log(env: Env) -> None:
    """PUT: 201 with the log object {name, ledgers, writer} of a new log, 200 with the
    same object after; GET answers it from any gateway."""
    first = create(env.a, "put-me")
    assert first == {"name": "put-me", "ledgers": [], "writer": None, "retention": None}
    again = ok(env.b.request("PUT", "/v1/logs/put-me"), 200)
    assert again == first
    assert ok(env.b.request("GET", "/v1/logs/put-me")) == first


def test_writer_append_batch_roll_and_read(env: Env) -> None:
    """The writer route answers exactly {epoch, ledger_id}; a raw append {position}; a
    batch {first_position, last_position}; roll {ledger_id} of a new ledger, which
    the log lists after the old one (then CLOSED); reads from either gateway give the
    records in log order with positions and data."""
    create(env.a, "basic")
    taken = take(env.a, "basic")
    assert set(taken) == {"epoch", "ledger_id"} and taken["epoch"] == 1
    first_lid = taken["ledger_id"]
    log = ok(env.b.request("GET", "/v1/logs/basic"))
    assert log == {
        "name": "basic",
        "ledgers": [first_lid],
        "writer": {"gateway": env.a.proc.address, "epoch": 1},
        "retention": None,
    }
    assert ok(append(env.a, "basic", b"r0")) == {"position": pos(first_lid, 0)}
    assert ok(append_batch(env.a, "basic", [b"r1", b"r2", b"r3"])) == {
        "first_position": pos(first_lid, 1),
        "last_position": pos(first_lid, 3),
    }
    rolled = ok(env.a.request("POST", "/v1/logs/basic/roll"))
    assert set(rolled) == {"ledger_id"} and rolled["ledger_id"] != first_lid
    second = rolled["ledger_id"]
    assert ok(env.a.request("GET", "/v1/logs/basic"))["ledgers"] == [first_lid, second]
    wait_for(lambda: ledger_state(env.a, first_lid) == "CLOSED", 10, "the old ledger closed")
    assert ok(append(env.a, "basic", b"r4")) == {"position": pos(second, 0)}
    expected = [
        ((first_lid, 0), b"r0"),
        ((first_lid, 1), b"r1"),
        ((first_lid, 2), b"r2"),
        ((first_lid, 3), b"r3"),
        ((second, 0), b"r4"),
    ]
    assert read_all(env.a, "basic") == expected  # the writer's gateway: its own LAC
    # Another gateway reads up to the LAC the bookies know (sent when the writer idles).
    wait_for(lambda: read_all(env.b, "basic") == expected, 10, "the other gateway reads all")
    # Reading a log ledger through the ledger API shows the envelopes (larger entries).
    entry = env.a.request("GET", f"/v1/ledgers/{first_lid}/entries/0")
    assert entry.status_code == 200 and entry.content.endswith(b"r0") and entry.content != b"r0"


def test_read_paging_next_and_caught_up(env: Env) -> None:
    """limit pages the read; each record carries its append's time (one batch, one
    stamp); next is "LID:EID" just after the last record (the same
    from when nothing was read); caught_up only on the page that reached the end; a
    position just past a closed ledger's end reads on in the next ledger."""
    create(env.a, "paging")
    lid = take(env.a, "paging")["ledger_id"]
    ok(append_batch(env.a, "paging", [b"p0", b"p1", b"p2"]))
    wait_for(lambda: len(read_all(env.b, "paging")) == 3, 10, "the bookies' LAC covers the batch")
    page = read(env.b, "paging", limit=2)
    assert [r["position"] for r in page["records"]] == [pos(lid, 0), pos(lid, 1)]
    assert [base64.b64decode(r["data"]) for r in page["records"]] == [b"p0", b"p1"]
    assert all(set(r) == {"position", "data", "time"} for r in page["records"])
    times = [r["time"] for r in page["records"]]
    assert times[0] == times[1] and isinstance(times[0], int)  # one batch, one stamp
    assert page["next"] == f"{lid}:2" and page["caught_up"] is False
    page = read(env.b, "paging", limit=2, **{"from": page["next"]})
    assert [r["position"] for r in page["records"]] == [pos(lid, 2)]
    assert page == {"records": page["records"], "next": f"{lid}:3", "caught_up": True}
    empty = read(env.b, "paging", **{"from": f"{lid}:3"})
    assert empty == {"records": [], "next": f"{lid}:3", "caught_up": True}
    second = ok(env.a.request("POST", "/v1/logs/paging/roll"))["ledger_id"]
    ok(append(env.a, "paging", b"p3"))
    wait_for(lambda: ledger_state(env.a, lid) == "CLOSED", 10, "the rolled ledger closed")
    after_end = read(env.b, "paging", wait_ms=10_000, **{"from": f"{lid}:3"})
    assert [r["position"] for r in after_end["records"]] == [pos(second, 0)]
    assert after_end["next"] == f"{second}:1" and after_end["caught_up"] is True


def test_wait_ms_returns_early_on_an_append_and_empty_after_the_time(env: Env) -> None:
    """A tailing read (wait_ms) on a gateway that is not the writer returns as soon as a
    record is appended; with nothing appended it returns empty, caught_up, with next
    unchanged, after about wait_ms."""
    create(env.a, "tail")
    lid = take(env.a, "tail")["ledger_id"]
    ok(append(env.a, "tail", b"t0"))
    start = f"{lid}:1"
    began = time.monotonic()
    idle = read(env.b, "tail", wait_ms=700, **{"from": start})
    waited = time.monotonic() - began
    assert idle == {"records": [], "next": start, "caught_up": True}
    assert waited >= 0.6, waited
    result: dict[str, Any] = {}

    def tail() -> None:
        t0 = time.monotonic()
        result["page"] = read(env.b, "tail", wait_ms=20_000, **{"from": start})
        result["s"] = time.monotonic() - t0

    thread = threading.Thread(target=tail)
    thread.start()
    try:
        # The append lands while the read waits (or just before it: either way it is seen).
        ok(append(env.a, "tail", b"t1"))
    finally:
        thread.join(30)
    assert not thread.is_alive()
    page = result["page"]
    assert [(r["position"], base64.b64decode(r["data"])) for r in page["records"]] == [
        (pos(lid, 1), b"t1")
    ]
    assert page["next"] == f"{lid}:2" and page["caught_up"] is True
    assert result["s"] < 15, result["s"]


def test_truncate_removes_whole_closed_ledgers_and_deletes_them(env: Env) -> None:
    """truncate?before= answers the log object without the ledgers that end before the
    position; their ledgers are deleted (GET /v1/ledgers/{id} 404); a position in the
    open last ledger keeps it; reads from a truncated position are 400."""
    create(env.a, "trunc")
    l1 = take(env.a, "trunc")["ledger_id"]
    ok(append_batch(env.a, "trunc", [b"a", b"b"]))
    l2 = ok(env.a.request("POST", "/v1/logs/trunc/roll"))["ledger_id"]
    ok(append(env.a, "trunc", b"c"))
    l3 = ok(env.a.request("POST", "/v1/logs/trunc/roll"))["ledger_id"]
    ok(append(env.a, "trunc", b"d"))
    for lid in (l1, l2):
        wait_for(lambda lid=lid: ledger_state(env.a, lid) == "CLOSED", 10, "rolled out closed")
    kept = ok(env.b.request("POST", "/v1/logs/trunc/truncate", params={"before": f"{l2}:0"}))
    assert kept == {
        "name": "trunc",
        "ledgers": [l2, l3],
        "writer": {"gateway": env.a.proc.address, "epoch": 1},
        "retention": None,
    }
    assert_error(env.a.request("GET", f"/v1/ledgers/{l1}"), 404, "ledger_not_found")
    assert_error(
        env.b.request("GET", "/v1/logs/trunc/records", params={"from": f"{l1}:0"}),
        400,
        "invalid_argument",
    )
    wait_for(lambda: [d for _, d in read_all(env.b, "trunc")] == [b"c", b"d"], 10, "c, d")
    # Just past the end of a closed ledger ("after l2") removes l2; the open l3 stays,
    # whatever the position in it.
    kept = ok(env.a.request("POST", "/v1/logs/trunc/truncate", params={"before": f"{l2}:1"}))
    assert kept["ledgers"] == [l3]
    kept = ok(env.a.request("POST", "/v1/logs/trunc/truncate", params={"before": f"{l3}:5"}))
    assert kept["ledgers"] == [l3]
    assert_error(env.a.request("GET", f"/v1/ledgers/{l2}"), 404, "ledger_not_found")
    assert read_all(env.a, "trunc") == [((l3, 0), b"d")]


def test_list_pages_in_byte_order(env: Env) -> None:
    """GET /v1/logs lists names in byte order; limit pages it and next is the after of
    the next page (null on the last)."""
    for name in ("zz-list", "A-list", "a-list", "_list", "-list", ".list", "0-list"):
        ok(env.a.request("PUT", f"/v1/logs/{name}"), 201)
    whole = ok(env.b.request("GET", "/v1/logs"))
    assert whole["next"] is None
    names = whole["logs"]
    assert names == sorted(names, key=str.encode) and len(set(names)) == len(names)
    assert {"zz-list", "A-list", "a-list", "_list", "-list", ".list", "0-list"} <= set(names)
    paged: list[str] = []
    params: dict[str, Any] = {"limit": 3}
    for _ in range(100):
        page = ok(env.b.request("GET", "/v1/logs", params=params))
        assert set(page) == {"logs", "next"} and len(page["logs"]) <= 3
        paged += page["logs"]
        if page["next"] is None:
            break
        assert page["next"] == page["logs"][-1]
        params = {"limit": 3, "after": page["next"]}
    assert paged == names
    tail = ok(env.b.request("GET", "/v1/logs", params={"after": "a-list"}))["logs"]
    assert tail == [n for n in names if n.encode() > b"a-list"]

    # ?prefix= keeps only the names starting with it, paged the same way.
    with_a = [n for n in names if n.startswith("a-")]
    assert ok(env.b.request("GET", "/v1/logs", params={"prefix": "a-"}))["logs"] == with_a
    dashed = [n for n in names if n.startswith("-")]
    first = ok(env.b.request("GET", "/v1/logs", params={"prefix": "-", "limit": 1}))
    assert first["logs"] == dashed[:1]
    assert first["next"] == (dashed[0] if len(dashed) > 1 else None)
    none = ok(env.b.request("GET", "/v1/logs", params={"prefix": "no-such-prefix"}))
    assert none == {"logs": [], "next": None}
    r = env.b.request("GET", "/v1/logs", params={"prefix": "x" * 1000})
    assert r.status_code == 400 and r.json()["error"] == "invalid_argument"


def test_delete_then_404_everywhere_and_its_ledgers_are_gone(env: Env) -> None:
    """DELETE answers 204; then every route but PUT answers 404 log_not_found (on the
    writer gateway and the other), and the log's ledgers are deleted."""
    create(env.a, "doomed")
    l1 = take(env.a, "doomed")["ledger_id"]
    ok(append(env.a, "doomed", b"x"))
    l2 = ok(env.a.request("POST", "/v1/logs/doomed/roll"))["ledger_id"]
    ok(append(env.a, "doomed", b"y"))
    r = env.b.request("DELETE", "/v1/logs/doomed")
    assert r.status_code == 204 and r.content == b""
    for gw in (env.a, env.b):
        for method, path in (
            ("GET", "/v1/logs/doomed"),
            ("DELETE", "/v1/logs/doomed"),
            ("POST", "/v1/logs/doomed/writer"),
            ("POST", "/v1/logs/doomed/records"),
            ("GET", "/v1/logs/doomed/records"),
            ("POST", "/v1/logs/doomed/roll"),
            ("POST", f"/v1/logs/doomed/truncate?before={l2}:0"),
        ):
            assert_error(gw.request(method, path, content=b"z", headers=RAW), 404, "log_not_found")
        for lid in (l1, l2):
            assert_error(gw.request("GET", f"/v1/ledgers/{lid}"), 404, "ledger_not_found")
    assert "doomed" not in ok(env.a.request("GET", "/v1/logs"))["logs"]


def test_idempotent_appends_answer_the_original_positions(env: Env) -> None:
    """Same key, same body: the original position(s) with 200 and nothing appended, for
    a single record, a batch, and a raw record retried as a JSON batch of one."""
    create(env.a, "idem")
    lid = take(env.a, "idem")["ledger_id"]
    one = ok(append(env.a, "idem", b"once", key="k-one"))
    assert one == {"position": pos(lid, 0)}
    assert ok(append(env.a, "idem", b"once", key="k-one")) == one
    batch = ok(append_batch(env.a, "idem", [b"b0", b"b1"], key="k-batch"))
    assert batch == {"first_position": pos(lid, 1), "last_position": pos(lid, 2)}
    assert ok(append_batch(env.a, "idem", [b"b0", b"b1"], key="k-batch")) == batch
    as_batch = ok(append_batch(env.a, "idem", [b"once"], key="k-one"))
    assert as_batch == {"first_position": pos(lid, 0), "last_position": pos(lid, 0)}
    assert [d for _, d in read_all(env.a, "idem")] == [b"once", b"b0", b"b1"]


def test_hand_over_not_writer_and_keys_survive(env: Env) -> None:
    """B takes the role: the epoch grows, A's next append is forwarded to B (in B's
    ledger), a roll through A is 409 not_writer, and a retry on B with a key A appended
    answers A's position and appends nothing (the window is rebuilt from the log's
    tail)."""
    create(env.a, "handover")
    first = take(env.a, "handover")
    got = ok(append(env.a, "handover", b"from-a", key="k-a"))
    assert got == {"position": pos(first["ledger_id"], 0)}
    second = take(env.b, "handover")
    assert second["epoch"] == first["epoch"] + 1
    assert second["ledger_id"] != first["ledger_id"]
    late = ok(append(env.a, "handover", b"late"))
    assert late["position"]["ledger_id"] == second["ledger_id"]
    assert_error(env.a.request("POST", "/v1/logs/handover/roll"), 409, "not_writer")
    assert ok(append(env.b, "handover", b"from-a", key="k-a")) == got
    ok(append(env.b, "handover", b"from-b"))
    assert [d for _, d in read_all(env.b, "handover")] == [b"from-a", b"late", b"from-b"]
    wait_for(lambda: len(read_all(env.a, "handover")) == 3, 10, "A reads B's records")
    log = ok(env.a.request("GET", "/v1/logs/handover"))
    assert log["writer"] == {"gateway": env.b.proc.address, "epoch": second["epoch"]}
    assert log["ledgers"] == [first["ledger_id"], second["ledger_id"]]


def test_a_5_mib_record_round_trips(env: Env) -> None:
    """A record of exactly 5 MiB (the API's limit) is appended, with a key, and read back
    whole (its stored entry carries the envelope on top)."""
    create(env.a, "big")
    lid = take(env.a, "big")["ledger_id"]
    data = bytes(range(256)) * (ENTRY_SIZE_MAX_BYTES // 256)
    assert len(data) == ENTRY_SIZE_MAX_BYTES
    assert ok(append(env.a, "big", data, key="k" * 128)) == {"position": pos(lid, 0)}
    page = read(env.b, "big", limit=1, wait_ms=10_000)
    assert [r["position"] for r in page["records"]] == [pos(lid, 0)]
    assert base64.b64decode(page["records"][0]["data"]) == data


def test_a_tail_read_on_the_writer_sees_another_gateway_take_the_log(env: Env) -> None:
    """A tailing read waiting on the writer's own gateway (which waits on its write
    handle, never re-reading the list on a timer) is woken when another gateway takes
    the log (the writer's watch on the log learns it) and returns that writer's first
    record, long before its wait_ms."""
    create(env.a, "tail-taken")
    lid = take(env.a, "tail-taken")["ledger_id"]
    ok(append(env.a, "tail-taken", b"t0"))
    start = f"{lid}:1"
    result: dict[str, Any] = {}

    def tail() -> None:
        t0 = time.monotonic()
        result["page"] = read(env.a, "tail-taken", wait_ms=25_000, **{"from": start})
        result["s"] = time.monotonic() - t0

    thread = threading.Thread(target=tail)
    thread.start()
    try:
        # The hand-over lands while the read waits (or just before it: either way the
        # read must end at B's record).
        new_lid = take(env.b, "tail-taken")["ledger_id"]
        ok(append(env.b, "tail-taken", b"t1"))
    finally:
        thread.join(40)
    assert not thread.is_alive()
    page = result["page"]
    assert [(r["position"], base64.b64decode(r["data"])) for r in page["records"]] == [
        (pos(new_lid, 0), b"t1")
    ]
    assert result["s"] < 15, result["s"]
