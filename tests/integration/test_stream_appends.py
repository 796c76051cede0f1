"""Streaming appends over one WebSocket with real processes (ZooKeeper, three bookies,
gateways): every record acknowledged once and in order, errors mid-stream, a client
that goes away, credits, a client that never reads (bounded memory), auth, bad frames,
per-record idempotency keys, a gateway that shuts down mid-stream, and the gateway's
budget of all streams (docs/streaming.md; gateway/streams/session.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from websockets.exceptions import InvalidStatus

from services.bench import ws_frames
from services.cluster.processes import ZooKeeperProcess, poll_client
from services.limits import ENTRY_SIZE_MAX_BYTES
from services.web.limits import DRAIN_WAIT_S
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    metric_value,
    module_cluster,
    patient_writer,
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient
from tests.integration.stream_support import Stream
from tests.shared import StandardCluster, unique_name

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "stream-test-token"
SMALL_CREDITS = 8


@dataclass
class Gateways:
    cluster: Cluster
    a: Gateway  # no token
    b: Gateway  # no token: recovers and takes writer roles from a
    guarded: Gateway  # --api-token, few credits


@pytest.fixture(scope="module")
def gateways(shared_cluster: StandardCluster) -> Gateways:
    """The standard cluster's two plain gateways and one with an API token and few
    credits (tests/shared.py); every log name comes from ``unique_name``."""
    guarded = shared_cluster.gateway(
        ["--api-token", TOKEN, "--stream-credits", str(SMALL_CREDITS)], token=TOKEN
    )
    return Gateways(shared_cluster.cluster, shared_cluster.writer, shared_cluster.reader, guarded)


def records(count: int, start: int = 0) -> list[bytes]:
    return [payload_for(start + i, 100) for i in range(count)]


def test_ledger_stream_acknowledges_every_record_once_in_order(gateways: Gateways) -> None:
    """Every record sent is acknowledged once, in order, with ascending entry ids and a
    LAC at or past each; the ledger then holds exactly those records in that order."""
    gw = gateways.a
    lid = gw.create()["ledger_id"]
    sent = records(500)
    stream = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream")
    assert stream.credits == 1024
    assert stream.send_all(sent), stream.error
    assert stream.end() == 1000
    assert [a["seq"] for a in stream.acks] == list(range(len(sent)))
    assert [a["entry_id"] for a in stream.acks] == list(range(len(sent)))
    assert all(a["last_add_confirmed"] >= a["entry_id"] for a in stream.acks)
    assert gw.read_all(lid) == list(enumerate(sent))
    # The same handle serves REST adds after the stream.
    assert gw.add(lid, b"after")["entry_id"] == len(sent)


def test_log_stream_acknowledges_positions_in_log_order(gateways: Gateways) -> None:
    """A log stream's acknowledgements carry ascending positions; reading the log gives
    exactly the acknowledged records at those positions, in order."""
    name = unique_name("stream-order")
    client = LogClient(gateways.a.url)
    try:
        client.create(name)
        client.take_writer(name)
        sent = records(300)
        stream = Stream.open(gateways.a.url, f"/v1/logs/{name}/stream")
        assert stream.send_all(sent), stream.error
        assert stream.end() == 1000
        acked = [(a["position"]["ledger_id"], a["position"]["entry_id"]) for a in stream.acks]
        assert acked == sorted(acked) and len(set(acked)) == len(sent)
        assert client.read_all(name) == list(zip(acked, sent, strict=True))
    finally:
        client.close()


def test_ledger_fenced_mid_stream_reports_ledger_fenced_and_loses_nothing(
    gateways: Gateways,
) -> None:
    """A recovery from another gateway fences the ledger mid-stream: the stream answers
    ledger_fenced and closes with 4409; every acknowledged record is in the closed
    ledger, byte for byte."""
    lid = gateways.a.create()["ledger_id"]
    sent = records(2000)
    stream = Stream.open(gateways.a.url, f"/v1/ledgers/{lid}/stream")
    recovered = False
    for payload in sent:
        while stream.in_flight >= 32:
            assert stream.next_message() is not None, "closed without an error"
            if stream.error is not None:
                break
        if stream.error is not None:
            break
        if not recovered and len(stream.acks) >= 100:
            gateways.b.recover(lid)
            recovered = True
        if not stream.send(payload):
            break
    else:
        stream.drain()
    assert recovered
    assert stream.wait_closed() == 4409
    assert stream.error is not None and stream.error["error"] == "ledger_fenced", stream.error
    closed = gateways.b.metadata(lid)
    assert closed["state"] == "CLOSED"
    entries = gateways.b.read_all(lid)
    assert closed["last_entry_id"] >= stream.acks[-1]["entry_id"]
    assert entries[: len(stream.acks)] == [(a["entry_id"], sent[a["seq"]]) for a in stream.acks]
    assert [data for _, data in entries] == sent[: len(entries)]


def test_log_writer_taken_mid_stream_reports_not_writer_and_loses_nothing(
    gateways: Gateways,
) -> None:
    """Another gateway takes the log's writer role mid-stream: the stream answers
    not_writer (4409); every acknowledged record is in the log at its position."""
    name = unique_name("stream-handover")
    a, b = LogClient(gateways.a.url), LogClient(gateways.b.url)
    try:
        a.create(name)
        a.take_writer(name)
        sent = records(2000)
        stream = Stream.open(gateways.a.url, f"/v1/logs/{name}/stream")
        taken = False
        for payload in sent:
            while stream.in_flight >= 32 and stream.error is None:
                assert stream.next_message() is not None, "closed without an error"
            if stream.error is not None:
                break
            if not taken and len(stream.acks) >= 100:
                b.take_writer(name)
                taken = True
            if not stream.send(payload):
                break
        assert taken
        assert stream.wait_closed() == 4409
        assert stream.error is not None and stream.error["error"] == "not_writer", stream.error
        in_log = dict(b.read_all(name))
        for ack in stream.acks:
            position = (ack["position"]["ledger_id"], ack["position"]["entry_id"])
            assert in_log.get(position) == sent[ack["seq"]], ack
    finally:
        a.close()
        b.close()


FENCES = 3  # recoveries of the log's ledger under one stream
FENCE_EVERY_ACKS = 400
FENCED_STREAM_IN_FLIGHT = 512


def test_log_ledger_fenced_mid_stream_keeps_the_records_in_the_order_sent(
    gateways: Gateways,
) -> None:
    """Another gateway recovers (fences and closes) the log's current ledger under a
    stream with hundreds of records in flight, three times: the writer keeps its role,
    rolls and appends the cut-off groups again, and the stream goes on. Every record is
    acknowledged once, the acknowledgements' positions ascend in send order, and the
    log reads back exactly the records sent, in the order sent, at those positions."""
    name = unique_name("stream-fenced")
    client = LogClient(gateways.a.url)
    try:
        client.create(name)
        client.take_writer(name)
        sent = records(FENCES * FENCE_EVERY_ACKS + 2000)
        stream = Stream.open(gateways.a.url, f"/v1/logs/{name}/stream")
        fenced: list[int] = []
        for payload in sent:
            while stream.in_flight >= FENCED_STREAM_IN_FLIGHT and stream.error is None:
                assert stream.next_message() is not None, "closed without an error"
            assert stream.error is None, stream.error
            due = (len(fenced) + 1) * FENCE_EVERY_ACKS
            if len(fenced) < FENCES and len(stream.acks) >= due:
                ledger_id = client.show(name)["ledgers"][-1]
                # Only once the stream acknowledges in the newest ledger (so every group
                # cut off by the last fence landed again): a group fenced on three
                # ledgers in a row fails for good (not_writer), by design.
                if (
                    ledger_id not in fenced
                    and stream.acks[-1]["position"]["ledger_id"] == ledger_id
                ):
                    gateways.b.recover(ledger_id)
                    fenced.append(ledger_id)
            assert stream.send(payload)
        assert stream.drain(), stream.error
        assert stream.end() == 1000
        assert len(fenced) == FENCES
        acked = [(a["position"]["ledger_id"], a["position"]["entry_id"]) for a in stream.acks]
        descents = [
            (i, acked[i - 1], acked[i]) for i in range(1, len(acked)) if acked[i] <= acked[i - 1]
        ]
        assert not descents, f"{len(descents)} acknowledgements descend, first: {descents[:3]}"
        assert client.read_all(name) == list(zip(acked, sent, strict=True))
        assert len(client.show(name)["ledgers"]) > FENCES
    finally:
        client.close()


def test_client_gone_mid_stream_loses_nothing_and_the_handle_stays_usable(
    gateways: Gateways,
) -> None:
    """A client that drops the connection with records in flight: every acknowledged
    record is in the ledger, nothing else but records it sent, and a REST add then
    works on the same write handle."""
    gw = gateways.a
    lid = gw.create()["ledger_id"]
    sent = records(300)
    stream = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream")
    for payload in sent[:200]:
        assert stream.send(payload)
    while len(stream.acks) < 50:
        assert stream.next_message() is not None
    stream.conn.socket.close()  # no close handshake: gone
    stream.close()
    added = gw.add(lid, b"rest-after-stream")
    assert added["entry_id"] >= len(stream.acks)
    entries = gw.read_all(lid)
    for ack in stream.acks:
        assert entries[ack["entry_id"]] == (ack["entry_id"], sent[ack["seq"]])
    assert [data for _, data in entries[:-1]] == sent[: len(entries) - 1]
    assert entries[-1] == (added["entry_id"], b"rest-after-stream")


@pytest.mark.parametrize("bookie_back", [True, False], ids=["bookie back", "bookie still paused"])
def test_a_gateway_shutting_down_acknowledges_what_it_took_then_closes_with_1012(
    zookeeper: ZooKeeperProcess, tmp_path: Path, bookie_back: bool
) -> None:
    """SIGTERM to a gateway while 200 records of a stream wait for a paused bookie (E=3
    Qw=3 Qa=3, so every entry needs it), after 100 acknowledged. uvicorn's own shutdown
    closed the stream at once with 1012, and the 200 acknowledgements were lost even
    when their adds then succeeded.

    - Bookie back once the shutdown began: every one of the 300 records is acknowledged,
      in order, before the close with 1012 (service restart), with no error.
    - Bookie still paused: the stream is closed with 1012 once the drain's bound
      (``DRAIN_WAIT_S``) is over, with the 100 acknowledgements, and the shutdown goes on.

    Either way the gateway exits by itself, and the ledger, recovered by another gateway,
    holds every acknowledged record, and nothing but the records sent, in order."""
    with patient_writer(zookeeper, tmp_path) as (bookies, a, b):
        lid = a.create(ensemble_size=3, write_quorum=3, ack_quorum=3)["ledger_id"]
        sent = records(300)
        stream = Stream.open(a.url, f"/v1/ledgers/{lid}/stream")
        assert stream.send_all(sent[:100])
        bookies[0].pause()
        try:
            for payload in sent[100:]:
                assert stream.send(payload)
            # Every record taken and sent on to the bookies (counted once per bookie
            # until it answers; the paused one does not).
            wait_for(
                lambda: metric_value(a.metrics(), "quire_gateway_adds_in_flight") >= 200,
                20.0,
                "the gateway to take the 200 records",
            )
            assert len(stream.acks) == 100
            # Taken before the signal: the drain's timer starts after it, so the wait
            # measured from here is never shorter than the drain's bound, however late
            # this process notices the shutdown.
            began = time.monotonic()
            a.proc.signal(signal.SIGTERM)
            wait_for(
                lambda: "Shutting down" in a.proc.log_path.read_text(),
                20.0,
                "the gateway to begin its shutdown",
            )
            if bookie_back:
                bookies[0].resume()
            assert stream.wait_closed() == 1012
            waited = time.monotonic() - began
            assert stream.error is None, stream.error
            stream.close()
            acked = 300 if bookie_back else 100
            assert [ack["entry_id"] for ack in stream.acks] == list(range(acked))
            if not bookie_back:
                # (0.1 s: the loop's own clock, which the timer is set on, is coarser.)
                assert DRAIN_WAIT_S - 0.1 <= waited <= DRAIN_WAIT_S + 10, waited
            # It exits by itself (uvicorn re-raises the SIGTERM it handled, once done).
            assert a.proc.proc is not None
            assert a.proc.proc.wait(timeout=30) in (0, -signal.SIGTERM)
        finally:
            bookies[0].resume()
        b.recover(lid)
        in_ledger = [data for _, data in b.read_all(lid)]
        assert len(in_ledger) >= acked
        assert in_ledger == sent[: len(in_ledger)]


def test_streams_together_wait_for_the_gateways_budget(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """A gateway with 4 MiB for all its streams together (64 MiB per stream): while a
    paused bookie holds every add (E=3 Qw=3 Qa=3), a first stream has 12.5 MiB of records
    taken (the oldest stream never waits); a second stream's first record then waits for
    the budget (``quire_gateway_streams_waiting``), and nothing of the second stream is
    taken. Once the bookie is back, both streams are acknowledged in full, in order, and
    the budget holds nothing after they end."""
    size = 64 * 1024
    with module_cluster(zookeeper, tmp_path) as cluster:
        bookies = start_bookies(cluster, 3)
        args = ["--bookie-add-timeout-ms", "60000", "--streams-bytes-in-flight-max", "4194304"]
        gw = start_gateway(cluster, args)
        try:
            wait_writable(gw, 3)
            first_ledger, second_ledger = (
                gw.create(ensemble_size=3, write_quorum=3, ack_quorum=3)["ledger_id"]
                for _ in range(2)
            )
            first_records = [payload_for(i, size) for i in range(200)]
            second_records = [payload_for(1000 + i, size) for i in range(20)]
            first = Stream.open(gw.url, f"/v1/ledgers/{first_ledger}/stream")
            second = Stream.open(gw.url, f"/v1/ledgers/{second_ledger}/stream")

            def gauge(name: str) -> float:
                return metric_value(gw.metrics(), name)

            bookies[0].pause()
            try:
                for payload in first_records:
                    assert first.send(payload)
                wait_for(
                    lambda: gauge("quire_gateway_stream_in_flight_bytes") == 200 * size,
                    30.0,
                    "the first stream's records to be taken",
                )
                for payload in second_records:
                    assert second.send(payload)
                wait_for(
                    lambda: gauge("quire_gateway_streams_waiting") == 1,
                    30.0,
                    "the second stream to wait for the budget",
                )
                assert gauge("quire_gateway_stream_in_flight_bytes") == 200 * size
                assert gauge("quire_gateway_streams") == 2
                assert first.acks == [] and second.acks == []
            finally:
                bookies[0].resume()
            for stream, records_sent in ((first, first_records), (second, second_records)):
                assert stream.drain(), stream.error
                assert [ack["seq"] for ack in stream.acks] == list(range(len(records_sent)))
                assert stream.end() == 1000
                stream.close()
            wait_for(
                lambda: gauge("quire_gateway_streams") == 0,
                10.0,
                "both streams to end",
            )
            assert gauge("quire_gateway_stream_in_flight_bytes") == 0
            assert gauge("quire_gateway_streams_waiting") == 0
            assert [data for _, data in gw.read_all(first_ledger)] == first_records
            assert [data for _, data in gw.read_all(second_ledger)] == second_records
        finally:
            gw.close_client()


def test_credits_bound_the_records_in_flight(gateways: Gateways) -> None:
    """The gateway grants its credits; a client that sends exactly that many at once and
    reads nothing gets them all acknowledged; one record more than the credits, sent
    before any acknowledgement could come, is a protocol error (4400) and is not
    written."""
    gw = gateways.guarded
    lid = gw.create()["ledger_id"]
    stream = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream", token=TOKEN)
    assert stream.credits == SMALL_CREDITS
    stream.send_frames_at_once(records(SMALL_CREDITS))
    assert stream.drain()
    assert [a["entry_id"] for a in stream.acks] == list(range(SMALL_CREDITS))
    assert stream.end() == 1000

    over = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream", token=TOKEN)
    over.send_frames_at_once(records(SMALL_CREDITS + 1, start=100))
    assert over.wait_closed() == 4400
    assert over.error is not None and over.error["error"] == "invalid_argument"
    assert "credit" in over.error["message"]
    assert over.acks == []
    # Whatever the gateway fed before the refusal, nothing past the credits was written.
    assert gw.lac(lid) <= 2 * SMALL_CREDITS - 1


PUSHED_BYTES = 48 * 1024 * 1024  # what a client that never reads pushes at a gateway
RSS_GROWTH_MAX_BYTES = 24 * 1024 * 1024


def test_a_client_that_never_reads_cannot_grow_the_gateways_memory(gateways: Gateways) -> None:
    """A client that pushes 48 MiB of 1 KiB records at full speed over a raw socket and
    reads nothing until it is done: the gateway takes no more than its credits (the
    stream ends with 4400 invalid_argument once a record comes past them), its resident
    memory grows by less than 24 MiB meanwhile, what it acknowledged is in the ledger,
    and it stays healthy."""
    gw = gateways.a
    lid = gw.create()["ledger_id"]
    host, port = gw.url.removeprefix("http://").split(":")
    gateway = psutil.Process(gw.proc.pid)
    request, key = ws_frames.handshake(host, int(port), f"/v1/ledgers/{lid}/stream", {})
    with socket.socket() as sock:
        # A small receive buffer: the gateway's acknowledgements back up at once (on
        # loopback the kernel would otherwise take megabytes of them).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect((host, int(port)))
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            assert chunk, "the gateway closed during the handshake"
            answer += chunk
        head, _, early = answer.partition(b"\r\n\r\n")
        ws_frames.check_handshake(head + b"\r\n\r\n", key)
        rss_before = peak = gateway.memory_info().rss
        chunk = b"".join(
            ws_frames.encode_frame(ws_frames.OP_BINARY, payload_for(i, 1024)) for i in range(256)
        )  # record N carries payload_for(N % 256)
        pushed = 0
        while pushed < PUSHED_BYTES:
            try:
                sock.sendall(chunk)
            except OSError:  # the gateway gave up on us: also bounded
                break
            pushed += len(chunk)
            if pushed % (4 * 1024 * 1024) < len(chunk):
                peak = max(peak, gateway.memory_info().rss)
        peak = max(peak, gateway.memory_info().rss)
        assert peak - rss_before < RSS_GROWTH_MAX_BYTES, (rss_before, peak)

        reader = ws_frames.FrameReader()
        messages = reader.feed(early)
        while not any(opcode == ws_frames.OP_CLOSE for opcode, _ in messages):
            data = sock.recv(65536)
            assert data, "closed without a close frame"
            messages += reader.feed(data)
        texts = [json.loads(p) for op, p in messages if op == ws_frames.OP_TEXT]
        close = next(p for op, p in messages if op == ws_frames.OP_CLOSE)
        sock.sendall(ws_frames.encode_frame(ws_frames.OP_CLOSE, close[:2]))
    credits = texts[0]["credits"]
    acks = [t for t in texts if "seq" in t]
    error = texts[-1]
    assert int.from_bytes(close[:2], "big") == 4400
    assert error["error"] == "invalid_argument" and "credit" in error["message"]
    assert [a["seq"] for a in acks] == list(range(len(acks)))
    # Every record the gateway took was within its credits: far fewer than were pushed.
    written = gw.metadata(lid)["length"] // 1024
    assert len(acks) <= written <= len(acks) + credits < pushed // 1024
    entries = gw.read_all(lid) if acks else []
    for ack in acks:
        assert entries[ack["entry_id"]] == (ack["entry_id"], payload_for(ack["seq"] % 256, 1024))
    assert gw.request("GET", "/health").status_code == 200


def test_auth_needs_the_token_in_the_header_or_the_first_message(gateways: Gateways) -> None:
    """On a gateway with --api-token: no token → unauthorized and 4401 before any
    record is accepted; a wrong token in the auth message likewise; the token in the
    Authorization header or in the first message works."""
    gw = gateways.guarded
    lid = gw.create()["ledger_id"]
    refused = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream", expect_credits=False)
    refused.send(b"no token")
    assert refused.wait_closed() == 4401
    assert refused.error is not None and refused.error["error"] == "unauthorized"
    wrong = Stream.open(
        gw.url, f"/v1/ledgers/{lid}/stream", auth_message={"token": "wrong"}, expect_credits=False
    )
    assert wrong.wait_closed() == 4401
    assert gw.lac(lid) == -1

    by_message = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream", auth_message={"token": TOKEN})
    assert by_message.send_all([b"one"]) and by_message.end() == 1000
    by_header = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream", token=TOKEN)
    assert by_header.send_all([b"two"]) and by_header.end() == 1000
    assert gw.read_all(lid) == [(0, b"one"), (1, b"two")]


def test_ledger_password_in_the_header_or_the_auth_message(gateways: Gateways) -> None:
    """A ledger with a password: a wrong one is 4401 and writes nothing; the right one
    in the X-Ledger-Password header or in the auth message works."""
    gw = gateways.a
    lid = gw.create(password="s3cret")["ledger_id"]
    wrong = Stream.open(
        gw.url,
        f"/v1/ledgers/{lid}/stream",
        auth_message={"password": "nope"},
        expect_credits=False,
    )
    assert wrong.wait_closed() == 4401
    by_header = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream", password="s3cret")
    assert by_header.send_all([b"h"]) and by_header.end() == 1000
    by_message = Stream.open(
        gw.url, f"/v1/ledgers/{lid}/stream", auth_message={"password": "s3cret"}
    )
    assert by_message.send_all([b"m"]) and by_message.end() == 1000
    assert gw.read_all(lid, password="s3cret") == [(0, b"h"), (1, b"m")]


@pytest.mark.parametrize(
    ("frame", "close_code", "code"),
    [
        ("not json", 4400, "invalid_argument"),
        ('{"surprise": 1}', 4400, "invalid_argument"),
        ('{"key": "k"}', 4400, "invalid_argument"),  # keys are for logs
        (b"x" * (ENTRY_SIZE_MAX_BYTES + 1), 4413, "payload_too_large"),
    ],
    ids=["not-json", "unknown-message", "key-on-ledger", "oversized"],
)
def test_bad_frames_end_the_stream_with_an_error(
    gateways: Gateways, frame: str | bytes, close_code: int, code: str
) -> None:
    """A bad message is answered with its error and close code, after the records
    before it were acknowledged; the gateway stays healthy and the handle usable."""
    gw = gateways.a
    lid = gw.create()["ledger_id"]
    stream = Stream.open(gw.url, f"/v1/ledgers/{lid}/stream")
    assert stream.send_all([b"fine"])
    stream.conn.send(frame)
    assert stream.wait_closed() == close_code
    assert stream.error is not None and stream.error["error"] == code, stream.error
    assert gw.request("GET", "/health").status_code == 200
    assert gw.add(lid, b"still fine")["entry_id"] == 1


def test_bad_targets_are_refused_with_their_codes(gateways: Gateways) -> None:
    """A bad ledger id is 4400, an unknown ledger 4404, a ledger another gateway writes
    4409 not_writer, a log another live gateway writes 4409 (a stream is not forwarded),
    an unknown log 4404; a plain GET of a stream path (no upgrade) is 400."""
    elsewhere = unique_name("written-elsewhere")
    cases = [
        ("/v1/ledgers/abc/stream", 4400, "invalid_argument"),
        ("/v1/ledgers/999999999/stream", 4404, "ledger_not_found"),
        (f"/v1/ledgers/{gateways.b.create()['ledger_id']}/stream", 4409, "not_writer"),
        (f"/v1/logs/{unique_name('no-such-log')}/stream", 4404, "log_not_found"),
    ]
    b_logs = LogClient(gateways.b.url)
    b_logs.create(elsewhere)
    b_logs.take_writer(elsewhere)
    b_logs.close()
    cases.append((f"/v1/logs/{elsewhere}/stream", 4409, "not_writer"))
    for path, close_code, code in cases:
        stream = Stream.open(gateways.a.url, path, expect_credits=False)
        assert stream.wait_closed() == close_code, path
        assert stream.error is not None and stream.error["error"] == code, (path, stream.error)
    plain = poll_client().get(gateways.a.url + "/v1/ledgers/1/stream")
    assert plain.status_code == 400 and plain.json()["error"] == "invalid_argument"


def test_log_stream_idempotency_key_answers_the_first_position(gateways: Gateways) -> None:
    """A record sent with a key, then again with the same key on a new connection (a
    retry after a reconnect), is answered the same position and is in the log once;
    the same key with other bytes is idempotency_key_reused (4409)."""
    name = unique_name("stream-keys")
    client = LogClient(gateways.a.url)
    try:
        client.create(name)
        client.take_writer(name)
        first = Stream.open(gateways.a.url, f"/v1/logs/{name}/stream")
        assert first.send_all([b"r0", b"r1", b"r2"], keys=["k0", None, "k2"])
        first.close()
        again = Stream.open(gateways.a.url, f"/v1/logs/{name}/stream")
        assert again.send_all([b"r2", b"r3"], keys=["k2", "k3"])
        assert again.acks[0]["position"] == first.acks[2]["position"]
        assert again.end() == 1000
        assert [data for _, data in client.read_all(name)] == [b"r0", b"r1", b"r2", b"r3"]
        reused = Stream.open(gateways.a.url, f"/v1/logs/{name}/stream")
        reused.send(b"other bytes", key="k0")
        assert reused.wait_closed() == 4409
        assert reused.error is not None and reused.error["error"] == "idempotency_key_reused"
    finally:
        client.close()


def test_a_log_stream_takes_a_log_with_no_writer(gateways: Gateways) -> None:
    """A stream opened on a gateway for a log nobody writes takes the role there (as a
    first append does) and its records land."""
    name = unique_name("stream-takes")
    client = LogClient(gateways.b.url)
    try:
        client.create(name)
        stream = Stream.open(gateways.a.url, f"/v1/logs/{name}/stream")
        assert stream.send_all([b"s0", b"s1"])
        assert stream.end() == 1000
        assert client.show(name)["writer"]["gateway"] == gateways.a.proc.address
        writer = LogClient(gateways.a.url)  # its handle knows the last record confirmed
        assert [data for _, data in writer.read_all(name)] == [b"s0", b"s1"]
        writer.close()
    finally:
        client.close()


def test_error_message_is_json_with_code_and_message(gateways: Gateways) -> None:
    """Every server message is a JSON text message; an error has exactly error and
    message (as REST error bodies)."""
    stream = Stream.open(gateways.a.url, "/v1/ledgers/abc/stream", expect_credits=False)
    text = stream.conn.recv(timeout=10)
    assert isinstance(text, str)
    assert set(json.loads(text)) == {"error", "message"}
    stream.close()


def test_websocket_to_an_unknown_path_gets_an_http_error(gateways: Gateways) -> None:
    """An upgrade to a path with no WebSocket is refused in the handshake with an HTTP
    error: 401 first when a required token is missing (as unknown /v1 routes), else
    404."""
    with pytest.raises(InvalidStatus) as refused:
        Stream.open(gateways.guarded.url, "/v1/nope", expect_credits=False)
    assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as missing:
        Stream.open(gateways.guarded.url, "/v1/nope", token=TOKEN, expect_credits=False)
    assert missing.value.response.status_code == 404
    assert json.loads(missing.value.response.body or b"{}")["error"] == "not_found"


def quire(gateway: str, *args: str, stdin: bytes = b"") -> dict[str, Any]:
    """Run ``python -m services.cli`` from this checkout; its JSON summary (exit 0)."""
    proc = subprocess.run(
        [sys.executable, "-m", "services.cli", "--gateway", gateway, *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_cli_log_append_stream_appends_once_with_keys(gateways: Gateways) -> None:
    """`quire log append --stream --key K` sends stdin's lines over one stream; the
    same command run again appends nothing more and prints the same positions."""
    name = unique_name("stream-cli")
    client = LogClient(gateways.a.url)
    try:
        client.create(name)
        client.take_writer(name)
        lines = b"".join(b"line-%d\n" % i for i in range(50))
        args = ("log", "append", name, "--stream", "--key", "cli-run", "-q")
        first = quire(gateways.a.url, *args, stdin=lines)
        assert first["records"] == 50 and first["bytes"] == len(lines) - 50
        again = quire(gateways.a.url, *args, stdin=lines)
        assert again["first_position"] == first["first_position"]
        assert again["last_position"] == first["last_position"]
        data = [d for _, d in client.read_all(name)]
        assert data == [b"line-%d" % i for i in range(50)]
    finally:
        client.close()
