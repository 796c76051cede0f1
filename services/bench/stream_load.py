"""The load generator of ``quire bench --stream``: ``GatewayLoad`` (services/bench/load.py)
sending single records over streaming appends (docs/streaming.md) instead of
one HTTP request per record.

Each client opens one WebSocket to ``/v1/ledgers/{id}/stream`` (its first ledger), or
to ``/v1/logs/{log}/stream`` with ``--log``, and keeps ``in_flight`` records sent and
not acknowledged (never more than the credits the gateway granted first). A record's
latency runs from its send to its acknowledgement (acknowledgements come in order, so
the oldest send time is the one acknowledged). The connection is an asyncio
``Protocol`` speaking RFC 6455 itself (services/bench/ws_frames.py): the records that
the acknowledgements of one read make room for leave in one socket write, as a NATS
client's flusher batches its publishes. At the end each client stops sending, waits for
what is in flight and ends the stream with ``{"end": true}``; the gateway closes with
1000.
"""

from __future__ import annotations

import collections
import json
import struct
import time
from typing import Any

from services.bench.connections import LoadConnection, Pacing
from services.bench.histogram import bucket_of
from services.bench.limits import REQUEST_TIMEOUT_S, RESPONSE_HEAD_MAX_BYTES
from services.bench.load import GatewayLoad
from services.bench.ws_frames import (
    CLOSE_NORMAL,
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    FrameError,
    FrameReader,
    check_handshake,
    encode_frame,
    handshake,
)

IN_FLIGHT_DEFAULT = 256
_ACK_PREFIX = b'{"seq"'  # the gateway's acknowledgement (anything else is parsed)
_END = json.dumps({"end": True}).encode()


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

    def connection(self, index: int, pacing: Pacing) -> LoadConnection:
        return StreamConnection(self, self.path(index))


class StreamConnection(LoadConnection):
    """One stream: the handshake, then records out and acknowledgements in."""

    def __init__(self, load: StreamLoad, path: str) -> None:
        super().__init__(load)
        self.stream_load = load
        self.request, self.key = handshake(load.host, load.port, path, load.headers)
        self.opened_at = time.perf_counter()
        self.upgraded = False
        self.frames = FrameReader()
        self.sent_at: collections.deque[float] = collections.deque()
        self.room = -1  # records that may be sent now; -1 until the credits arrive
        self.ended = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        transport.write(self.request)

    def waiting(self) -> bool:
        return not self.upgraded or bool(self.sent_at) or self.room < 0

    def overdue(self, now: float) -> bool:
        since = self.sent_at[0] if self.sent_at else None if self.room >= 0 else self.opened_at
        return since is not None and now - since > REQUEST_TIMEOUT_S

    def data_received(self, data: bytes) -> None:
        if not self.upgraded:
            buffer = self.buffer + data
            head_end = buffer.find(b"\r\n\r\n")
            if head_end < 0:
                if len(buffer) > RESPONSE_HEAD_MAX_BYTES:
                    self.error("the handshake's answer head is too long")
                self.buffer = buffer
                return
            try:
                check_handshake(buffer[: head_end + 4], self.key)
            except FrameError as exc:
                self.error(f"stream refused: {exc}")
                return
            self.upgraded, self.buffer = True, b""
            data = buffer[head_end + 4 :]
        try:
            messages = self.frames.feed(data)
        except FrameError as exc:
            self.error(f"bad frame from the gateway: {exc}")
            return
        out: list[bytes] = []
        for opcode, payload in messages:
            if opcode == OP_TEXT:
                if payload.startswith(_ACK_PREFIX):
                    self.acknowledged()
                elif not self.control(payload):
                    return
            elif opcode == OP_CLOSE:
                self.closed_by_server(payload)
                return
            elif opcode == OP_PING:
                out.append(encode_frame(OP_PONG, payload))
        self.fill(out)
        if out:
            self.transport.write(b"".join(out))  # type: ignore[union-attr]

    def acknowledged(self) -> None:
        latency = time.perf_counter() - self.sent_at.popleft()
        self.room += 1
        load = self.load
        if load.counting and not load.stopping:
            stats = self.stats
            stats.requests += 1
            stats.entries += 1
            stats.payload_bytes += len(load.payload)
            bucket = bucket_of(latency)
            stats.histogram[bucket] = stats.histogram.get(bucket, 0) + 1

    def control(self, payload: bytes) -> bool:
        """A text message other than an acknowledgement; False when the stream failed."""
        try:
            doc = json.loads(payload)
        except ValueError:
            self.error(f"not JSON from the gateway: {payload[:80]!r}")
            return False
        if "error" in doc:
            self.error(f"{doc.get('error')}: {doc.get('message')}")
            return False
        if "seq" in doc:
            self.acknowledged()
        elif "credits" in doc and self.room < 0:
            # The first grant bounds the records in flight; later grants are not used.
            self.room = min(self.stream_load.in_flight, int(doc["credits"]))
        return True

    def closed_by_server(self, payload: bytes) -> None:
        code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
        if code != CLOSE_NORMAL or self.sent_at or not self.ended:
            self.error(
                f"stream closed by the gateway: {code} {payload[2:].decode(errors='replace')}"
            )
            return
        self.transport.write(encode_frame(OP_CLOSE, payload[:2]))  # type: ignore[union-attr]
        self.transport.close()  # type: ignore[union-attr]

    def fill(self, out: list[bytes]) -> None:
        """Frames for the records there is room for, or the end once the run stopped
        and nothing is in flight."""
        if self.load.stopping:
            if not self.sent_at and not self.ended and self.room >= 0:
                self.ended = True
                out.append(encode_frame(OP_TEXT, _END))
            return
        if self.room <= 0:
            return
        payload = self.load.payload
        now = time.perf_counter()
        for _ in range(self.room):
            self.sent_at.append(now)
            out.append(encode_frame(OP_BINARY, payload))
        self.room = 0

    def stop(self) -> None:
        """The run stopped: end the stream now if nothing is in flight (else when its
        last acknowledgement arrives)."""
        out: list[bytes] = []
        self.fill(out)
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(out))
