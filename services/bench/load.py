"""The load generator of ``quire bench``, run in its own process (services/bench/load_process.py),
and the pieces it shares with benchmarks/_load.py (the bookie benchmark's generator).

Why a separate process on raw sockets: an ``httpx.AsyncClient`` with a large pool
serves far fewer requests a second than the gateway does (encode/httpx#3215), and a
generator in the orchestrator's process would compete with its sampling. Here each
simulated client owns one keep-alive HTTP/1.1 connection (an asyncio
``Protocol``, services/bench/connections.py; uvloop when installed), keeps one
request in flight, and cycles over its ledgers (``client_ledgers[i]``):
``POST /v1/ledgers/{id}/entries`` with one raw entry (``batch`` 1) or a JSON
batch of ``batch`` base64 entries. Bodies are built once; the next request
leaves from the callback that read the last answer, and one watchdog
(``watch``) times out answers that do not come, instead of a task and a timer
per request. The generator shares the machine's cores with what it measures, so it
is built to use as little of them as it can (the figures: benchmarks/README.md,
"Measured choices").

Latency is measured from the write of a request to the last byte of its
answer. With ``rate`` > 0 each client sends on a fixed schedule (open loop,
``clients / rate`` seconds apart, clients evenly staggered) and sends at once
when it is behind; latency still starts at the write. Counting starts after
``warmup_s`` and lasts ``duration_s``; answers arriving later are not counted.

Output on stdout, one JSON object per line: ``{"type": "progress", ...}``
every ``progress_interval_s`` (counted so far), then ``{"type": "result",
...}`` with counts, a latency histogram (log buckets of 2 %, mergeable across
processes) and the CPU time this process used, so the orchestrator can show
that the generator was not the limit.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from services.bench import limits
from services.bench.connections import LoadConnection, Pacing, RequestConnection, parse_head
from services.bench.histogram import percentile_s
from services.bench.limits import ERROR_TEXT_MAX_CHARS, PROGRESS_INTERVAL_S, RECONNECT_DELAY_S
from services.tls.contexts import verifying_context

T = TypeVar("T")


# -- raw HTTP/1.1 (shared with benchmarks/) ------------------------------------


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """One HTTP/1.1 answer with a Content-Length body: (status, body, keep_alive)."""
    status, length, keep_alive = parse_head(await reader.readuntil(b"\r\n\r\n"))
    body = await reader.readexactly(length) if length else b""
    return status, body, keep_alive


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes, body: bytes
) -> tuple[int, bytes, bool]:
    """Write one request (head and body), read its answer."""
    if len(body) < 256 * 1024:
        writer.write(head + body)
    else:
        writer.write(head)
        writer.write(body)
    await writer.drain()
    return await read_response(reader)


# -- the gateway load ----------------------------------------------------------


@dataclass
class Stats:
    requests: int = 0
    entries: int = 0
    payload_bytes: int = 0
    errors: int = 0
    histogram: dict[int, int] = field(default_factory=dict)
    first_error: str | None = None

    def error(self, text: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = text[:ERROR_TEXT_MAX_CHARS]

    def summary(self, elapsed_s: float, cpu_s: float, cpu_total_s: float) -> dict:
        """The counted part of a load run's result line (shared by every load generator)."""
        return {
            "elapsed_s": elapsed_s,
            "requests": self.requests,
            "entries": self.entries,
            "payload_bytes": self.payload_bytes,
            "errors": self.errors,
            "first_error": self.first_error,
            "histogram": {str(k): v for k, v in self.histogram.items()},
            "cpu_s": cpu_s,
            "cpu_total_s": cpu_total_s,
        }


def run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run a load generator's main coroutine, on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        return asyncio.run(coro)
    return uvloop.run(coro)


class GatewayLoad:
    def __init__(self, spec: dict) -> None:
        self.host: str = spec["host"]
        self.port: int = spec["port"]
        self.client_ledgers: list[list[int]] = spec["client_ledgers"]
        self.batch: int = spec["batch"]
        self.size: int = spec["entry_size"]
        self.rate: float = spec.get("rate", 0.0)  # requests/s of this process, 0 = unthrottled
        self.duration_s: float = spec["duration_s"]
        self.warmup_s: float = spec.get("warmup_s", 0.0)
        self.start_at: float = spec.get("start_at", time.time())
        self.progress_interval_s: float = spec.get("progress_interval_s", PROGRESS_INTERVAL_S)
        token = spec.get("token")
        # One context for the process: each connection pays its handshake once and then
        # keeps it (keep-alive), as a real client would.
        self.ssl: ssl.SSLContext | None = None
        if spec.get("tls"):
            ca_file = spec.get("ca_file")
            self.ssl = verifying_context(Path(ca_file)) if ca_file else ssl.create_default_context()
        self.payload = os.urandom(self.size)
        if self.batch == 1:
            content_type, self.body = "application/octet-stream", self.payload
        else:
            entry = base64.b64encode(self.payload).decode()
            content_type = "application/json"
            self.body = json.dumps({"entries": [entry] * self.batch}).encode()
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.heads = {
            ledger_id: (
                f"POST /v1/ledgers/{ledger_id}/entries HTTP/1.1\r\n"
                f"Host: {self.host}:{self.port}\r\nContent-Type: {content_type}\r\n{auth}"
                f"Content-Length: {len(self.body)}\r\n\r\n"
            ).encode()
            for ledgers in self.client_ledgers
            for ledger_id in ledgers
        }
        self.stats = Stats()
        self.connections: set[LoadConnection] = set()
        self.counting = False
        self.stopping = False
        self.counting_since: float | None = None

    def head(self, ledgers: list[int], sent: int) -> bytes:
        """The head of a client's ``sent``-th request (``LogLoad`` appends to a log)."""
        return self.heads[ledgers[sent % len(ledgers)]]

    async def client(self, index: int) -> None:
        """One simulated client: its connection (``LoadConnection``) sends its requests;
        this task makes a new one when the last closed (after an error, or an answer
        with ``Connection: close``) and ends when the run stops."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self.start_at - time.time()))
        pacing = Pacing(len(self.client_ledgers), self.rate, index)
        while not self.stopping:
            try:
                _, conn = await loop.create_connection(
                    partial(self.connection, index, pacing),
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl is not None else None,
                )
            except OSError as exc:
                if self.stopping:
                    return
                self.stats.error(f"connect: {type(exc).__name__}: {exc}")
                await asyncio.sleep(RECONNECT_DELAY_S * 10)
                continue
            self.connections.add(conn)
            try:
                await conn.closed
            finally:
                self.connections.discard(conn)
                conn.abort()
            if conn.failed and not self.stopping:
                await asyncio.sleep(RECONNECT_DELAY_S)

    def connection(self, index: int, pacing: Pacing) -> LoadConnection:
        """A new connection for client ``index`` (``StreamLoad`` opens streams)."""
        return RequestConnection(self, self.client_ledgers[index], pacing)

    async def watch(self) -> None:
        """Time out requests (and streams) that wait too long for their answers: one
        check a second for every connection, instead of a timer per request. It runs
        until the run has ended, so a request hung when the run stops ends it too."""
        while True:
            await asyncio.sleep(limits.WATCH_INTERVAL_S)
            now = time.perf_counter()
            for conn in list(self.connections):
                if conn.overdue(now):
                    if self.counting and not self.stopping:
                        self.stats.error(
                            f"TimeoutError: no answer within {limits.REQUEST_TIMEOUT_S:g}s"
                        )
                    conn.fail()

    def emit(self, doc: dict) -> None:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()

    async def report_progress(self) -> None:
        while not self.stopping:
            await asyncio.sleep(self.progress_interval_s)
            s = self.stats
            counted = (
                time.perf_counter() - self.counting_since if self.counting_since is not None else 0
            )
            self.emit(
                {
                    "type": "progress",
                    "counting": self.counting,
                    "counted_s": counted,
                    "requests": s.requests,
                    "entries": s.entries,
                    "errors": s.errors,
                    "p99_ms": percentile_s(s.histogram, 0.99) * 1000,
                    "first_error": s.first_error,
                }
            )

    async def run(self) -> dict:
        tasks = [asyncio.create_task(self.client(i)) for i in range(len(self.client_ledgers))]
        progress = asyncio.create_task(self.report_progress())
        watch = asyncio.create_task(self.watch())
        await asyncio.sleep(max(0.0, self.start_at - time.time()))
        cpu0 = time.process_time()
        await asyncio.sleep(self.warmup_s)
        self.counting = True
        t0, c0 = time.perf_counter(), time.process_time()
        self.counting_since = t0
        await asyncio.sleep(self.duration_s)
        self.stopping = True
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        for conn in list(self.connections):
            conn.stop()
        done, pending = await asyncio.wait(tasks, timeout=limits.REQUEST_TIMEOUT_S)
        for task in pending:
            task.cancel()
        for task in done:
            if task.exception() is not None:
                self.stats.error(f"client failed: {task.exception()!r}")
        progress.cancel()
        watch.cancel()
        return {
            "type": "result",
            "clients": len(self.client_ledgers),
            **self.stats.summary(elapsed, cpu, time.process_time() - cpu0),
        }
