"""The Ledgers API of a real gateway, call by call (docs/api.md "Ledgers"): the ledger object,
the writer's rules (not_writer, close twice, ledger_closed), LAC and its long poll on
the writer and elsewhere, the idle writer's LAC update, paging, length, delete, list,
metrics and the docs page."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from services.cluster.processes import poll_client
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Appender,
    Gateway,
    assert_error,
    check_read_back,
    metric_value,
    module_cluster,
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)

LEDGER_KEYS = {
    "ledger_id", "state", "ensemble_size", "write_quorum", "ack_quorum", "digest",
    "last_entry_id", "length", "fragments", "metadata", "created_at", "closed_at",
}  # fmt: skip


@dataclass
class Env:
    cluster: Cluster
    writer: Gateway
    reader: Gateway  # another gateway: never the writer of these ledgers
    bookies: list


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("gateway-api")) as cluster:
        bookies = start_bookies(cluster, 3)
        writer = start_gateway(cluster)
        reader = start_gateway(cluster)
        wait_writable(writer, 3)
        yield Env(cluster, writer, reader, bookies)


def test_create_answers_the_ledger_object(env: Env) -> None:
    """Create: 201 with the docs/api.md ledger object; defaults 3/2/2 crc32c; an OPEN ledger
    with no entries has LAC -1, last_entry_id null, length 0; E distinct bookies."""
    before = int(time.time() * 1000)
    r = env.writer.request("POST", "/v1/ledgers")
    assert r.status_code == 201, r.text
    ledger = r.json()
    assert set(ledger) == LEDGER_KEYS
    assert (ledger["ensemble_size"], ledger["write_quorum"], ledger["ack_quorum"]) == (3, 2, 2)
    assert ledger["digest"] == "crc32c" and ledger["state"] == "OPEN"
    assert ledger["last_entry_id"] is None and ledger["length"] == 0
    assert ledger["metadata"] == {}
    assert before - 5000 <= ledger["created_at"] <= int(time.time() * 1000) + 5000
    (fragment,) = ledger["fragments"]
    assert fragment["first_entry_id"] == 0
    assert len(set(fragment["bookies"])) == 3
    assert set(fragment["bookies"]) == {b.address for b in env.bookies}
    assert env.writer.lac(ledger["ledger_id"]) == -1
    assert env.reader.lac(ledger["ledger_id"]) == -1
    assert env.reader.metadata(ledger["ledger_id"]) == ledger

    custom = env.writer.create(
        ensemble_size=2, write_quorum=2, ack_quorum=1, digest="none", metadata={"k": "v", "n": "1"}
    )
    assert (custom["ensemble_size"], custom["write_quorum"], custom["ack_quorum"]) == (2, 2, 1)
    assert custom["digest"] == "none" and custom["metadata"] == {"k": "v", "n": "1"}
    assert env.writer.add(custom["ledger_id"], b"e0")["entry_id"] == 0  # ids start at 0
    assert env.writer.close(custom["ledger_id"])["last_entry_id"] == 0


def test_empty_ledger_closes_at_minus_one(env: Env) -> None:
    """An empty CLOSED ledger has last_entry_id -1, length 0, no entries; entry 0 is 404."""
    lid = env.writer.create()["ledger_id"]
    closed = env.writer.close(lid)
    assert closed["state"] == "CLOSED" and closed["last_entry_id"] == -1
    assert closed["length"] == 0
    assert env.reader.lac(lid) == -1
    page = env.reader.page(lid)
    assert page == {"entries": [], "last_add_confirmed": -1, "next": None}
    assert_error(env.reader.request("GET", f"/v1/ledgers/{lid}/entries/0"), 404, "entry_not_found")
    # An empty ledger recovered from another gateway also ends at -1.
    other = env.writer.create()["ledger_id"]
    assert env.reader.recover(other)["last_entry_id"] == -1


def test_adds_answer_ids_in_order_and_content_types_decide(env: Env) -> None:
    """Single adds answer entry_id and a LAC >= it; batches answer first/last ids; a body
    with any content type but application/json (or none) is one raw entry."""
    lid = env.writer.create()["ledger_id"]
    w = env.writer
    r = w.request("POST", f"/v1/ledgers/{lid}/entries", content=b'{"entries": []}',
                  headers={"Content-Type": "text/plain"})  # fmt: skip
    assert r.status_code == 200 and r.json() == {"entry_id": 0, "last_add_confirmed": 0}
    r = w.request("POST", f"/v1/ledgers/{lid}/entries", content=b"no type")
    assert r.status_code == 200 and r.json()["entry_id"] == 1
    r = w.request("POST", f"/v1/ledgers/{lid}/entries", content=b"")
    assert r.status_code == 200 and r.json()["entry_id"] == 2  # an empty entry is an entry
    batch = w.add_batch(lid, [b"x", b"", b"z"])
    assert set(batch) == {"first_entry_id", "last_entry_id", "last_add_confirmed"}
    assert (batch["first_entry_id"], batch["last_entry_id"]) == (3, 5)
    assert batch["last_add_confirmed"] >= 5
    entries = w.read_all(lid)
    assert entries == list(enumerate([b'{"entries": []}', b"no type", b"", b"x", b"", b"z"]))
    assert w.entry(lid, 2) == b""
    r = w.request("GET", f"/v1/ledgers/{lid}/entries/0")
    assert r.headers["content-type"] == "application/octet-stream"


def test_only_the_writer_adds_and_closes(env: Env) -> None:
    """Adds and close on a gateway that does not hold the write handle: 409 not_writer,
    and nothing changes; the writer goes on."""
    lid = env.writer.create()["ledger_id"]
    env.writer.add(lid, b"zero")
    r = env.reader.request("POST", f"/v1/ledgers/{lid}/entries", content=b"x")
    assert_error(r, 409, "not_writer")
    r = env.reader.request("POST", f"/v1/ledgers/{lid}/entries", json={"entries": ["AAAA"]})
    assert_error(r, 409, "not_writer")
    assert_error(env.reader.request("POST", f"/v1/ledgers/{lid}/close"), 409, "not_writer")
    assert env.reader.metadata(lid)["state"] == "OPEN"
    assert env.writer.add(lid, b"one")["entry_id"] == 1


def test_close_twice_and_add_after_close(env: Env) -> None:
    """Close as the writer answers the CLOSED object with the exact length; closing
    again answers the same object; an add after our own close is 409 ledger_closed."""
    lid = env.writer.create()["ledger_id"]
    payloads = [payload_for(n, size=10 + n) for n in range(7)]
    env.writer.add_batch(lid, payloads[:4])
    for p in payloads[4:]:
        env.writer.add(lid, p)
    assert env.writer.metadata(lid)["length"] == sum(map(len, payloads))  # exact on the writer
    before_close = int(time.time() * 1000)
    assert env.writer.metadata(lid)["closed_at"] is None
    closed = env.writer.close(lid)
    assert closed["state"] == "CLOSED" and closed["last_entry_id"] == 6
    # Stamped by the write that closed it (ZooKeeper's clock is this machine's here).
    assert before_close - 5000 <= closed["closed_at"] <= int(time.time() * 1000) + 5000
    assert closed["length"] == sum(map(len, payloads))
    assert env.writer.close(lid) == closed
    assert env.reader.metadata(lid) == closed
    r = env.writer.request("POST", f"/v1/ledgers/{lid}/entries", content=b"late")
    assert_error(r, 409, "ledger_closed")
    r = env.writer.request("POST", f"/v1/ledgers/{lid}/entries", json={"entries": ["AAAA"]})
    assert_error(r, 409, "ledger_closed")
    assert env.writer.close(lid) == closed
    assert env.writer.lac(lid) == env.reader.lac(lid) == 6


def _poll_in_thread(gateway: Gateway, lid: int, after: int, wait_ms: int):  # type: ignore[no-untyped-def]
    result: dict[str, object] = {}

    def run() -> None:
        started = time.monotonic()
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            r = http.get(f"/v1/ledgers/{lid}/lac", params={"after": after, "wait_ms": wait_ms})
        result["elapsed"] = time.monotonic() - started
        result["response"] = r

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


@pytest.mark.parametrize("where", ["writer", "reader"])
@pytest.mark.parametrize("sizes", [(3, 2, 2), (3, 3, 3)], ids=["E3Qw2", "E3Qw3"])
def test_lac_long_poll_returns_on_the_next_add(env: Env, where: str, sizes) -> None:  # type: ignore[no-untyped-def]
    """LAC long poll (after=N&wait_ms=...), on the writer and on another gateway: answers
    as soon as an entry past N is acknowledged, well before wait_ms; with nothing new it
    answers the current LAC once wait_ms is up; on an empty ledger it waits too."""
    e, qw, qa = sizes
    lid = env.writer.create(ensemble_size=e, write_quorum=qw, ack_quorum=qa)["ledger_id"]
    gateway = env.writer if where == "writer" else env.reader

    # An empty ledger: the poll waits for the first entry.
    thread, result = _poll_in_thread(gateway, lid, -1, 10_000)
    time.sleep(0.3)  # not synchronisation: the poll must still be waiting after this
    assert thread.is_alive(), result.get("response")
    env.writer.add(lid, b"first")
    thread.join(15)
    assert result["response"].json() == {"last_add_confirmed": 0}
    assert result["elapsed"] < 5

    for n in range(1, 4):
        thread, result = _poll_in_thread(gateway, lid, n - 1, 10_000)
        time.sleep(0.2)
        assert thread.is_alive(), result.get("response")
        env.writer.add(lid, payload_for(n))
        thread.join(15)
        assert result["response"].status_code == 200
        assert result["response"].json()["last_add_confirmed"] >= n
        assert result["elapsed"] < 5, result["elapsed"]

    # Nothing new: the current LAC when the time is up.
    started = time.monotonic()
    assert gateway.lac(lid, after=3, wait_ms=600) == 3
    assert 0.5 <= time.monotonic() - started < 5
    # Already past `after`: at once, whatever wait_ms says (it is clamped, never refused).
    started = time.monotonic()
    assert gateway.lac(lid, after=1, wait_ms=10_000_000) == 3
    assert time.monotonic() - started < 2


def test_idle_writer_lac_update_reaches_other_readers(env: Env) -> None:
    """An idle writer sends an explicit LAC update: another gateway sees the last entry
    (LAC and read) without any further add."""
    lid = env.writer.create()["ledger_id"]
    for n in range(3):
        env.writer.add(lid, payload_for(n))
    env.writer.add_batch(lid, [payload_for(3), payload_for(4)])  # carries LAC 2 at most
    wait_for(lambda: env.reader.lac(lid) == 4, 5, "the reader to see LAC 4 with no new add")
    assert env.reader.entry(lid, 4) == payload_for(4)
    assert [d for _, d in env.reader.read_all(lid)] == [payload_for(n) for n in range(5)]


def test_paging_over_a_thousand_entries(env: Env) -> None:
    """Range reads answer at most 1,000 entries per page and `next` leads through the
    whole range until null, on the writer and on another gateway; `to` bounds it; NDJSON
    streams the whole range; a page also stops at 8 MiB of payload."""
    w, r = env.writer, env.reader
    lid = w.create()["ledger_id"]
    payloads = [f"p{n}".encode() for n in range(2_345)]
    w.add_batch(lid, payloads[:1_500])
    w.add_batch(lid, payloads[1_500:])
    wait_for(lambda: r.lac(lid) == 2_344, 5, "the reader to see every entry")
    for gateway in (w, r):
        nexts = []
        params: dict[str, int] = {}
        got: list[bytes] = []
        while True:
            page = gateway.page(lid, **params)
            assert len(page["entries"]) <= 1_000
            assert page["last_add_confirmed"] == 2_344
            got += [base64.b64decode(e["data"]) for e in page["entries"]]
            nexts.append(page["next"])
            if page["next"] is None:
                break
            params = {"from": page["next"]}
        assert nexts == [1_000, 2_000, None]
        assert got == payloads
        assert [d for _, d in gateway.read_ndjson(lid)] == payloads
    page = w.page(lid, **{"from": 10, "to": 1_509})
    assert [e["entry_id"] for e in page["entries"]] == list(range(10, 1_010))
    assert page["next"] == 1_010
    page = w.page(lid, **{"from": 1_010, "to": 1_509})
    assert len(page["entries"]) == 500 and page["next"] is None
    page = w.page(lid, **{"from": 5, "to": 5})
    assert page["entries"] == [{"entry_id": 5, "data": base64.b64encode(b"p5").decode()}]
    assert page["next"] is None

    big = w.create()["ledger_id"]
    mib = 1024 * 1024
    chunks = [bytes([n]) * (mib + 1) for n in range(10)]
    w.add_batch(big, chunks)
    w.close(big)
    page = r.page(big)
    assert 1 <= len(page["entries"]) < 10 and page["next"] == len(page["entries"])
    assert sum(len(base64.b64decode(e["data"])) for e in page["entries"]) <= 8 * mib
    assert [d for _, d in r.read_all(big)] == chunks


def _bookie_lac(url: str, lid: int) -> int | None:
    """The LAC a bookie stores for ``lid`` (None: it holds no record of it)."""
    r = poll_client().get(f"{url}/v1/ledgers/{lid}/lac", timeout=10.0)
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    lac: int = r.json()["lac"]
    return lac


def test_delete_removes_the_ledger_everywhere(env: Env) -> None:
    """Delete: 204; the ledger is gone for every gateway (404) and from the bookies;
    deleting again is 404."""
    lid = env.writer.create()["ledger_id"]
    env.writer.add_batch(lid, [b"a", b"b"])
    # Let the writer's idle LAC update land on every bookie first (the reader's LAC is 1
    # once one bookie has it): a late one to another bookie would leave a stub record
    # there after the delete.
    wait_for(
        lambda: all(_bookie_lac(b.url, lid) == 1 for b in env.bookies),
        10,
        "the writer's LAC update on every bookie",
    )
    assert env.reader.lac(lid) == 1
    assert env.reader.request("DELETE", f"/v1/ledgers/{lid}").status_code == 204
    for gateway in (env.writer, env.reader):
        assert_error(gateway.request("GET", f"/v1/ledgers/{lid}"), 404, "ledger_not_found")
        assert_error(gateway.request("DELETE", f"/v1/ledgers/{lid}"), 404, "ledger_not_found")
        assert_error(gateway.request("GET", f"/v1/ledgers/{lid}/entries"), 404, "ledger_not_found")
    for bookie in env.bookies:
        stored = poll_client().get(f"{bookie.url}/v1/ledgers/{lid}/lac")
        assert stored.status_code == 404, stored.text
    # (Not checked: an add on the writer after a delete elsewhere. As in BookKeeper, the
    # writer learns of the delete only through a later metadata write.)
    # Deleting on the writer forgets its handle too.
    mine = env.writer.create()["ledger_id"]
    assert env.writer.request("DELETE", f"/v1/ledgers/{mine}").status_code == 204
    r = env.writer.request("POST", f"/v1/ledgers/{mine}/entries", content=b"x")
    assert_error(r, 404, "ledger_not_found")


def test_list_pages_in_ascending_order(env: Env) -> None:
    """GET /v1/ledgers lists ids ascending; `next` passed as `after` walks every page."""
    created = [env.writer.create()["ledger_id"] for _ in range(5)]
    everything = env.reader.request("GET", "/v1/ledgers").json()
    assert everything["next"] is None
    ids = everything["ledgers"]
    assert ids == sorted(ids) and set(created) <= set(ids)
    walked: list[int] = []
    params: dict[str, int] = {"limit": 2}
    while True:
        page = env.reader.request("GET", "/v1/ledgers", params=params).json()
        assert len(page["ledgers"]) <= 2
        walked += page["ledgers"]
        if page["next"] is None:
            break
        params = {"limit": 2, "after": page["next"]}
    assert walked == ids
    tail = env.reader.request("GET", "/v1/ledgers", params={"after": ids[-2]}).json()
    assert tail == {"ledgers": [ids[-1]], "next": None}


def test_metrics_and_docs(env: Env) -> None:
    """/metrics shows the add and read latency histograms, in-flight adds, ensemble
    changes and recoveries, and they move; /docs is the interactive docs page and
    /openapi.json the exported openapi/gateway.json."""
    lid = env.writer.create()["ledger_id"]
    env.writer.add(lid, b"m")
    env.writer.entry(lid, 0)
    env.writer.page(lid)
    env.reader.recover(lid)
    w, r = env.writer.metrics(), env.reader.metrics()
    for name in (
        "quire_gateway_add_seconds_bucket",
        "quire_gateway_read_seconds_bucket",
        "quire_gateway_adds_in_flight",
        "quire_gateway_ensemble_changes_total",
        "quire_gateway_recoveries_total",
    ):
        assert name in w, name
    assert metric_value(w, "quire_gateway_add_seconds_count") >= 1
    assert metric_value(w, "quire_gateway_read_seconds_count") >= 2
    assert metric_value(w, "quire_gateway_adds_in_flight") == 0
    assert metric_value(r, "quire_gateway_recoveries_total", 'outcome="closed"') >= 1
    docs = env.writer.request("GET", "/docs")
    assert docs.status_code == 200 and "/openapi.json" in docs.text
    served = env.writer.request("GET", "/openapi.json").json()
    exported = Path(__file__).parents[2] / "openapi" / "gateway.json"
    assert served == json.loads(exported.read_text())


def test_close_while_appending(env: Env) -> None:
    """Close as writer with adds in flight: pending adds finish first, the last entry is
    >= every acknowledged id (all read back), later adds are 409 ledger_closed, and the
    write handle leaves the gateway's live handles at once."""
    handles = metric_value(env.writer.metrics(), "quire_gateway_write_handles")
    lid = env.writer.create()["ledger_id"]
    assert metric_value(env.writer.metrics(), "quire_gateway_write_handles") == handles + 1
    appender = Appender(env.writer.url, lid, batch=3).start()
    appender.wait_count(30)
    closed = env.writer.close(lid)
    wait_for(lambda: not appender.running, 20, "the appender to stop")
    assert appender.statuses[-1] == 409 and "ledger_closed" in appender.errors[-1]
    assert closed["last_entry_id"] >= max(appender.acked)
    check_read_back(
        env.reader.read_all(lid), closed["last_entry_id"], appender.acked, appender.sent
    )
    assert metric_value(env.writer.metrics(), "quire_gateway_write_handles") == handles
