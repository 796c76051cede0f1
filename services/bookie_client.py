"""The async client of the bookie HTTP API (bookie/API.md), used by the gateway and
the replicator.

One ``BookieClient`` per bookie, built once and reused; ``BookieClientPool``
hands them out by bookie id and closes them all in ``aclose()``.

Transport. The client speaks HTTP/1.1 over asyncio streams with a small pool
of keep-alive connections per bookie (``connections_max``, default 16: it
also bounds the requests in flight to one bookie). The data path is few,
large, batched requests, and a bookie is uvicorn+httptools, whose answers are
plain Content-Length (or chunked) HTTP/1.1. We measured httpx on the same
path (benchmarks/README.md, benchmarks/client_compare.py): 1.2-2 ms of client
CPU per request against 45-300 us here, and 3-10x fewer requests/s; one
AsyncClient with a large pool is the worst case (encode/httpx#3215). Anything
that speaks ``HttpTransport`` can be passed in instead (the comparison passes
an httpx one).

Ordering and retry rules:

- A request holds one connection from write to the end of the response body;
  a connection is reused only after a complete response that did not say
  ``Connection: close``. Any error, timeout or cancellation in the middle
  closes the connection, so a half-read answer never reaches the next caller.
- An idle connection the bookie closed (keep-alive expiry, restart) is found
  out before use when possible, and otherwise when the request gets no byte
  of answer: then the request is sent once more on a new connection. That
  retry is safe because every bookie call is idempotent (API.md: re-adding an
  entry overwrites it, fence and LAC updates keep the maximum, delete of a
  deleted ledger answers 404).
- Every wait is bounded: ``connect_timeout_s`` for a TCP connect,
  ``request_timeout_s`` for the whole call (waiting for a free connection
  included); a long-poll LAC read adds its ``wait_ms`` and uses connections of
  its own (``long_polls_max``) so that tailing readers never starve adds.

Errors. A bookie's ``{"error": code}`` answer becomes the matching
``QuireError`` (``error_for_code``); an unknown code or bare failure with a 5xx
status, a malformed answer, and every transport error (refused, reset,
timeout) become ``BookieUnavailable`` raised from the cause. The cluster secret
is sent in a header and never appears in a message or a log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from services import framing
from services.errors import (
    BookieUnavailable,
    Conflict,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    QuireError,
    Unauthorized,
    error_for_code,
)

log = logging.getLogger(__name__)

# Bounds (STYLE.md §5).
CONNECT_TIMEOUT_S = 2.0
REQUEST_TIMEOUT_S = 10.0
CONNECTIONS_MAX = 16
LONG_POLLS_MAX = 16
LAC_WAIT_MAX_MS = 30_000
# uvicorn closes an idle keep-alive connection after 30 s (services/serve.py);
# we drop ours well before, so we rarely race the server's close.
IDLE_CONNECTION_MAX_S = 15.0
RESPONSE_HEAD_MAX_BYTES = 64 * 1024
# A range read returns at most 8 MiB of payload, but its first entry always
# comes whole (up to 5 MiB); add record headers and digests and round up.
RESPONSE_BODY_MAX_BYTES = 32 * 1024 * 1024
_COALESCE_MAX_BYTES = 256 * 1024
RANGE_ENTRIES_MAX = 1_000
RANGE_BYTES_MAX = 8 * 1024 * 1024
LIST_LIMIT_MAX = 1_000
LAC_BATCH_MAX = 10_000

SECRET_HEADER = "X-Cluster-Secret"
LAST_ENTRY_HEADER = "x-quire-last-entry-id"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class AddResult:
    """What a bookie did with one add request: entries stored, and the ones it refused
    as ``(ledger_id, entry_id, error_code)`` (e.g. ``ledger_fenced``)."""

    stored: int
    rejected: list[tuple[int, int, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RangeResult:
    """Entries of a range read, ascending, and the last entry id the bookie stores
    for the ledger (-1 if none)."""

    records: list[framing.Record]
    last_entry_id: int


@dataclass(frozen=True, slots=True)
class LacInfo:
    ledger_id: int
    lac: int
    last_entry_id: int
    fenced: bool


# --------------------------------------------------------------------------- transport


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
    ) -> None:
        if connections_max < 1:
            raise ValueError("connections_max must be at least 1")
        self.host = host
        self.port = port
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
                    self.host, self.port, limit=RESPONSE_HEAD_MAX_BYTES
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
        if len(body) <= _COALESCE_MAX_BYTES:
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

    status, headers = _parse_head(raw_head)
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
            payload = await reader.readexactly(length)
        else:
            # No framing: the body runs to the end of the connection.
            payload = await reader.read(RESPONSE_BODY_MAX_BYTES + 1)
            keep_alive = False
            if len(payload) > RESPONSE_BODY_MAX_BYTES:
                raise ProtocolError("unframed answer body over the limit")
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("connection closed in the middle of an answer body") from exc
    return HttpResponse(status, headers, payload), keep_alive


def _parse_head(raw: bytes) -> tuple[int, dict[str, str]]:
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
    """``host:port`` or ``http://host:port[/]`` → (host, port)."""
    rest = address.strip()
    if rest.startswith("https://"):
        raise ValueError(f"bookie address {address!r}: https is not supported")
    rest = rest.removeprefix("http://").rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bookie address must be host:port, got {address!r}")
    return host.strip("[]"), int(port)


# --------------------------------------------------------------------------- client


class BookieClient:
    """One bookie's API: adds, reads, LAC, fence, delete, list, info."""

    def __init__(
        self,
        address: str,
        cluster_secret: str | None = None,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        connections_max: int = CONNECTIONS_MAX,
        long_polls_max: int = LONG_POLLS_MAX,
        transport: HttpTransport | None = None,
    ) -> None:
        self.host, self.port = split_address(address)
        self.address = f"{self.host}:{self.port}"
        self.request_timeout_s = request_timeout_s
        self._headers: dict[str, str] = {}
        if cluster_secret:
            if any(c in cluster_secret for c in "\r\n\0"):
                raise ValueError("the cluster secret holds a control character")
            self._headers[SECRET_HEADER] = cluster_secret
        self._transport: HttpTransport = transport or StreamTransport(
            self.host,
            self.port,
            connect_timeout_s=connect_timeout_s,
            connections_max=connections_max,
        )
        # Long polls hold a connection for up to LAC_WAIT_MAX_MS; they get their own.
        self._poll_transport: HttpTransport = (
            transport
            if transport is not None
            else StreamTransport(
                self.host,
                self.port,
                connect_timeout_s=connect_timeout_s,
                connections_max=long_polls_max,
            )
        )

    def __repr__(self) -> str:  # no secret here
        return f"BookieClient({self.address!r})"

    async def aclose(self) -> None:
        await self._transport.aclose()
        if self._poll_transport is not self._transport:
            await self._poll_transport.aclose()

    async def __aenter__(self) -> BookieClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---------------------------------------------------------------- calls

    async def add(self, records: list[framing.Record]) -> AddResult:
        """Store entries (of one or several ledgers) in one request. Stored entries are
        durable when this returns; normal adds to a fenced ledger come back in
        ``rejected``. A whole-request failure raises (e.g. ``BookieReadOnly``)."""
        if not records:
            return AddResult(0, [])
        if len(records) > framing.BATCH_ENTRIES_MAX:
            raise PayloadTooLarge(
                f"{len(records)} entries in one add; the limit is {framing.BATCH_ENTRIES_MAX}"
            )
        body = framing.encode(records)
        if len(body) > framing.BODY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(
                f"add body of {len(body)} bytes; the limit is {framing.BODY_SIZE_MAX_BYTES}"
            )
        doc = await self._json(
            "POST", "/v1/entries", body, content_type=framing.MEDIA_TYPE, what="add"
        )
        try:
            rejected = [
                (int(r["ledger_id"]), int(r["entry_id"]), str(r["error"]))
                for r in doc.get("rejected", [])
            ]
            return AddResult(int(doc["stored"]), rejected)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._malformed("add", exc) from exc

    async def read_entry(self, ledger_id: int, entry_id: int) -> framing.Record:
        """One entry; ``LedgerNotFound`` / ``EntryNotFound`` when this bookie lacks it."""
        what = f"read {ledger_id}/{entry_id}"
        response = await self._call(
            "GET", f"/v1/ledgers/{int(ledger_id)}/entries/{int(entry_id)}", what=what
        )
        records = self._decode(response.body, what)
        if len(records) != 1 or (records[0].ledger_id, records[0].entry_id) != (
            ledger_id,
            entry_id,
        ):
            raise BookieUnavailable(f"bookie {self.address}: {what} answered another entry")
        return records[0]

    async def read_range(
        self,
        ledger_id: int,
        first: int,
        last: int,
        max_entries: int = RANGE_ENTRIES_MAX,
        max_bytes: int = RANGE_BYTES_MAX,
    ) -> RangeResult:
        """Entries this bookie stores in [first, last], ascending (missing ids skipped),
        at most ``max_entries`` and about ``max_bytes`` of payload."""
        max_entries = max(1, min(int(max_entries), RANGE_ENTRIES_MAX))
        max_bytes = max(1, min(int(max_bytes), RANGE_BYTES_MAX))
        what = f"read {ledger_id}/[{first},{last}]"
        response = await self._call(
            "GET",
            f"/v1/ledgers/{int(ledger_id)}/entries?from={int(first)}&to={int(last)}"
            f"&max_entries={max_entries}&max_bytes={max_bytes}",
            what=what,
        )
        records = self._decode(response.body, what, max_records=max_entries)
        try:
            last_entry_id = int(response.headers.get(LAST_ENTRY_HEADER, "-1"))
        except ValueError as exc:
            raise self._malformed(what, exc) from exc
        return RangeResult(records, last_entry_id)

    async def read_lac(self, ledger_id: int, after: int | None = None, wait_ms: int = 0) -> LacInfo:
        """The ledger's LAC and last stored entry here. With ``after``, the bookie waits
        up to ``wait_ms`` for either to pass it (a long poll), then answers anyway."""
        target = f"/v1/ledgers/{int(ledger_id)}/lac"
        wait_ms = max(0, min(int(wait_ms), LAC_WAIT_MAX_MS))
        long_poll = after is not None and wait_ms > 0
        if after is not None:
            target += f"?after={int(after)}&wait_ms={wait_ms}"
        doc = await self._json(
            "GET",
            target,
            what=f"read LAC of {ledger_id}",
            extra_s=wait_ms / 1000 if long_poll else 0.0,
            long_poll=long_poll,
        )
        return self._lac(doc, f"read LAC of {ledger_id}")

    async def write_lac(self, ledger_id: int, lac: int) -> LacInfo:
        """Raise this bookie's LAC of the ledger to at least ``lac``."""
        what = f"write LAC of {ledger_id}"
        doc = await self._json(
            "POST",
            f"/v1/ledgers/{int(ledger_id)}/lac",
            json.dumps({"lac": int(lac)}).encode(),
            content_type="application/json",
            what=what,
        )
        return self._lac(doc, what)

    async def write_lacs(self, lacs: Mapping[int, int]) -> int:
        """Raise this bookie's LAC of each ledger to at least the given one, in one
        request (at most LAC_BATCH_MAX ledgers); returns how many were written."""
        what = f"write LACs of {len(lacs)} ledgers"
        body = json.dumps(
            {"lacs": [{"ledger_id": int(k), "lac": int(v)} for k, v in lacs.items()]}
        ).encode()
        doc = await self._json("POST", "/v1/lacs", body, content_type="application/json", what=what)
        updated = doc.get("updated")
        if not isinstance(updated, int):
            raise self._malformed(what, ValueError(f"no count in {doc!r}"))
        return updated

    async def fence(self, ledger_id: int) -> LacInfo:
        """Fence the ledger here; the flag is durable before the bookie answers."""
        what = f"fence {ledger_id}"
        doc = await self._json("POST", f"/v1/ledgers/{int(ledger_id)}/fence", what=what)
        return self._lac(doc, what)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Remove the ledger's entries and flags; ``LedgerNotFound`` if it has none here."""
        await self._call("DELETE", f"/v1/ledgers/{int(ledger_id)}", what=f"delete {ledger_id}")

    async def list_ledgers(
        self, after: int | None = None, limit: int | None = None
    ) -> tuple[list[int], int | None]:
        """One page of the ledger ids stored here, and the ``after`` of the next page."""
        params = []
        if after is not None:
            params.append(f"after={int(after)}")
        if limit is not None:
            params.append(f"limit={max(1, min(int(limit), LIST_LIMIT_MAX))}")
        target = "/v1/ledgers" + ("?" + "&".join(params) if params else "")
        doc = await self._json("GET", target, what="list ledgers")
        try:
            ids = [int(i) for i in doc["ledgers"]]
            nxt = doc.get("next")
            return ids, None if nxt is None else int(nxt)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._malformed("list ledgers", exc) from exc

    async def info(self) -> dict[str, Any]:
        """The bookie's id, address, state (writable/readonly), instance id, disk ratios."""
        return await self._json("GET", "/v1/info", what="info")

    # ---------------------------------------------------------------- plumbing

    async def _call(
        self,
        method: str,
        target: str,
        body: bytes = b"",
        *,
        content_type: str | None = None,
        what: str,
        extra_s: float = 0.0,
        long_poll: bool = False,
    ) -> HttpResponse:
        """One request; every failure leaves as a ``QuireError`` (STYLE.md §3)."""
        headers = self._headers
        if content_type is not None:
            headers = {**headers, "Content-Type": content_type}
        transport = self._poll_transport if long_poll else self._transport
        timeout_s = self.request_timeout_s + extra_s
        try:
            response = await transport.request(method, target, body, headers, timeout_s)
        except TimeoutError as exc:
            raise BookieUnavailable(
                f"bookie {self.address}: {what}: no answer within {timeout_s:g}s"
            ) from exc
        except (OSError, ProtocolError, asyncio.IncompleteReadError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise BookieUnavailable(
                f"bookie {self.address}: {what}: {type(exc).__name__}: {reason}"
            ) from exc
        if response.status >= 400:
            raise self._error(response, what)
        return response

    async def _json(self, method: str, target: str, body: bytes = b"", **kw: Any) -> dict:
        what = kw["what"]
        response = await self._call(method, target, body, **kw)
        try:
            doc = json.loads(response.body)
        except ValueError as exc:
            raise self._malformed(what, exc) from exc
        if not isinstance(doc, dict):
            raise self._malformed(what, TypeError("not a JSON object"))
        return doc

    def _error(self, response: HttpResponse, what: str) -> QuireError:
        """The ``QuireError`` for an error answer (API.md: ``{"error", "message"}``)."""
        status = response.status
        code = message = None
        try:
            doc = json.loads(response.body)
            if isinstance(doc, dict) and isinstance(doc.get("error"), str):
                code, message = doc["error"], doc.get("message")
        except ValueError:
            pass
        if code is not None:
            cls = error_for_code(code)
            if status >= 500 and cls is QuireError:
                # "internal" or a code we do not know: the bookie failed.
                cls = BookieUnavailable
            return cls(f"bookie {self.address}: {what}: {message or code}")
        if status >= 500:
            return BookieUnavailable(
                f"bookie {self.address}: {what}: HTTP {status} without an error body"
            )
        cls = _BY_STATUS.get(status, QuireError)
        return cls(f"bookie {self.address}: {what}: HTTP {status}")

    def _decode(self, body: bytes, what: str, max_records: int = 1) -> list[framing.Record]:
        try:
            return framing.decode(body, max_records=max_records)
        except QuireError as exc:
            raise self._malformed(what, exc) from exc

    def _lac(self, doc: dict, what: str) -> LacInfo:
        try:
            return LacInfo(
                int(doc["ledger_id"]),
                int(doc["lac"]),
                int(doc["last_entry_id"]),
                bool(doc["fenced"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise self._malformed(what, exc) from exc

    def _malformed(self, what: str, exc: Exception) -> BookieUnavailable:
        return BookieUnavailable(f"bookie {self.address}: {what}: malformed answer ({exc})")


_BY_STATUS: dict[int, type[QuireError]] = {
    400: InvalidArgument,
    401: Unauthorized,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
}


class BookieClientPool:
    """One long-lived ``BookieClient`` per bookie id, created on first use and closed
    in ``aclose()``. A bookie's id is its advertised ``host:port`` (bookie/API.md)."""

    def __init__(
        self,
        cluster_secret: str | None = None,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        connections_max: int = CONNECTIONS_MAX,
        long_polls_max: int = LONG_POLLS_MAX,
    ) -> None:
        self._secret = cluster_secret
        self._options = {
            "connect_timeout_s": connect_timeout_s,
            "request_timeout_s": request_timeout_s,
            "connections_max": connections_max,
            "long_polls_max": long_polls_max,
        }
        self._clients: dict[str, BookieClient] = {}
        self._closed = False

    def get(self, bookie_id: str, address: str | None = None) -> BookieClient:
        """The client of ``bookie_id`` (reached at ``address``, by default the id)."""
        client = self._clients.get(bookie_id)
        if client is None:
            if self._closed:
                raise BookieUnavailable(f"bookie {bookie_id}: the client pool is closed")
            client = BookieClient(address or bookie_id, self._secret, **self._options)
            self._clients[bookie_id] = client
        return client

    __getitem__ = get

    def __contains__(self, bookie_id: str) -> bool:
        return bookie_id in self._clients

    async def discard(self, bookie_id: str) -> None:
        """Close and forget one bookie's client (e.g. its address changed)."""
        client = self._clients.pop(bookie_id, None)
        if client is not None:
            await client.aclose()

    async def aclose(self) -> None:
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
