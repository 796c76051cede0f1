"""The load generator of benchmarks/bookie_add.py, run in its own process.

    python benchmarks/_load.py '{"host": ..., "port": ..., "clients": 64, ...}'

Each simulated client owns one keep-alive HTTP/1.1 connection (raw asyncio
streams, uvloop when installed) and one ledger, and sends ``POST /v1/entries``
with ``batch`` entries of ``size`` bytes back to back, one request in flight
per client. Latency is measured from the write of a request to the last byte
of its answer. Counting starts after ``warmup_s`` and ends at ``duration_s``;
answers arriving later are not counted.

It prints a live progress line on stderr (when asked) and one JSON object on
stdout: counts, rates, a latency histogram (log buckets of 2 %, mergeable
across processes) and the CPU time this process used, so the orchestrator can
tell whether the generator itself was the limit. The histogram and the raw
HTTP/1.1 exchange live in ``services/bench/load.py``, shared with ``quire bench``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from services.bench.histogram import bucket_of, percentile_s
from services.bench.load import Stats, exchange, run_loop
from services.wire.digest import compute

# The record header of services/wire/framing.py, packed directly so the hot loop does not
# build FramedRecord objects; the bookie's answer ("stored" == batch) checks the bytes.
from services.wire.framing import HEADER, MEDIA_TYPE

DIGEST_CRC32C = 1 << 1
REQUEST_TIMEOUT_S = 30.0
PROGRESS_INTERVAL_S = 0.5


class Load:
    def __init__(self, spec: dict) -> None:
        self.host: str = spec["host"]
        self.port: int = spec["port"]
        self.clients: int = spec["clients"]
        self.batch: int = spec["batch"]
        self.size: int = spec["size"]
        self.digest: str = spec.get("digest", "crc32c")
        self.duration_s: float = spec["duration_s"]
        self.warmup_s: float = spec.get("warmup_s", 0.0)
        self.ledger_base: int = spec["ledger_base"]
        self.label: str = spec.get("label", "load")
        self.progress: bool = spec.get("progress", False)
        self.start_at: float = spec.get("start_at", time.time())
        secret = spec.get("secret")
        self.payload = os.urandom(self.size)
        extra = f"X-Cluster-Secret: {secret}\r\n" if secret else ""
        self.head_prefix = (
            f"POST /v1/entries HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: {MEDIA_TYPE}\r\n{extra}Content-Length: "
        ).encode()
        self.stats = Stats()
        self.counting = False
        self.counting_since: float | None = None
        self.stopping = False

    def body(self, ledger_id: int, first_entry: int) -> bytes:
        parts = []
        payload, size = self.payload, self.size
        flags = DIGEST_CRC32C if self.digest == "crc32c" else 0
        for entry_id in range(first_entry, first_entry + self.batch):
            lac = entry_id - 1
            length = (entry_id + 1) * size
            digest = (
                compute("crc32c", b"", ledger_id, entry_id, lac, payload, length=length)
                if flags
                else b""
            )
            parts.append(HEADER.pack(flags, ledger_id, entry_id, lac, length, size, len(digest)))
            parts.append(digest)
            parts.append(payload)
        return b"".join(parts)

    async def client(self, index: int) -> None:
        ledger_id = self.ledger_base + index
        entry_id = 0
        reader, writer = await asyncio.open_connection(self.host, self.port)
        while time.time() < self.start_at:
            await asyncio.sleep(min(0.01, max(0.0, self.start_at - time.time())))
        stats = self.stats
        while not self.stopping:
            body = self.body(ledger_id, entry_id)
            entry_id += self.batch
            head = self.head_prefix + str(len(body)).encode() + b"\r\n\r\n"
            started = time.perf_counter()
            try:
                answer = await asyncio.wait_for(
                    self.exchange(reader, writer, head, body), REQUEST_TIMEOUT_S
                )
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
                stats.errors += 1
                stats.first_error = stats.first_error or f"{type(exc).__name__}: {exc}"
                writer.transport.abort()
                if self.stopping:
                    return
                await asyncio.sleep(0.1)
                reader, writer = await asyncio.open_connection(self.host, self.port)
                continue
            latency = time.perf_counter() - started
            if self.stopping or not self.counting:
                continue
            status, stored = answer
            if status != 200 or stored != self.batch:
                stats.errors += 1
                stats.first_error = stats.first_error or f"HTTP {status} stored {stored}"
                continue
            stats.requests += 1
            stats.entries += self.batch
            stats.payload_bytes += self.batch * self.size
            bucket = bucket_of(latency)
            stats.histogram[bucket] = stats.histogram.get(bucket, 0) + 1
        writer.close()

    async def exchange(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: bytes,
        body: bytes,
    ) -> tuple[int, int | None]:
        status, doc, _ = await exchange(reader, writer, head, body)
        stored = None
        if status == 200:
            stored = json.loads(doc).get("stored")
        return status, stored

    async def report_progress(self) -> None:
        """Rewrite one stderr line twice a second with the rate so far (counted window)."""
        while not self.stopping:
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            s = self.stats
            if self.counting_since is None:
                text = "warming up"
            else:
                counted = time.perf_counter() - self.counting_since
                p99 = percentile_s(s.histogram, 0.99) * 1000
                text = (
                    f"{counted:5.1f}s {s.entries / max(counted, 1e-9):>10,.0f} entries/s "
                    f"p99 {p99:7.2f} ms errors {s.errors}"
                )
            sys.stderr.write(f"\r  {self.label:<26} {text:<60}")
            sys.stderr.flush()

    async def run(self) -> dict:
        tasks = [asyncio.create_task(self.client(i)) for i in range(self.clients)]
        progress = asyncio.create_task(self.report_progress()) if self.progress else None
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
                self.stats.errors += 1
                self.stats.first_error = self.stats.first_error or repr(task.exception())
        if progress is not None:
            progress.cancel()
            sys.stderr.write("\r" + " " * 92 + "\r")
        return {
            "label": self.label,
            "clients": self.clients,
            "batch": self.batch,
            "size": self.size,
            **self.stats.summary(elapsed, cpu, time.process_time() - cpu0),
        }


def main() -> None:
    result = run_loop(Load(json.loads(sys.argv[1])).run())
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
