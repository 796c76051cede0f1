"""The connections of the load generators (services/bench/load.py): raw HTTP/1.1 on an
asyncio ``Protocol``, one request in flight, the next one sent from the callback that
read the last answer."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from services.bench import limits
from services.bench.histogram import bucket_of
from services.bench.limits import RESPONSE_BODY_MAX_BYTES, RESPONSE_HEAD_MAX_BYTES

if TYPE_CHECKING:
    from services.bench.load import GatewayLoad

_WRITE_ONCE_MAX_BYTES = 256 * 1024  # a larger body goes out without a joined copy


def parse_head(raw: bytes) -> tuple[int, int, bool]:
    """An HTTP/1.1 answer's head (through its blank line): (status, Content-Length,
    keep_alive). ValueError when it is not one we can read."""
    if not raw.startswith(b"HTTP/1.1 "):
        raise ValueError(f"not an HTTP/1.1 answer: {raw[:40]!r}")
    status = int(raw[9:12])
    length = 0
    keep_alive = True
    for line in raw.split(b"\r\n")[1:]:
        name = line[:15].lower()
        if name == b"content-length:":
            length = int(line[15:])
        elif name.startswith(b"connection:") and b"close" in line.lower():
            keep_alive = False
    if not 0 <= length <= RESPONSE_BODY_MAX_BYTES:
        raise ValueError(f"answer of {length} bytes")
    return status, length, keep_alive


class Pacing:
    """When a client's requests leave: at once (unthrottled), or on a fixed schedule
    ``clients / rate`` seconds apart, clients evenly staggered, at once when behind."""

    __slots__ = ("interval", "next_at")

    def __init__(self, clients: int, rate: float, index: int) -> None:
        self.interval = clients / rate if rate > 0 else 0.0
        self.next_at = time.perf_counter() + index * self.interval / clients

    def delay(self) -> float:
        """Seconds to wait before the next request (0: send now)."""
        if not self.interval:
            return 0.0
        delay = self.next_at - time.perf_counter()
        self.next_at += self.interval
        return max(delay, 0.0)


class LoadConnection(asyncio.Protocol):
    """A load connection: its ``closed`` future, and what the run's watchdog asks."""

    def __init__(self, load: GatewayLoad) -> None:
        self.load = load
        self.stats = load.stats
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.failed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting() and not self.load.stopping and not self.failed:
            self.failed = True
            if self.load.counting:
                reason = f"{type(exc).__name__}: {exc}" if exc else "closed by the server"
                self.stats.error(f"connection lost with an answer due: {reason}")
        if not self.closed.done():
            self.closed.set_result(None)

    def waiting(self) -> bool:
        """Whether an answer is due."""
        raise NotImplementedError

    def overdue(self, now: float) -> bool:
        """Whether an answer has been due for longer than ``REQUEST_TIMEOUT_S``."""
        raise NotImplementedError

    def stop(self) -> None:
        """The run stopped: close when no answer is due (else once it arrives)."""
        raise NotImplementedError

    def error(self, text: str) -> None:
        """A failed exchange: counted (while counting), and the connection dropped."""
        if self.load.counting and not self.load.stopping:
            self.stats.error(text)
        self.fail()

    def fail(self) -> None:
        self.failed = True
        self.abort()

    def abort(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()


class RequestConnection(LoadConnection):
    """One client's keep-alive HTTP/1.1 connection with one request in flight. The next
    request leaves from the callback that read the last answer: no task, no future and
    no timer per request (``GatewayLoad.watch`` times requests out), so the generator
    costs far less CPU per request than one on asyncio streams with ``wait_for``
    (benchmarks/README.md, "Measured choices") and leaves that much more of the machine to what it
    measures."""

    def __init__(self, load: GatewayLoad, ledgers: list[int], pacing: Pacing) -> None:
        super().__init__(load)
        self.ledgers = ledgers
        self.pacing = pacing
        self.sent = 0
        self.started = 0.0  # the request in flight's write; 0.0 when none
        self.status = 0
        self.body_at = -1  # where the answer's body starts, once its head is read
        self.answer_end = -1
        self.keep_alive = True
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.next()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        super().connection_lost(exc)

    def waiting(self) -> bool:
        return self.started > 0.0

    def overdue(self, now: float) -> bool:
        return self.started > 0.0 and now - self.started > limits.REQUEST_TIMEOUT_S

    def stop(self) -> None:
        if not self.started and self.transport is not None:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.transport.close()

    def next(self) -> None:
        if self.load.stopping:
            self.transport.close()  # type: ignore[union-attr]
            return
        delay = self.pacing.delay()
        if delay > 0:
            self.timer = asyncio.get_running_loop().call_later(delay, self.send)
        else:
            self.send()

    def send(self) -> None:
        self.timer = None
        load, transport = self.load, self.transport
        if transport is None or transport.is_closing():
            return
        if load.stopping:
            transport.close()
            return
        head = load.head(self.ledgers, self.sent)
        self.sent += 1
        self.started = time.perf_counter()
        if len(load.body) < _WRITE_ONCE_MAX_BYTES:
            transport.write(head + load.body)
        else:
            transport.writelines((head, load.body))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        if not self.started:
            self.error(f"unexpected bytes from the server: {buffer[:80]!r}")
            return
        if self.answer_end < 0:
            head_end = buffer.find(b"\r\n\r\n")
            if head_end < 0:
                if len(buffer) > RESPONSE_HEAD_MAX_BYTES:
                    self.error(f"answer head over {RESPONSE_HEAD_MAX_BYTES} bytes")
                else:
                    self.buffer = buffer
                return
            try:
                self.status, length, self.keep_alive = parse_head(buffer[: head_end + 4])
            except ValueError as exc:
                self.error(f"ValueError: {exc}")
                return
            self.body_at = head_end + 4
            self.answer_end = self.body_at + length
        if len(buffer) < self.answer_end:
            self.buffer = buffer
            return
        if len(buffer) > self.answer_end:
            self.error("bytes after the answer, with one request in flight")
            return
        latency = time.perf_counter() - self.started
        status, body = self.status, buffer[self.body_at :]
        self.buffer, self.started, self.answer_end = b"", 0.0, -1
        load = self.load
        if load.counting and not load.stopping:
            stats = self.stats
            if status != 200:
                stats.error(f"HTTP {status}: {body.decode(errors='replace')}")
            else:
                stats.requests += 1
                stats.entries += load.batch
                stats.payload_bytes += len(load.payload) * load.batch
                bucket = bucket_of(latency)
                stats.histogram[bucket] = stats.histogram.get(bucket, 0) + 1
        if self.keep_alive:
            self.next()
        else:
            self.transport.close()  # type: ignore[union-attr]  # the client reconnects
