#!/usr/bin/env python3
"""services.bookie_client's own HTTP/1.1 transport against httpx, on the same calls.

    .venv/bin/python benchmarks/client_compare.py               # against a null bookie
    .venv/bin/python benchmarks/client_compare.py --bookie http://127.0.0.1:3181

Both run inside ``BookieClient`` (same framing, same error mapping); only the
transport differs. By default the target is benchmarks/_null_bookie.py (the
bookie's server stack without storage) in its own process, so the figures
are the HTTP path and the client's CPU, not the disk. Each scenario is many
concurrent callers sharing ONE client, as the gateway shares one client per
bookie. Runs under uvloop, as the services do. Last line of stdout: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.bookie_client import BookieClient  # noqa: E402
from services.bookie_client.transport import (  # noqa: E402
    HttpResponse,
    ProtocolError,
    split_address,
)
from services.cluster.processes import ProcessError, free_port, health_ok  # noqa: E402
from services.wire import framing  # noqa: E402

SCENARIOS = {
    # name: (entries per request, concurrent callers, connections in the pool)
    "single_c64_pool4": (1, 64, 4),
    "single_c64_pool16": (1, 64, 16),
    "single_c64_pool64": (1, 64, 64),
    "batch100_c8_pool4": (100, 8, 4),
}


class HttpxTransport:
    """The ``HttpTransport`` of services.bookie_client.transport, done with httpx."""

    def __init__(self, address: str, connections_max: int, connect_timeout_s: float = 2.0):
        host, port = split_address(address)
        self._client = httpx.AsyncClient(
            base_url=f"http://{host}:{port}",
            limits=httpx.Limits(
                max_connections=connections_max, max_keepalive_connections=connections_max
            ),
            timeout=httpx.Timeout(10.0, connect=connect_timeout_s),
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


async def scenario(
    address: str, transport_name: str, batch: int, callers: int, pool: int, duration_s: float
) -> dict:
    transport = HttpxTransport(address, pool) if transport_name == "httpx" else None
    client = BookieClient(address, None, connections_max=pool, transport=transport)
    payload = os.urandom(1024)
    latencies: list[float] = []
    stop_at = 0.0
    counting_from = 0.0

    async def caller(index: int) -> None:
        ledger_id, entry_id = 5_000_000 + index * 1000 + hash(transport_name) % 1000, 0
        while time.perf_counter() < stop_at:
            records = [
                framing.Record(ledger_id, e, e - 1, payload)
                for e in range(entry_id, entry_id + batch)
            ]
            entry_id += batch
            t0 = time.perf_counter()
            result = await client.add(records)
            t1 = time.perf_counter()
            assert result.stored == batch, result
            if t0 >= counting_from and t1 <= stop_at:
                latencies.append(t1 - t0)

    await client.add([framing.Record(1, 0, -1, b"warm")])
    counting_from = time.perf_counter() + 0.5
    stop_at = counting_from + duration_s
    cpu0 = time.process_time()
    await asyncio.gather(*(caller(i) for i in range(callers)))
    cpu = time.process_time() - cpu0
    await client.aclose()
    latencies.sort()
    n = len(latencies)
    return {
        "transport": transport_name,
        "requests_per_s": n / duration_s,
        "entries_per_s": n * batch / duration_s,
        "p50_ms": latencies[n // 2] * 1000 if n else 0.0,
        "p99_ms": latencies[int(0.99 * (n - 1))] * 1000 if n else 0.0,
        "client_cpu_us_per_request": cpu / max(n, 1) * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bookie", help="http://host:port of a real bookie (no secret)")
    parser.add_argument("--duration", type=float, default=4.0)
    args = parser.parse_args()
    server = None
    try:
        if args.bookie:
            address = args.bookie
        else:
            port = free_port()
            server = subprocess.Popen(
                [sys.executable, str(ROOT / "benchmarks" / "_null_bookie.py"), "--port", str(port)],
                start_new_session=True,
            )
            address = f"127.0.0.1:{port}"
            end = time.monotonic() + 30
            while not health_ok(f"http://{address}"):
                if time.monotonic() > end or server.poll() is not None:
                    raise ProcessError("null bookie did not start")
                time.sleep(0.05)
        out: dict = {}
        for name, (batch, callers, pool) in SCENARIOS.items():
            for transport in ("stream", "httpx"):
                r = uvloop.run(scenario(address, transport, batch, callers, pool, args.duration))
                out[f"{name}_{transport}"] = r
                print(
                    f"{name:<20} {transport:<7} {r['requests_per_s']:>9,.0f} req/s "
                    f"{r['entries_per_s']:>10,.0f} entries/s  p50 {r['p50_ms']:7.2f} ms  "
                    f"p99 {r['p99_ms']:7.2f} ms  client CPU {r['client_cpu_us_per_request']:7.0f}"
                    " us/request",
                    flush=True,
                )
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    print(
        json.dumps(
            {k: {m: round(v, 3) for m, v in r.items() if m != "transport"} for k, r in out.items()}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
