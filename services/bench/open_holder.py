"""A process that holds many open, idle connections to one gateway for
``benchmarks/scale.py open`` (services/bench/scale_open.py): tailing readers (each a
long poll ``GET /v1/logs/{name}/records?wait_ms=…`` asked again from its ``next`` as
soon as it is answered) or WebSocket streams (``/v1/logs/{name}/stream``, opened,
granted their credits, then silent but for answering pings).

    python -m services.bench.open_holder '{"kind": "readers", "host": "127.0.0.1",
        "port": 8080, "targets": ["a", "b"], "address_first": 2, "per_address": 500}'

Connection i goes out from ``127.0.0.{address_first + i // per_address}`` (the gateway
admits at most ``--connections-per-client-max`` per address, 512 by default). The
connections are asyncio ``Protocol`` objects on raw bytes (services/bench/connections.py
``parse_head``, services/bench/ws_frames.py), so that holding thousands costs this
process little CPU beside the gateway it measures. A progress line (JSON) goes to stdout
every ``PROGRESS_INTERVAL_S``, and at once when every connection is open; SIGTERM closes
every connection and ends the process with a last line ``{"type": "result", …}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import signal
import sys
import time
from typing import Any

from services.bench.connections import parse_head
from services.bench.limits import RESPONSE_HEAD_MAX_BYTES
from services.bench.load import run_loop
from services.bench.ws_frames import (
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

CONNECTS_IN_FLIGHT_MAX = 64  # connections being opened at once
PROGRESS_INTERVAL_S = 1.0
ERROR_TEXT_MAX_CHARS = 300
READ_LIMIT = 100  # records per tail read


class Holder:
    """The counts of one holder process, and what its connections share."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.host: str = spec["host"]
        self.port: int = spec["port"]
        self.wait_ms: int = spec.get("wait_ms", 30_000)
        self.open = 0  # readers with a poll out / streams granted their credits
        self.polls = 0  # long polls answered
        self.records = 0  # records the readers received
        self.pings = 0  # pings the streams answered
        self.errors = 0
        self.lost = 0  # connections the gateway closed
        self.first_error: str | None = None
        self.stopping = False
        self.connections: list[asyncio.Protocol] = []
        # Set once every connection of the spec is open: a progress line goes out then,
        # not at the next interval (the bench waits for it before it measures).
        self.all_open = asyncio.Event()

    def opened(self) -> None:
        self.open += 1
        if self.open == len(self.spec["targets"]):
            self.all_open.set()

    def error(self, text: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = text[:ERROR_TEXT_MAX_CHARS]

    def doc(self, kind: str) -> dict[str, Any]:
        return {
            "type": kind,
            "open": self.open,
            "polls": self.polls,
            "records": self.records,
            "pings": self.pings,
            "errors": self.errors,
            "lost": self.lost,
            "first_error": self.first_error,
        }


class Held(asyncio.Protocol):
    """A connection a holder keeps open on log ``log``: counted once it is set up,
    aborted on a failure, and a loss while the holder is not stopping is counted (and,
    with ``LOSS_IS_AN_ERROR``, reported)."""

    KIND = "connection"
    LOSS_IS_AN_ERROR = True

    def __init__(self, holder: Holder, log: str) -> None:
        self.holder = holder
        self.log = log
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.counted = False

    def fail(self, text: str) -> None:
        self.holder.error(f"{self.KIND} of {self.log}: {text}")
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted:
            self.holder.open -= 1
        if not self.holder.stopping:
            self.holder.lost += 1
            if self.LOSS_IS_AN_ERROR:
                self.holder.error(f"{self.KIND} of {self.log}: closed by the gateway ({exc})")


class Reader(Held):
    """A tailing reader: one long poll out at a time, asked again from the answer's
    ``next``."""

    KIND = "reader"

    def __init__(self, holder: Holder, log: str) -> None:
        super().__init__(holder, log)
        self.next: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.ask()

    def ask(self) -> None:
        start = f"&from={self.next}" if self.next else ""
        path = f"/v1/logs/{self.log}/records?limit={READ_LIMIT}&wait_ms={self.holder.wait_ms}"
        request = f"GET {path}{start} HTTP/1.1\r\nHost: {self.holder.host}\r\n\r\n"
        assert self.transport is not None
        self.transport.write(request.encode())
        if not self.counted:
            self.counted = True
            self.holder.opened()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            if len(self.buffer) > RESPONSE_HEAD_MAX_BYTES:
                self.fail("an answer head too long")
            return
        try:
            status, length, _ = parse_head(self.buffer[: head_end + 4])
        except ValueError as exc:
            self.fail(str(exc))
            return
        end = head_end + 4 + length
        if len(self.buffer) < end:
            return
        body, self.buffer = self.buffer[head_end + 4 : end], self.buffer[end:]
        if status != 200:
            self.fail(f"HTTP {status}: {body[:200].decode(errors='replace')}")
            return
        doc = json.loads(body)
        self.holder.polls += 1
        self.holder.records += len(doc["records"])
        self.next = doc["next"]
        if not self.holder.stopping:
            self.ask()


class Stream(Held):
    """An idle stream: the handshake, the credits, then only pongs."""

    KIND = "stream"
    LOSS_IS_AN_ERROR = False

    def __init__(self, holder: Holder, log: str) -> None:
        super().__init__(holder, log)
        self.request, self.key = handshake(holder.host, holder.port, f"/v1/logs/{log}/stream", {})
        self.upgraded = False
        self.frames = FrameReader()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.upgraded:
            self.buffer += data
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            try:
                check_handshake(self.buffer[: head_end + 4], self.key)
            except FrameError as exc:
                self.fail(str(exc))
                return
            self.upgraded = True
            data, self.buffer = self.buffer[head_end + 4 :], b""
        try:
            messages = self.frames.feed(data)
        except FrameError as exc:
            self.fail(str(exc))
            return
        assert self.transport is not None
        for opcode, payload in messages:
            if opcode == OP_TEXT:
                doc = json.loads(payload)
                if "error" in doc:
                    self.fail(f"{doc['error']}: {doc.get('message')}")
                    return
                if "credits" in doc and not self.counted:
                    self.counted = True
                    self.holder.opened()
            elif opcode == OP_PING:
                self.holder.pings += 1
                self.transport.write(encode_frame(OP_PONG, payload))
            elif opcode == OP_CLOSE:
                self.fail(f"closed by the gateway: {payload[:2].hex()} {payload[2:]!r}")
                return


async def hold(holder: Holder) -> None:
    spec = holder.spec
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    loop.add_signal_handler(signal.SIGINT, stopped.set)
    kind = {"readers": Reader, "streams": Stream}[spec["kind"]]
    first, per_address = spec["address_first"], spec["per_address"]
    gate = asyncio.Semaphore(CONNECTS_IN_FLIGHT_MAX)

    async def connect(index: int, log: str) -> None:
        async with gate:
            if holder.stopping:
                return
            address = f"127.0.0.{first + index // per_address}"
            try:
                _, protocol = await loop.create_connection(
                    lambda: kind(holder, log), holder.host, holder.port, local_addr=(address, 0)
                )
            except OSError as exc:
                holder.error(f"connect from {address}: {exc}")
                return
            holder.connections.append(protocol)

    async def report() -> None:
        while True:
            print(json.dumps(holder.doc("progress")), flush=True)
            if holder.all_open.is_set():
                await asyncio.sleep(PROGRESS_INTERVAL_S)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PROGRESS_INTERVAL_S):
                    await holder.all_open.wait()

    reporter = asyncio.create_task(report())
    connecting = asyncio.gather(*(connect(i, log) for i, log in enumerate(spec["targets"])))
    await stopped.wait()
    holder.stopping = True
    await connecting
    reporter.cancel()
    for protocol in holder.connections:
        transport = getattr(protocol, "transport", None)
        if transport is not None:
            transport.abort()
    print(json.dumps(holder.doc("result")), flush=True)


def main() -> None:
    # One descriptor per connection held: as many as the hard limit allows.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    holder = Holder(json.loads(sys.argv[1]))
    started = time.monotonic()
    run_loop(hold(holder))
    print(f"held for {time.monotonic() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
