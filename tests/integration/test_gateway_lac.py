"""The LAC a non-writer gateway reports never goes backwards (issue 7 item 9), on a real
cluster: the gateway keeps the highest LAC it learnt from bookies, so bookies that
answer a lower one later (a bookie that lost its disk, one that just joined) do not
lower it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest

from services.cluster.processes import poll_client
from tests.harness import wait_for
from tests.integration.bookie_support import Bookie
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    metric_value,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)


@dataclass
class Env:
    writer: Gateway
    reader: Gateway
    bookies: list


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("gateway-lac")) as cluster:
        bookies = start_bookies(cluster, 3)
        writer = start_gateway(cluster)
        reader = start_gateway(cluster)
        wait_writable(writer, 3)
        yield Env(writer, reader, bookies)


def _bookie_lac(url: str, lid: int) -> int | None:
    r = poll_client().get(f"{url}/v1/ledgers/{lid}/lac", timeout=10.0)
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    return r.json()["lac"]


def test_a_non_writer_lac_never_goes_backwards(env: Env) -> None:
    """The reader gateway learnt LAC 4 from the bookies. Then every bookie loses the
    ledger (deleted on the bookie, as a reformatted disk would) and one is told LAC 1:
    the bookies now answer at most 1, yet the reader still reports 4 (a LAC read, and a
    long poll for after=2 answers 4 at once). The next entry moves it on to 5."""
    lid = env.writer.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    env.writer.add_batch(lid, [b"e%d" % n for n in range(5)])
    urls = [b.url for b in env.bookies]
    # The writer's idle LAC update (sent once) reached every bookie: nothing more comes.
    wait_for(lambda: all(_bookie_lac(u, lid) == 4 for u in urls), 10, "LAC 4 on every bookie")
    assert env.reader.lac(lid) == 4
    for url in urls:
        assert poll_client().delete(f"{url}/v1/ledgers/{lid}", timeout=10.0).status_code == 204
    r = poll_client().post(f"{urls[0]}/v1/ledgers/{lid}/lac", json={"lac": 1}, timeout=10.0)
    assert r.status_code == 200, r.text
    assert [_bookie_lac(u, lid) for u in urls] == [1, None, None]
    assert env.reader.lac(lid) == 4
    started = time.monotonic()
    assert env.reader.lac(lid, after=2, wait_ms=5_000) == 4
    # At once: 4 s leaves a loaded machine room and still fails a poll that waited for
    # its 5 s (the bookies' LAC 1 is not after 2; only the remembered 4 answers it).
    assert time.monotonic() - started < 4.0
    assert env.writer.add(lid, b"e5")["entry_id"] == 5
    wait_for(lambda: env.reader.lac(lid) == 5, 10, "the reader to see LAC 5")


def test_a_lac_long_poll_on_a_ledger_deleted_meanwhile_answers_not_found_at_once(
    env: Env,
) -> None:
    """A tailing reader's 20 s LAC poll on an open ledger, on the writer gateway (its
    wait on the write handle) and on another gateway (its long polls to the bookies):
    once the ledger is deleted each answers within seconds, not at its time-out, and
    says 404 ``ledger_not_found``: the writer's handle is stopped by the delete, and the
    bookies end their polls, after which the other gateway finds the ledger gone."""
    lid = env.writer.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    env.writer.add(lid, b"e0")
    bookies = [Bookie(proc) for proc in env.bookies]
    try:
        wait_for(
            lambda: all(b.lac(lid)["last_entry_id"] == 0 for b in bookies),
            10,
            "entry 0 on every bookie",
        )
        answers: dict[str, httpx.Response] = {}

        def poll(name: str, gateway: Gateway) -> None:
            answers[name] = gateway.request(
                "GET", f"/v1/ledgers/{lid}/lac", params={"after": 0, "wait_ms": 20_000}
            )

        with ThreadPoolExecutor(2) as pool:
            polls = [
                pool.submit(poll, "writer", env.writer),
                pool.submit(poll, "reader", env.reader),
            ]
            wait_for(
                lambda: (
                    all(
                        metric_value(g.metrics(), "quire_gateway_long_polls_waiting") >= 1
                        for g in (env.writer, env.reader)
                    )
                    and all(b.metric("quire_bookie_lac_polls_waiting") >= 1 for b in bookies)
                ),
                10,
                "both polls waiting, the reader's on every bookie",
            )
            started = time.monotonic()
            assert env.writer.request("DELETE", f"/v1/ledgers/{lid}").status_code == 204
            for f in polls:
                f.result(timeout=25)
            took = time.monotonic() - started
    finally:
        for b in bookies:
            b.close()
    assert took < 10
    for name in ("writer", "reader"):
        assert_error(answers[name], 404, "ledger_not_found")
