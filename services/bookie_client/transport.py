"""HTTP/1.1 over asyncio streams to one bookie, with a bounded keep-alive pool.

The data path is few, large, batched requests, and a bookie is
uvicorn+httptools, whose answers are plain Content-Length (or chunked)
HTTP/1.1. httpx and aiohttp on the same path (benchmarks/client_compare.py) spent
several times the client CPU per request and served fewer requests a second
(benchmarks/README.md, "Measured choices"). Anything that speaks ``HttpTransport``
can be given to ``BookieClient`` instead.

With an ``ssl_context`` the connections are TLS (docs/security.md, "TLS"): the bookie's
certificate is verified against the context's CA bundle and its name against
``server_hostname``, the host part of the bookie's id, which is what the bookie is
(the address it is reached at may differ). The handshake is part of the connect and of
its time-out; a bookie that fails it is unavailable like one that refuses connections.

A request holds one connection from write to the end of the response body; a
connection is reused only after a complete response that did not say
``Connection: close``. Any error, timeout or cancellation in the middle
closes the connection, so a half-read answer never reaches the next caller.
An idle connection the bookie closed is found out before use when possible,
and otherwise when the request gets no byte of answer (``_StaleConnection``):
then the caller may send it once more on a new connection.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from services.bookie_client.limits import (
    BODY_PIECE_BYTES,
    COALESCE_MAX_BYTES,
    CONNECT_TIMEOUT_S,
    CONNECTIONS_MAX,
    IDLE_CONNECTION_MAX_S,
    RESPONSE_BODY_MAX_BYTES,
    RESPONSE_HEAD_MAX_BYTES,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes


class HttpTransport(Protocol):
    """What ``BookieClient`` needs from HTTP: one request, one complete answer.

    Raises ``OSError``, ``TimeoutError`` or ``ProtocolError`` on failure."""

    async def request(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResponse: ...

    async def aclose(self) -> None: ...


class ProtocolError(Exception):
    """The exchange failed: the peer sent something that is not the HTTP/1.1 we expect,
    closed the connection mid-answer, or did not accept the connection in time."""


class _StaleConnection(Exception):
    """A reused connection closed before it answered a byte: the request was not served."""


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    def reusable(self, now: float) -> bool:
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and now - self.idle_since < IDLE_CONNECTION_MAX_S
        )

    def abort(self) -> None:
        self.writer.transport.abort()


class StreamTransport:
    """HTTP/1.1 over asyncio streams to one host, with a bounded keep-alive pool.

    At most ``connections_max`` requests are in flight; more wait (inside their
    timeout) for a connection. Idle connections are reused newest first, so a
    burst's extra connections age out instead of being kept warm forever."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        connections_max: int = CONNECTIONS_MAX,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        if connections_max < 1:
            raise ValueError("connections_max must be at least 1")
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.server_hostname = (server_hostname or host) if ssl_context is not None else None
        self.connect_timeout_s = connect_timeout_s
        self.connections_max = connections_max
        self._host_header = f"{host}:{port}"
        self._slots = asyncio.Semaphore(connections_max)
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResponse:
        head = self._head(method, target, body, headers)
        async with asyncio.timeout(timeout_s):
            async with self._slots:
                for attempt in range(2):
                    conn, reused = await self._acquire()
                    try:
                        response, keep_alive = await _exchange(conn, head, body, reused)
                    except _StaleConnection:
                        conn.abort()
                        self._drop_idle()  # the bookie went away: the others are stale too
                        if attempt == 0:
                            log.debug("bookie %s closed an idle connection; retrying", self.host)
                            continue
                        raise ProtocolError("connection closed before an answer") from None
                    except BaseException:
                        conn.abort()
                        raise
                    self._release(conn, keep_alive)
                    return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _head(self, method: str, target: str, body: bytes, headers: Mapping[str, str]) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}")
        for name, value in headers.items():
            lines.append(f"{name}: {value}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    async def _acquire(self) -> tuple[_Connection, bool]:
        if self._closed:
            raise ProtocolError("client is closed")
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable(now):
                return conn, True
            conn.abort()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    limit=RESPONSE_HEAD_MAX_BYTES,
                    ssl=self.ssl_context,
                    server_hostname=self.server_hostname,
                )
        except TimeoutError as exc:
            raise ProtocolError(f"connect timed out after {self.connect_timeout_s:g}s") from exc
        return _Connection(reader, writer), False

    def _release(self, conn: _Connection, keep_alive: bool) -> None:
        if keep_alive and not self._closed:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.writer.close()

    def _drop_idle(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.abort()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.writer.close()
        for conn in idle:
            try:
                async with asyncio.timeout(1.0):
                    await conn.writer.wait_closed()
            except (OSError, TimeoutError):
                pass


async def _exchange(
    conn: _Connection, head: bytes, body: bytes, reused: bool
) -> tuple[HttpResponse, bool]:
    """Send one request and read its whole answer. Returns it and whether the
    connection may carry another request."""
    reader, writer = conn.reader, conn.writer
    try:
        if len(body) <= COALESCE_MAX_BYTES:
            writer.write(head + body)  # one segment for the common small request
        else:
            writer.write(head)
            writer.write(body)
        await writer.drain()
        raw_head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if reused and not exc.partial:
            raise _StaleConnection from exc
        raise ProtocolError("connection closed in the middle of an answer") from exc
    except (ConnectionResetError, BrokenPipeError) as exc:
        if reused:
            raise _StaleConnection from exc
        raise
    except asyncio.LimitOverrunError as exc:
        raise ProtocolError(f"answer head over {RESPONSE_HEAD_MAX_BYTES} bytes") from exc

    status, headers = parse_head(raw_head)
    keep_alive = headers.get("connection", "").lower() != "close"
    try:
        if status in (204, 304) or 100 <= status < 200:
            payload = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            payload = await _read_chunked(reader)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError as exc:
                raise ProtocolError("bad Content-Length") from exc
            if not 0 <= length <= RESPONSE_BODY_MAX_BYTES:
                raise ProtocolError(f"answer body of {length} bytes over the limit")
            payload = await _read_exactly(reader, length)
        else:
            # No framing: the body runs to the end of the connection.
            payload = await reader.read(RESPONSE_BODY_MAX_BYTES + 1)
            keep_alive = False
            if len(payload) > RESPONSE_BODY_MAX_BYTES:
                raise ProtocolError("unframed answer body over the limit")
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("connection closed in the middle of an answer body") from exc
    return HttpResponse(status, headers, payload), keep_alive


def parse_head(raw: bytes) -> tuple[int, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _read_exactly(reader: asyncio.StreamReader, length: int) -> bytes:
    """``length`` bytes of ``reader``. A large body comes in pieces of at most
    ``BODY_PIECE_BYTES`` joined once: ``readexactly`` of a whole body grows the reader's
    buffer to its size in steps, each a copy of all of it (benchmarks/README.md,
    "Measured choices")."""
    if length <= BODY_PIECE_BYTES:
        return await reader.readexactly(length)
    parts: list[bytes] = []
    left = length
    while left:
        piece = await reader.read(min(left, BODY_PIECE_BYTES))
        if not piece:
            raise asyncio.IncompleteReadError(b"".join(parts), length)
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise ProtocolError("bad chunk size") from exc
        if size == 0:
            break
        total += size
        if total > RESPONSE_BODY_MAX_BYTES:
            raise ProtocolError("chunked answer body over the limit")
        parts.append((await reader.readexactly(size + 2))[:-2])
    while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
        pass
    return b"".join(parts)


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``http[s]://host:port[/]`` → (host, port). Whether the bookie
    is reached over TLS is the client's setting, not the address's."""
    rest = address.strip().removeprefix("https://").removeprefix("http://").rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bookie address must be host:port, got {address!r}")
    return host.strip("[]"), int(port)
