"""The idempotency window of a log across hand-overs, with real processes (docs/logs.md,
Idempotency-Key; gateway/logs/rebuild.py, dedup.py, steps.py): a window rebuilt from a
log whose tail holds attached task ledgers stamped minutes before they were attached,
and a retry whose earlier attempt had an unknown outcome in a ledger truncated since."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from services.cluster.processes import ServiceProcess, ZooKeeperProcess
from services.protocol import log_records
from tests.harness import wait_for
from tests.integration.gateway_support import (
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient, error_code

# A short window (and the rebuild's clock-skew allowance, gateway/logs/dedup.py
# DEDUP_CLOCK_SKEW_MS) so that a ledger can be "older than the window" within a test's time.
WINDOW_S = 8.0
CLOCK_SKEW_S = 5.0
GATEWAY_FLAGS = ["--idempotency-window-s", str(WINDOW_S), "--log-settle-timeout-ms", "300"]


@dataclass
class Env:
    bookies: list[ServiceProcess]
    a: LogClient
    b: LogClient


@pytest.fixture(scope="module")
def env(zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """Three bookies and two gateways with a short idempotency window; B gives up on a
    bookie that does not answer within a second (a recovery against paused bookies fails
    fast, leaving its ledger IN_RECOVERY)."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("logs-dedup-window")) as c:
        bookies = start_bookies(c, 3)
        a = start_gateway(c, GATEWAY_FLAGS)
        b = start_gateway(c, [*GATEWAY_FLAGS, "--bookie-request-timeout-ms", "1000"])
        for g in (a, b):
            wait_writable(g, 3)
            g.close_client()
        clients = Env(bookies, LogClient(a.proc.url), LogClient(b.proc.url))
        try:
            yield clients
        finally:
            clients.a.close()
            clients.b.close()
            for proc in bookies:
                proc.resume()


def task_ledger(g: LogClient, log: str, records: list[bytes]) -> int:
    """A CLOSED ledger written the way a Spark task writes one: made for ``log`` (custom
    metadata quire.log, quire.job, quire.task), its records in their envelope stamped now."""
    meta = {"quire.log": log, "quire.job": "job-1", "quire.task": "0.0"}
    r = g.http.post("/v1/ledgers", json={"metadata": meta})
    assert r.status_code == 201, r.text
    lid = int(r.json()["ledger_id"])
    entries = log_records.encode(records, int(time.time() * 1000))
    body = {"entries": [base64.b64encode(e).decode() for e in entries]}
    assert g.http.post(f"/v1/ledgers/{lid}/entries", json=body).status_code == 200
    assert g.http.post(f"/v1/ledgers/{lid}/close").status_code == 200
    return lid


def test_a_key_before_attached_older_ledgers_is_found_after_a_hand_over(env: Env) -> None:
    """A keyed append, then an attach of task ledgers created (and their records stamped)
    longer ago than the window, then a hand-over: the new writer's rebuilt window still
    holds the key (the walk back through the log does not stop at the attached ledgers'
    old stamps), so the retry answers the original position and the record is in the
    log once."""
    a, b = env.a, env.b
    name = "attached-older-than-window"
    a.create(name)
    a.take_writer(name)
    task = task_ledger(b, name, [b"task-0", b"task-1"])
    made_at = time.time()
    # Let the task ledger (creation time and record stamps) fall out of the window as the
    # next rebuild reckons it, before the keyed append is made.
    while time.time() < made_at + WINDOW_S + CLOCK_SKEW_S + 1.5:
        time.sleep(0.2)
    appended = a.append(name, [b"order-1"], key="order-1")
    r = b.http.post(f"/v1/logs/{name}/ledgers", json={"ledgers": [task]})
    assert r.status_code == 200, r.text
    assert r.json()["log"]["ledgers"][-1] == task
    b.take_writer(name)
    retried = b.append(name, [b"order-1"], key="order-1")
    assert retried == appended
    datas = [d for _, d in b.read_all(name)]
    assert datas.count(b"order-1") == 1 and datas == [b"order-1", b"task-0", b"task-1"]


def test_an_unknown_outcome_in_a_truncated_ledger_is_reported_not_appended_again(
    env: Env,
) -> None:
    """A keyed append fails with an unknown outcome (its ledger fenced by a recovery that
    cannot finish yet, so it does not close within the settle time); the ledger is later
    recovered, rolled past and truncated away. The retry with the same key, on the same
    writer, is 409 ledger_fenced (the outcome can no longer be settled) and appends
    nothing, again on a second retry."""
    a, b = env.a, env.b
    name = "unknown-then-truncated"
    a.create(name)
    a.take_writer(name)
    ((ledger, first),) = a.append(name, [b"before"])
    r = a.http.get(f"/v1/ledgers/{ledger}")
    assert r.status_code == 200, r.text
    ensemble = r.json()["fragments"][0]["bookies"]
    # The next entry's write set (E=3, Qw=2: indexes n, n+1) holds ensemble[n % 3]: that
    # bookie stays up and is fenced, so the append fails at once with ledger_fenced.
    fenced = ensemble[(first + 1) % 3]
    paused = [p for p in env.bookies if p.address != fenced]
    assert len(paused) == 2
    for proc in paused:
        proc.pause()
    try:
        r = b.http.post(f"/v1/ledgers/{ledger}/recover")
        assert r.status_code == 503, r.text
    finally:
        for proc in paused:
            proc.resume()
    r = b.http.get(f"/v1/ledgers/{ledger}")
    assert r.json()["state"] == "IN_RECOVERY", r.text

    r = a.append_raw(name, [b"order-7"], key="order-7")
    assert (r.status_code, error_code(r)) == (409, "ledger_fenced"), r.text

    def recovered() -> bool:
        answer = b.http.post(f"/v1/ledgers/{ledger}/recover")
        return answer.status_code == 200 and answer.json()["state"] == "CLOSED"

    wait_for(recovered, 30.0, f"ledger {ledger} to be recovered")
    rolled = a.roll(name)
    a.truncate(name, (rolled, 0))
    assert ledger not in a.show(name)["ledgers"]
    for _ in range(2):
        r = a.append_raw(name, [b"order-7"], key="order-7")
        assert (r.status_code, error_code(r)) == (409, "ledger_fenced"), r.text
        assert "truncated" in r.json()["message"], r.text
    assert b"order-7" not in [d for _, d in a.read_all(name)]
