"""All REST add bodies of a gateway share one byte budget
(``--requests-bytes-in-flight-max``), on every path a body takes: the protocol's lane (a
plain add), the ASGI fast path (a chunked add) and FastAPI's routes (``--no-fast-path``).
Real processes: a request that finds the budget spent waits, unanswered, while another
holds it, and is served once it comes back; the oldest request never waits, so a body
larger than the whole budget is still served, and the time a request waits for budget
does not count against its body's time-out."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest

from services.cluster.processes import ServiceProcess, poll_client
from tests.harness import wait_for
from tests.integration.gateway_support import (
    Gateway,
    metric_value,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.shared import StandardCluster

BUDGET = 1024 * 1024
BYTES = "quire_gateway_request_body_bytes"
WAITING = "quire_gateway_requests_waiting"


@dataclass
class Gateways:
    fast: Gateway
    routed: Gateway


@pytest.fixture(scope="module")
def gateways(shared_cluster: StandardCluster) -> Gateways:
    """Two gateways of the standard cluster (tests/shared.py) with a 1 MiB body budget:
    started for these flags, which no other test asks for, so the budget gauges move
    only with this module's requests."""
    budget = ["--requests-bytes-in-flight-max", str(BUDGET)]
    return Gateways(
        shared_cluster.gateway(budget), shared_cluster.gateway([*budget, "--no-fast-path"])
    )


def _gauges(gateway: Gateway) -> tuple[float, float]:
    text = gateway.metrics()
    return metric_value(text, BYTES), metric_value(text, WAITING)


def _post(url: str, lid: int, content: object) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=60.0) as client:
        return client.post(
            f"/v1/ledgers/{lid}/entries",
            content=content,  # type: ignore[arg-type]
            headers={"Content-Type": "application/octet-stream"},
        )


@pytest.mark.parametrize("path", ["fast", "routed"])
def test_adds_wait_for_the_body_budget_while_another_holds_it(
    gateways: Gateways, path: str
) -> None:
    """A holds 800 KB of its body's 900 KB (its last bytes not sent); B (a plain add of
    500 KB) and C (a chunked add of 300 KB) then find the 1 MiB budget spent: both wait
    and are not answered, the budget in use never past it. Once A's last bytes arrive,
    all three are answered and stored whole, and the budget is all given back."""
    gateway = getattr(gateways, path)
    lid = gateway.create()["ledger_id"]
    host, port = gateway.url.removeprefix("http://").split(":")
    a_body, b_body = b"a" * 900_000, b"b" * 500_000
    c_pieces = [bytes([99 + i]) * 100_000 for i in range(3)]
    with socket.create_connection((host, int(port)), timeout=60) as a:
        a.sendall(
            b"POST /v1/ledgers/%d/entries HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n"
            % (lid, len(a_body))
            + a_body[:800_000]
        )
        wait_for(lambda: _gauges(gateway)[0] >= 700_000, 10, "A's bytes taken from the budget")
        with ThreadPoolExecutor(2) as pool:
            b = pool.submit(_post, gateway.url, lid, b_body)
            c = pool.submit(_post, gateway.url, lid, iter(c_pieces))  # chunked
            wait_for(lambda: _gauges(gateway)[1] == 2, 10, "B and C waiting for the budget")
            in_use, _ = _gauges(gateway)
            assert in_use <= BUDGET
            assert not b.done() and not c.done()
            a.sendall(a_body[800_000:])
            answer = a.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 "), answer
            answers = [b.result(timeout=60), c.result(timeout=60)]
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
    ids = sorted(r.json()["entry_id"] for r in answers)
    assert ids == [1, 2]
    stored = {eid: gateway.entry(lid, eid) for eid in range(3)}
    assert stored[0] == a_body
    assert sorted([stored[1], stored[2]]) == sorted([b_body, b"".join(c_pieces)])
    wait_for(lambda: _gauges(gateway) == (0.0, 0.0), 10, "the budget given back")


def test_a_create_with_a_large_body_waits_for_the_budget_too(gateways: Gateways) -> None:
    """The small JSON bodies of other calls (here a create of 400 KB, mostly white space)
    take from the same budget while they are read: it waits behind a held add body."""
    gateway = gateways.fast
    lid = gateway.create()["ledger_id"]
    host, port = gateway.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as a:
        a.sendall(
            b"POST /v1/ledgers/%d/entries HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n" % lid + b"a" * 800_000
        )
        wait_for(lambda: _gauges(gateway)[0] >= 700_000, 10, "A's bytes taken from the budget")
        with ThreadPoolExecutor(1) as pool:
            body = b" " * 400_000 + b'{"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2}'
            create = pool.submit(
                lambda: poll_client().post(
                    gateway.url + "/v1/ledgers",
                    content=body,
                    headers={"Content-Type": "application/json"},
                    timeout=60,
                )
            )
            wait_for(lambda: _gauges(gateway)[1] == 1, 10, "the create waiting for the budget")
            assert not create.done()
            a.sendall(b"a" * 100_000)
            assert a.recv(65536).startswith(b"HTTP/1.1 200 ")
            r = create.result(timeout=60)
    assert r.status_code == 201, r.text
    assert r.json()["ensemble_size"] == 3
    wait_for(lambda: _gauges(gateway) == (0.0, 0.0), 10, "the budget given back")


@pytest.mark.parametrize("path", ["fast", "routed"])
def test_a_body_larger_than_the_whole_budget_is_served(gateways: Gateways, path: str) -> None:
    """The oldest request may always take what it needs: a 2 MiB add through a 1 MiB
    budget is stored, and the budget comes back."""
    gateway = getattr(gateways, path)
    lid = gateway.create()["ledger_id"]
    body = bytes(range(256)) * 8192
    r = _post(gateway.url, lid, body)
    assert r.status_code == 200, r.text
    assert gateway.entry(lid, r.json()["entry_id"]) == body
    wait_for(lambda: _gauges(gateway) == (0.0, 0.0), 10, "the budget given back")


@dataclass
class Patient:
    bookies: list[ServiceProcess]
    fast: Gateway
    routed: Gateway


BODY_TIMEOUT_MS = 1000


@pytest.fixture(scope="module")
def patient(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Patient]:  # type: ignore[no-untyped-def]
    """Gateways that wait 60 s for a bookie's add (a paused bookie is waited for, not
    replaced) and read a body for at most 1 s."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("body-budget-wait")) as cluster:
        bookies = start_bookies(cluster, 3)
        args = [
            "--requests-bytes-in-flight-max",
            str(BUDGET),
            "--bookie-add-timeout-ms",
            "60000",
            "--body-read-timeout-ms",
            str(BODY_TIMEOUT_MS),
        ]
        fast = start_gateway(cluster, args)
        routed = start_gateway(cluster, [*args, "--no-fast-path"])
        try:
            wait_writable(fast, 3)
            wait_writable(routed, 3)
            yield Patient(bookies, fast, routed)
        finally:
            fast.close_client()
            routed.close_client()


@pytest.mark.parametrize("path", ["fast", "routed"])
def test_waiting_for_the_budget_does_not_count_against_the_body_time_out(
    patient: Patient, path: str
) -> None:
    """A's whole body (900 KB) holds the budget while its add waits for a paused bookie
    (E=3 Qw=3 Qa=3); B (plain) and C (chunked) wait for budget two and a half body
    time-outs, then, once the bookie is back, are served: no 408. (C's body, 1.2 MB, is
    more than the whole budget: it is served once it is the oldest.)"""
    gateway = getattr(patient, path)
    lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=3)["ledger_id"]
    # More than the server reads ahead of the application, so C's body is still being
    # read while it waits.
    c_pieces = [bytes([99 + i]) * 300_000 for i in range(4)]
    bookie = patient.bookies[0]
    bookie.pause()
    try:
        with ThreadPoolExecutor(3) as pool:
            a = pool.submit(_post, gateway.url, lid, b"a" * 900_000)
            wait_for(lambda: _gauges(gateway)[0] >= 900_000, 10, "A's body held")
            b = pool.submit(_post, gateway.url, lid, b"b" * 500_000)
            c = pool.submit(_post, gateway.url, lid, iter(c_pieces))
            wait_for(lambda: _gauges(gateway)[1] == 2, 10, "B and C waiting for the budget")
            time.sleep(2.5 * BODY_TIMEOUT_MS / 1000)  # no 408 may come meanwhile
            assert not a.done() and not b.done() and not c.done()
            bookie.resume()
            answers = [f.result(timeout=60) for f in (a, b, c)]
    finally:
        bookie.resume()
    assert [r.status_code for r in answers] == [200, 200, 200], [r.text for r in answers]
    assert sorted(r.json()["entry_id"] for r in answers) == [0, 1, 2]
    wait_for(lambda: _gauges(gateway) == (0.0, 0.0), 10, "the budget given back")
