#!/usr/bin/env python3
"""services.bookie_client's own HTTP/1.1 transport against aiohttp and httpx, on the same calls.

    .venv/bin/python benchmarks/client_compare.py               # against a null bookie
    .venv/bin/python benchmarks/client_compare.py --rounds 5 --scenario single_c64_pool16
    .venv/bin/python benchmarks/client_compare.py --bookie http://127.0.0.1:3181

All run inside ``BookieClient`` (same framing, same error mapping); only the
transport differs: ``stream`` (services/bookie_client/transport.py), ``aiohttp``
(one ``ClientSession`` over a ``TCPConnector`` limited to the pool size) and
``httpx`` (one ``AsyncClient`` with ``Limits`` of the pool size). By default the
target is benchmarks/_null_bookie.py (the bookie's server stack without storage)
in its own process, so the figures are the HTTP path and the client's CPU, not
the disk. Each scenario is many concurrent callers sharing ONE client, as the
gateway shares one client per bookie. Runs under uvloop, as the services do.

Rounds are interleaved (round 1 runs every scenario with every transport, then
round 2, ...; the transport order rotates each round) so that a burst of load
from elsewhere on the machine hits all transports alike; the summary gives
medians over rounds. Counted: requests completed in the measuring window
(``fairness``: the least served caller's count over the mean count);
client CPU is this process's CPU in that window; ``server`` is the null bookie's
CPU and ``others`` everything else the machine ran in that window, in cores.
Last line of stdout: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import httpx
import psutil
import uvloop
from yarl import URL

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.bookie_client import BookieClient  # noqa: E402
from services.bookie_client.transport import (  # noqa: E402
    HttpResponse,
    HttpTransport,
    ProtocolError,
    split_address,
)
from services.cluster.processes import ProcessError, free_port, health_ok  # noqa: E402
from services.errors import BookieUnavailable  # noqa: E402
from services.wire import framing  # noqa: E402

SCENARIOS = {
    # name: (entries per request, concurrent callers, connections in the pool)
    "single_c64_pool4": (1, 64, 4),
    "single_c64_pool16": (1, 64, 16),
    "single_c64_pool64": (1, 64, 64),
    "batch100_c8_pool4": (100, 8, 4),
    "batch100_c8_pool16": (100, 8, 16),
}
TRANSPORTS = ("stream", "aiohttp", "httpx")
WARMUP_S = 0.5
CONNECT_TIMEOUT_S = 2.0
ENTRY_SIZE_BYTES = 1024


class HttpxTransport:
    """The ``HttpTransport`` of services.bookie_client.transport, done with httpx."""

    def __init__(self, address: str, connections_max: int) -> None:
        host, port = split_address(address)
        self._client = httpx.AsyncClient(
            base_url=f"http://{host}:{port}",
            limits=httpx.Limits(
                max_connections=connections_max, max_keepalive_connections=connections_max
            ),
            timeout=httpx.Timeout(10.0, connect=CONNECT_TIMEOUT_S),
        )

    async def request(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResponse:
        try:
            r = await self._client.request(
                method, target, content=body or None, headers=dict(headers), timeout=timeout_s
            )
        except httpx.TimeoutException as exc:
            raise TimeoutError(str(exc)) from exc
        except httpx.TransportError as exc:
            raise ProtocolError(str(exc)) from exc
        return HttpResponse(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content)

    async def aclose(self) -> None:
        await self._client.aclose()


class AiohttpTransport:
    """The ``HttpTransport`` of services.bookie_client.transport, done with aiohttp:
    one ``ClientSession`` whose ``TCPConnector`` holds at most ``connections_max``
    connections (more callers wait for one, as with the stream transport's pool).
    No cookies and no decompression: the bookie sends neither. Build it inside the
    event loop that uses it."""

    def __init__(self, address: str, connections_max: int) -> None:
        host, port = split_address(address)
        self._base = f"http://{host}:{port}"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections_max, limit_per_host=connections_max),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=10.0, sock_connect=CONNECT_TIMEOUT_S),
        )

    async def request(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResponse:
        url = URL(self._base + target, encoded=True)  # BookieClient's targets are encoded
        # sock_connect, not connect: aiohttp's connect also covers the wait for a free
        # pooled connection, which the stream transport bounds by the request time-out.
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=CONNECT_TIMEOUT_S)
        try:
            async with self._session.request(
                method, url, data=body or None, headers=headers, timeout=timeout
            ) as r:
                payload = await r.read()
                return HttpResponse(r.status, {k.lower(): v for k, v in r.headers.items()}, payload)
        except TimeoutError:  # aiohttp's timeouts are TimeoutError subclasses
            raise
        except aiohttp.ClientError as exc:
            raise ProtocolError(str(exc)) from exc

    async def aclose(self) -> None:
        await self._session.close()


def make_transport(name: str, address: str, pool: int) -> HttpTransport | None:
    """None for ``stream``: ``BookieClient`` then builds its own."""
    if name == "httpx":
        return HttpxTransport(address, pool)
    if name == "aiohttp":
        return AiohttpTransport(address, pool)
    return None


class CpuMeter:
    """CPU used in a window: this process, the server (if it runs here) and the rest
    of the machine, each in seconds."""

    def __init__(self, server_pid: int | None) -> None:
        self._server = psutil.Process(server_pid) if server_pid else None
        self._start: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def _now(self) -> tuple[float, float, float]:
        t = psutil.cpu_times()
        busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        server = sum(self._server.cpu_times()[:2]) if self._server else 0.0
        return time.process_time(), server, busy

    def start(self) -> None:
        self._start = self._now()

    def stop(self) -> tuple[float, float, float]:
        """(client, server, others) seconds since ``start``."""
        client, server, busy = (b - a for a, b in zip(self._start, self._now(), strict=True))
        return client, server, max(busy - client - server, 0.0)


async def scenario(
    address: str,
    transport_name: str,
    batch: int,
    callers: int,
    pool: int,
    duration_s: float,
    server_pid: int | None,
) -> dict:
    transport = make_transport(transport_name, address, pool)
    client = BookieClient(address, None, connections_max=pool, transport=transport)
    payload = os.urandom(ENTRY_SIZE_BYTES)
    latencies: list[float] = []
    done_by_caller = [0] * callers
    errors = [0]
    meter = CpuMeter(server_pid)
    loop = asyncio.get_running_loop()
    counting_from = stop_at = float("inf")

    async def caller(index: int) -> None:
        ledger_id, entry_id = 5_000_000 + index * 1000 + TRANSPORTS.index(transport_name), 0
        while time.perf_counter() < stop_at:
            records = [
                framing.FramedRecord(ledger_id, e, e - 1, payload)
                for e in range(entry_id, entry_id + batch)
            ]
            entry_id += batch
            t0 = time.perf_counter()
            try:
                result = await client.add(records)
            except BookieUnavailable:  # e.g. a caller that waited a request time-out
                errors[0] += 1
                continue
            t1 = time.perf_counter()
            if result.stored != batch:
                raise RuntimeError(f"the bookie stored {result.stored} of {batch}")
            if counting_from <= t1 <= stop_at:
                latencies.append(t1 - t0)
                done_by_caller[index] += 1

    async def window() -> tuple[float, float, float]:
        await asyncio.sleep(WARMUP_S)
        meter.start()
        await asyncio.sleep(max(stop_at - time.perf_counter(), 0.0))
        return meter.stop()

    await client.add([framing.FramedRecord(1, 0, -1, b"warm")])
    counting_from = time.perf_counter() + WARMUP_S
    stop_at = counting_from + duration_s
    window_task = loop.create_task(window())
    try:
        await asyncio.gather(*(caller(i) for i in range(callers)))
        client_cpu, server_cpu, others_cpu = await window_task
    finally:
        window_task.cancel()
        await client.aclose()
    latencies.sort()
    n = len(latencies)
    return {
        "requests_per_s": n / duration_s,
        "entries_per_s": n * batch / duration_s,
        "p50_ms": latencies[n // 2] * 1000 if n else 0.0,
        "p99_ms": latencies[int(0.99 * (n - 1))] * 1000 if n else 0.0,
        "max_ms": latencies[-1] * 1000 if n else 0.0,
        # The least served caller's share of a fair share (1.0: every caller alike).
        "fairness": min(done_by_caller) / (n / callers) if n else 0.0,
        "errors": float(errors[0]),
        "client_cpu_us_per_request": client_cpu / max(n, 1) * 1e6,
        "client_cores": client_cpu / duration_s,
        "server_cores": server_cpu / duration_s,
        "others_cores": others_cpu / duration_s,
    }


def line(label: str, transport: str, r: dict) -> str:
    return (
        f"{label:<24} {transport:<7} {r['requests_per_s']:>7,.0f} req/s "
        f"{r['entries_per_s']:>9,.0f} entries/s  p50 {r['p50_ms']:6.2f}  "
        f"p99 {r['p99_ms']:7.2f}  max {r['max_ms']:7.1f} ms  "
        f"fair {r['fairness']:.2f}  err {r['errors']:.0f}  "
        f"client {r['client_cpu_us_per_request']:5.0f} us/req  "
        f"cores: client {r['client_cores']:.2f} server {r['server_cores']:.2f} "
        f"others {r['others_cores']:.2f}"
    )


def start_null_bookie() -> tuple[subprocess.Popen, str]:
    port = free_port()
    pythonpath = os.environ.get("PYTHONPATH", "")
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "_null_bookie.py"), "--port", str(port)],
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), pythonpath]))},
    )
    address = f"127.0.0.1:{port}"
    end = time.monotonic() + 30
    while not health_ok(f"http://{address}"):
        if time.monotonic() > end or server.poll() is not None:
            server.kill()
            raise ProcessError("null bookie did not start")
        time.sleep(0.05)
    return server, address


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bookie", help="http://host:port of a real bookie (no secret)")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds measured per run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        help="run only these (repeatable; default: all)",
    )
    parser.add_argument(
        "--transport",
        action="append",
        choices=TRANSPORTS,
        help="run only these (repeatable; default: all)",
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.duration <= 0:
        parser.error("--rounds must be at least 1 and --duration positive")
    names = args.scenario or list(SCENARIOS)
    transports = args.transport or list(TRANSPORTS)
    server = None
    runs: dict[tuple[str, str], list[dict]] = {}
    try:
        if args.bookie:
            address = args.bookie
        else:
            server, address = start_null_bookie()
        for round_no in range(args.rounds):
            shift = round_no % len(transports)
            order = transports[shift:] + transports[:shift]
            for name in names:
                batch, callers, pool = SCENARIOS[name]
                for transport in order:
                    r = uvloop.run(
                        scenario(
                            address,
                            transport,
                            batch,
                            callers,
                            pool,
                            args.duration,
                            server.pid if server else None,
                        )
                    )
                    runs.setdefault((name, transport), []).append(r)
                    print(line(f"[{round_no + 1}] {name}", transport, r), flush=True)
    finally:
        if server is not None:
            stop(server)
    print(f"\nmedians over {args.rounds} round(s):")
    out: dict[str, dict[str, float]] = {}
    for (name, transport), rs in runs.items():
        median = {m: statistics.median(r[m] for r in rs) for m in rs[0]}
        out[f"{name}_{transport}"] = median
        print(line(name, transport, median))
    print(json.dumps({k: {m: round(v, 3) for m, v in r.items()} for k, r in out.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
