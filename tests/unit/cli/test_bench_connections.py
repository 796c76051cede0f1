"""The REST load generator's connections (services/bench/connections.py) against a small
HTTP/1.1 server on 127.0.0.1 that answers in pieces, closes some connections after an
answer, refuses some requests and leaves one unanswered: every answer is counted once,
refusals and time-outs are errors with their reason, and the run ends on time."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.bench import limits as bench_limits
from services.bench.load import GatewayLoad
from tests.scripted_http import Script, ScriptedServer


def answers(hang_after: int | None = None) -> Script:
    """200 with a body written in two pieces, every 4th with ``Connection: close`` (then
    the connection closes), every 10th a 503; after ``hang_after`` requests, no answer."""

    async def script(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if hang_after is not None and n > hang_after:
            await asyncio.sleep(3600)
        status = b"503 Service Unavailable" if n % 10 == 0 else b"200 OK"
        close = n % 4 == 0
        body = b'{"entry_id": %d}' % n
        writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-length: %d\r\n" % len(body))
        writer.write(b"connection: close\r\n\r\n" if close else b"\r\n")
        await writer.drain()
        writer.write(body)
        await writer.drain()
        return not close

    return script


def _spec(port: int, duration_s: float) -> dict:
    return {
        "host": "127.0.0.1",
        "port": port,
        "client_ledgers": [[1, 2], [3]],
        "batch": 1,
        "entry_size": 16,
        "duration_s": duration_s,
        "warmup_s": 0.0,
        "start_at": time.time(),
        "progress_interval_s": 60,
    }


async def _run(server: ScriptedServer, duration_s: float) -> tuple[GatewayLoad, dict, float]:
    listener = await server.start()
    port = listener.sockets[0].getsockname()[1]
    load = GatewayLoad(_spec(port, duration_s))
    load.emit = lambda doc: None  # type: ignore[method-assign]
    started = time.perf_counter()
    try:
        result = await load.run()
    finally:
        listener.close()
    return load, result, time.perf_counter() - started


def test_every_answer_is_counted_once_and_refusals_are_errors() -> None:
    server = ScriptedServer(answers())
    load, result, _ = asyncio.run(_run(server, 0.5))
    answered = len(server.requests)
    refused = answered // 10
    assert answered > 20
    # Each answer read is a request counted or an error (the last may land after the end).
    assert answered - 2 <= result["requests"] + result["errors"] <= answered
    assert refused - 1 <= result["errors"] <= refused
    assert result["first_error"].startswith('HTTP 503: {"entry_id": 10}')
    assert result["requests"] == result["entries"] == result["payload_bytes"] // 16
    assert sum(result["histogram"].values()) == result["requests"]
    # The connections closed by the server were replaced, and every request was whole.
    assert server.connections >= answered // 4
    heads = {head.split(b" ")[1] for head, _ in server.requests}
    assert heads == {b"/v1/ledgers/1/entries", b"/v1/ledgers/2/entries", b"/v1/ledgers/3/entries"}
    assert {body for _, body in server.requests} == {load.payload}


def test_an_unanswered_request_times_out_as_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_limits, "REQUEST_TIMEOUT_S", 0.3)
    monkeypatch.setattr(bench_limits, "WATCH_INTERVAL_S", 0.05)
    server = ScriptedServer(answers(hang_after=3))  # the 4th request on hang
    _, result, elapsed = asyncio.run(_run(server, 1.0))
    assert result["requests"] == 3
    assert result["first_error"] == "TimeoutError: no answer within 0.3s"
    # One time-out per hung request while counting (each on a new connection).
    assert 2 <= result["errors"] <= 4
    # The requests hung at the end were timed out too: 1.3 s nominal; a run that waited
    # for them (the server holds them an hour) or for the default 60 s time-out fails.
    assert elapsed < 3.0
