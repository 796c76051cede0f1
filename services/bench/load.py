"""The load generator of ``quire bench``, run in its own process, and the pieces it
shares with benchmarks/_load.py (the bookie benchmark's generator).

    python -m services.bench.load '{"host": ..., "port": ..., "client_ledgers": [[1, 2], ...]}'

Why a separate process on raw sockets: on this 2-core machine one
``httpx.AsyncClient`` with a 64-connection pool manages ~200 requests/s
(encode/httpx#3215), far below what the gateway serves, and a generator in
the orchestrator's process would compete with its sampling. Here each
simulated client owns one keep-alive HTTP/1.1 connection (asyncio streams,
uvloop when installed), keeps one request in flight, and cycles over its
ledgers (``client_ledgers[i]``): ``POST /v1/ledgers/{id}/entries`` with one
raw entry (``batch`` 1) or a JSON batch of ``batch`` base64 entries. Bodies
are built once; the hot loop only writes bytes and parses a status line.

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
import math
import os
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

REQUEST_TIMEOUT_S = 60.0
RECONNECT_DELAY_S = 0.1
BUCKET_BASE = 1.02  # latency histogram resolution: 2 %
PROGRESS_INTERVAL_S = 0.5
RESPONSE_BODY_MAX_BYTES = 1024 * 1024
ERROR_TEXT_MAX_CHARS = 300

T = TypeVar("T")


# -- latency histogram (shared with benchmarks/) -------------------------------


def bucket_of(latency_s: float) -> int:
    return int(math.log(max(latency_s, 1e-6) * 1e6, BUCKET_BASE))


def bucket_value_s(bucket: int) -> float:
    return BUCKET_BASE ** (bucket + 0.5) / 1e6


def percentile_s(histogram: dict[int, int], fraction: float) -> float:
    """The latency under which ``fraction`` of the samples fall (2 % resolution)."""
    total = sum(histogram.values())
    if total == 0:
        return 0.0
    rank = fraction * total
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return bucket_value_s(bucket)
    return bucket_value_s(max(histogram))


def merge_histograms(histograms: list[dict]) -> dict[int, int]:
    """Sum histograms (keys may be JSON strings)."""
    out: dict[int, int] = {}
    for histogram in histograms:
        for bucket, count in histogram.items():
            out[int(bucket)] = out.get(int(bucket), 0) + count
    return out


# -- raw HTTP/1.1 (shared with benchmarks/) ------------------------------------


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """One HTTP/1.1 answer with a Content-Length body: (status, body, keep_alive)."""
    raw = await reader.readuntil(b"\r\n\r\n")
    status = int(raw[9:12])
    length = 0
    keep_alive = True
    for line in raw.split(b"\r\n")[1:]:
        name = line[:15].lower()
        if name == b"content-length:":
            length = int(line[15:])
        elif name.startswith(b"connection:") and b"close" in line.lower():
            keep_alive = False
    if length > RESPONSE_BODY_MAX_BYTES:
        raise ValueError(f"answer of {length} bytes")
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
        self.counting = False
        self.stopping = False
        self.counting_since: float | None = None

    def head(self, ledgers: list[int], sent: int) -> bytes:
        """The head of a client's ``sent``-th request (``LogLoad`` appends to a log)."""
        return self.heads[ledgers[sent % len(ledgers)]]

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)

    async def client(self, index: int) -> None:
        ledgers = self.client_ledgers[index]
        clients = len(self.client_ledgers)
        interval = clients / self.rate if self.rate > 0 else 0.0
        stats, body, batch = self.stats, self.body, self.batch
        reader, writer = await self.connect()
        await asyncio.sleep(max(0.0, self.start_at - time.time()))
        next_at = time.perf_counter() + index * interval / clients
        sent = 0
        while not self.stopping:
            if interval:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                    if self.stopping:
                        break
                next_at += interval
            head = self.head(ledgers, sent)
            sent += 1
            started = time.perf_counter()
            try:
                status, answer, keep_alive = await asyncio.wait_for(
                    exchange(reader, writer, head, body), REQUEST_TIMEOUT_S
                )
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
                writer.transport.abort()
                if self.stopping:
                    return
                if self.counting:
                    stats.error(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(RECONNECT_DELAY_S)
                try:
                    reader, writer = await self.connect()
                except OSError as exc2:
                    stats.error(f"reconnect: {type(exc2).__name__}: {exc2}")
                    await asyncio.sleep(1.0)
                continue
            latency = time.perf_counter() - started
            if not keep_alive:
                writer.close()
                reader, writer = await self.connect()
            if self.stopping or not self.counting:
                continue
            if status != 200:
                stats.error(f"HTTP {status}: {answer.decode(errors='replace')}")
                continue
            stats.requests += 1
            stats.entries += batch
            stats.payload_bytes += len(self.payload) * batch
            bucket = bucket_of(latency)
            stats.histogram[bucket] = stats.histogram.get(bucket, 0) + 1
        writer.close()

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
        await asyncio.sleep(max(0.0, self.start_at - time.time()))
        cpu0 = time.process_time()
        await asyncio.sleep(self.warmup_s)
        self.counting = True
        t0, c0 = time.perf_counter(), time.process_time()
        self.counting_since = t0
        await asyncio.sleep(self.duration_s)
        self.stopping = True
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        done, pending = await asyncio.wait(tasks, timeout=REQUEST_TIMEOUT_S)
        for task in pending:
            task.cancel()
        for task in done:
            if task.exception() is not None:
                self.stats.error(f"client failed: {task.exception()!r}")
        progress.cancel()
        return {
            "type": "result",
            "clients": len(self.client_ledgers),
            **self.stats.summary(elapsed, cpu, time.process_time() - cpu0),
        }


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec.get("stream"):
        from services.bench.stream_load import StreamLoad

        load: GatewayLoad = StreamLoad(spec)
    elif spec.get("log"):
        from services.bench.log_load import LogLoad

        load = LogLoad(spec)
    else:
        load = GatewayLoad(spec)
    load.emit(run_loop(load.run()))


if __name__ == "__main__":
    main()
