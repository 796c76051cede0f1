"""The load generator of ``quire bench --stream``: ``GatewayLoad`` (services/bench/load.py)
sending single records over streaming appends (README "Streaming appends") instead of
one HTTP request per record.

Each client opens one WebSocket to ``/v1/ledgers/{id}/stream`` (its first ledger), or
to ``/v1/logs/{log}/stream`` with ``--log``, and keeps ``in_flight`` records sent and
not acknowledged (never more than the gateway's credits). A record's latency runs from
its send to its acknowledgement (acknowledgements come in order, so the oldest send
time is the one acknowledged). The records a client sends in one turn of its event loop
leave in one socket write (``CoalescingTransport``), as a NATS client's flusher batches
its publishes: measured with 256 in flight on one stream, 6,220-6,512 records/s without
it and 6,495-7,230 with it, and the gateway's and bookies' CPU per record fell (they
got the records in larger groups). At the end each client stops sending, waits for what is
in flight and ends the stream with ``{"end": true}``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from services.bench.load import REQUEST_TIMEOUT_S, GatewayLoad, bucket_of
from services.web.coalesce import CoalescingTransport

IN_FLIGHT_DEFAULT = 256


class StreamLoad(GatewayLoad):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.in_flight: int = spec.get("in_flight", IN_FLIGHT_DEFAULT)
        self.log: str | None = spec.get("log")
        token = spec.get("token")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def path(self, index: int) -> str:
        if self.log is not None:
            return f"/v1/logs/{self.log}/stream"
        return f"/v1/ledgers/{self.client_ledgers[index][0]}/stream"

    async def client(self, index: int) -> None:
        url = f"ws://{self.host}:{self.port}{self.path(index)}"
        async with connect(
            url, additional_headers=self.headers, max_size=None, compression=None
        ) as ws:
            # Records sent in one loop turn leave in one write, as a NATS client's flusher
            # does (services/web/coalesce.py).
            ws.transport = CoalescingTransport(ws.transport, asyncio.get_running_loop())  # type: ignore[assignment]
            hello = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_TIMEOUT_S))
            if "credits" not in hello:
                self.stats.error(f"stream refused: {hello}")
                return
            room = asyncio.Semaphore(min(self.in_flight, hello["credits"]))
            sent_at: collections.deque[float] = collections.deque()
            await asyncio.sleep(max(0.0, self.start_at - time.time()))
            receiver = asyncio.create_task(self._receive(ws, room, sent_at))
            try:
                while not self.stopping and not receiver.done():
                    await room.acquire()
                    sent_at.append(time.perf_counter())
                    await ws.send(self.payload)
                # What is in flight is acknowledged (or the stream failed), then it ends.
                while sent_at and not receiver.done():
                    await asyncio.wait({receiver}, timeout=0.05)
                if not receiver.done():
                    await ws.send(json.dumps({"end": True}))
                    await asyncio.wait_for(receiver, REQUEST_TIMEOUT_S)
            except ConnectionClosed as exc:
                if not self.stopping:
                    self.stats.error(f"stream closed: {exc}")
            finally:
                receiver.cancel()
                await asyncio.gather(receiver, return_exceptions=True)

    async def _receive(
        self, ws: ClientConnection, room: asyncio.Semaphore, sent_at: collections.deque[float]
    ) -> None:
        stats, size = self.stats, len(self.payload)
        try:
            async for message in ws:
                doc = json.loads(message)
                if "error" in doc:
                    stats.error(f"{doc['error']}: {doc['message']}")
                    return
                if "credits" in doc:
                    continue
                latency = time.perf_counter() - sent_at.popleft()
                room.release()
                if self.stopping or not self.counting:
                    continue
                stats.requests += 1
                stats.entries += 1
                stats.payload_bytes += size
                bucket = bucket_of(latency)
                stats.histogram[bucket] = stats.histogram.get(bucket, 0) + 1
        except ConnectionClosed as exc:
            if not self.stopping:
                stats.error(f"stream closed: {exc}")
