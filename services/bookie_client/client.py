"""The async client of the bookie HTTP API (docs/api.md "Bookie"), used by the gateway and
the replicator.

One ``BookieClient`` per bookie, built once and reused; ``BookieClientPool``
hands them out by bookie id and closes them all in ``aclose()``.

Transport. The client speaks HTTP/1.1 over asyncio streams with a small pool
of keep-alive connections per bookie (``connections_max``, default 16: it
also bounds the requests in flight to one bookie). The data path is few,
large, batched requests, and a bookie is uvicorn+httptools, whose answers are
plain Content-Length (or chunked) HTTP/1.1. httpx and aiohttp on the same path
(benchmarks/client_compare.py) spent several times the client CPU per request
and served fewer requests a second, aiohttp's pool unfairly (benchmarks/README.md,
"Measured choices"). Anything
that speaks ``HttpTransport`` can be passed in instead (the comparison passes
an httpx one). The gateway's batched adds take ``start_add`` instead: callbacks on
connections of their own, no task per request (services/bookie_client/channel.py).

Ordering and retry rules:

- A request holds one connection from write to the end of the response body;
  a connection is reused only after a complete response that did not say
  ``Connection: close``. Any error, timeout or cancellation in the middle
  closes the connection, so a half-read answer never reaches the next caller.
- An idle connection the bookie closed (keep-alive expiry, restart) is found
  out before use when possible, and otherwise when the request gets no byte
  of answer: then the request is sent once more on a new connection. That
  retry is safe because every bookie call is idempotent (docs/api.md: re-adding the
  same entry is a no-op, fence and LAC updates keep the maximum, delete of a
  deleted ledger answers 404).
- Every wait is bounded: ``connect_timeout_s`` for a TCP connect,
  ``request_timeout_s`` for the whole call (waiting for a free connection
  included), or the ``timeout_s`` an add is given (the gateway's adds have a
  shorter one, so a hung bookie is replaced quickly); a long-poll LAC read adds
  its ``wait_ms`` and uses connections of its own (``long_polls_max``) so that
  tailing readers never starve adds.

Errors. A bookie's ``{"error": code}`` answer becomes the matching
``QuireError`` (``error_for_code``); an unknown code or bare failure with a 5xx
status, a malformed answer, and every transport error (refused, reset,
timeout) become ``BookieUnavailable`` raised from the cause. The cluster secret
is sent in a header and never appears in a message or a log line.

TLS. With an ``ssl_context`` every connection to the bookie is TLS, and the bookie's
certificate must be signed by the context's CA bundle and name ``server_hostname``
(default: the host it is reached at); ``BookieClientPool`` passes the host part of the
bookie's id, so a bookie is verified against what it registered as
(docs/security.md, "TLS").

Request ids. A call made while a request is served (services/request_ids.py:
``REQUEST_ID`` is set) sends that id as ``X-Request-Id``, so the bookie's log lines
of the call carry the id of the gateway request behind it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from services.bookie_client.adds import CallbackAdds, add_body
from services.bookie_client.answers import (
    INSTANCE_HEADER,
    answer_error,
    malformed,
    parse_add,
    parse_lac,
    parse_stored,
    transport_error,
)
from services.bookie_client.limits import (
    CONNECT_TIMEOUT_S,
    CONNECTIONS_MAX,
    LONG_POLLS_MAX,
    REQUEST_TIMEOUT_S,
)
from services.bookie_client.results import (
    BookieAddResult,
    EntryResult,
    LacInfo,
    RangeResult,
    StoredInfo,
)
from services.bookie_client.transport import (
    HttpResponse,
    HttpTransport,
    ProtocolError,
    StreamTransport,
    split_address,
)
from services.errors import (
    BookieUnavailable,
    InvalidArgument,
    QuireError,
)
from services.limits import (
    LAC_WAIT_MAX_MS,
    LIST_LIMIT_MAX,
    PAGE_BYTES_MAX,
    PAGE_ENTRIES_MAX,
    RANGE_ENTRIES_MAX,
    STORED_BATCH_MAX,
)
from services.request_ids import REQUEST_ID, REQUEST_ID_HEADER
from services.wire import framing

log = logging.getLogger(__name__)


SECRET_HEADER = "X-Cluster-Secret"
LAST_ENTRY_HEADER = "x-quire-last-entry-id"

T = TypeVar("T")


# --------------------------------------------------------------------------- client


class BookieClient:
    """One bookie's API: adds, reads, LAC, fence, delete, list, stored entries, info."""

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
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
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
            ssl_context=ssl_context,
            server_hostname=server_hostname,
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
                ssl_context=ssl_context,
                server_hostname=server_hostname,
            )
        )

        # The gateway's batched adds (``start_add``): callbacks, no task per request.
        self._adds = CallbackAdds(
            self.host, self.port, self._headers, connect_timeout_s, ssl_context, server_hostname
        )

    def __repr__(self) -> str:  # no secret here
        return f"BookieClient({self.address!r})"

    async def aclose(self) -> None:
        await self._adds.aclose()
        await self._transport.aclose()
        if self._poll_transport is not self._transport:
            await self._poll_transport.aclose()

    async def __aenter__(self) -> BookieClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---------------------------------------------------------------- calls

    async def add(
        self, records: list[framing.FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult:
        """Store entries (of one or several ledgers) in one request. Stored entries are
        durable when this returns; normal adds to a fenced ledger come back in
        ``rejected``. A whole-request failure raises (e.g. ``BookieReadOnly``).
        ``timeout_s`` bounds this call instead of ``request_timeout_s`` (the gateway's
        adds have a shorter one: a hung bookie must be replaced quickly); past it the
        call raises ``BookieUnavailable`` (the add may or may not have been stored)."""
        if not records:
            return BookieAddResult(0, [])
        body = add_body(records)
        response = await self._call(
            "POST",
            "/v1/entries",
            body,
            content_type=framing.MEDIA_TYPE,
            what="add",
            timeout_s=timeout_s,
        )
        doc = self._document(response, "add")
        instance = response.headers.get(INSTANCE_HEADER)
        return self._parsed(lambda d: parse_add(d, instance), doc, "add")

    def start_add(
        self,
        records: list[framing.FramedRecord],
        timeout_s: float,
        done: Callable[[BookieAddResult | QuireError], None],
        request_id: str | None = None,
    ) -> None:
        """``add`` driven by a callback (services/bookie_client/channel.py): the request
        leaves now and ``done`` gets its ``BookieAddResult`` or the ``QuireError`` ``add``
        would raise, on a later loop turn, within ``timeout_s``. ``request_id`` is sent
        as ``X-Request-Id``."""
        self._adds.start(records, timeout_s, done, request_id)

    async def read_entry(self, ledger_id: int, entry_id: int) -> framing.FramedRecord:
        """One entry; ``LedgerNotFound`` / ``EntryNotFound`` when this bookie lacks it."""
        return (await self.read_entry_result(ledger_id, entry_id)).record

    async def read_entry_result(self, ledger_id: int, entry_id: int) -> EntryResult:
        """``read_entry`` with the answering bookie's instance id. The not-found errors
        carry it too, in their ``bookie_instance_id`` attribute."""
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
        return EntryResult(records[0], response.headers.get(INSTANCE_HEADER))

    async def read_range(
        self,
        ledger_id: int,
        first: int,
        last: int,
        max_entries: int = PAGE_ENTRIES_MAX,
        max_bytes: int = PAGE_BYTES_MAX,
        stride: int = 0,
        residues: tuple[int, ...] = (),
    ) -> RangeResult:
        """Entries this bookie stores in [first, last], ascending (missing ids skipped),
        at most ``max_entries`` and about ``max_bytes`` of payload; with a ``stride``,
        only those whose ``entry_id mod stride`` is in ``residues``."""
        max_entries = max(1, min(int(max_entries), RANGE_ENTRIES_MAX))
        max_bytes = max(1, min(int(max_bytes), PAGE_BYTES_MAX))
        what = f"read {ledger_id}/[{first},{last}]"
        target = (
            f"/v1/ledgers/{int(ledger_id)}/entries?from={int(first)}&to={int(last)}"
            f"&max_entries={max_entries}&max_bytes={max_bytes}"
        )
        if stride:
            target += f"&stride={int(stride)}&residues={','.join(str(int(r)) for r in residues)}"
        response = await self._call("GET", target, what=what)
        # Copied payloads: as cheap as views to slice, and pages need not copy them again.
        records = self._decode(response.body, what, max_records=max_entries)
        try:
            last_entry_id = int(response.headers.get(LAST_ENTRY_HEADER, "-1"))
        except ValueError as exc:
            raise self._malformed(what, exc) from exc
        return RangeResult(records, last_entry_id, response.headers.get(INSTANCE_HEADER))

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
        return self._parsed(parse_lac, doc, f"read LAC of {ledger_id}")

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
        return self._parsed(parse_lac, doc, what)

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
        return self._parsed(parse_lac, doc, what)

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

    async def stored(
        self, ledger_id: int, verify: str = "none", timeout_s: float | None = None
    ) -> StoredInfo:
        """Which entries of the ledger this bookie stores, as runs of entry ids; with
        ``verify`` "sample" or "all" it also digest-checks a bounded sample or every
        entry. ``LedgerNotFound`` when the bookie knows nothing of it. ``timeout_s``
        bounds the call instead of ``request_timeout_s`` (a full check of a large
        ledger reads all of it)."""
        if verify not in ("none", "sample", "all"):
            raise InvalidArgument(f"verify must be none, sample or all, not {verify!r}")
        what = f"stored entries of {ledger_id}"
        doc = await self._json(
            "GET",
            f"/v1/ledgers/{int(ledger_id)}/stored?verify={verify}",
            what=what,
            timeout_s=timeout_s,
        )
        return self._parsed(parse_stored, doc, what)

    async def stored_many(
        self, ledger_ids: Sequence[int], verify: str = "none", timeout_s: float | None = None
    ) -> list[StoredInfo]:
        """``stored`` for many ledgers in one request (1 to STORED_BATCH_MAX ids; an empty
        list asks nothing), in the order asked; a ledger the bookie does not know comes
        back with ``known`` False. ``verify`` is "none" or "sample"."""
        if not ledger_ids:
            return []
        if len(ledger_ids) > STORED_BATCH_MAX:
            raise InvalidArgument(
                f"{len(ledger_ids)} ledgers in one request; the limit is {STORED_BATCH_MAX}"
            )
        if verify not in ("none", "sample"):
            raise InvalidArgument(f"verify must be none or sample, not {verify!r}")
        what = f"stored entries of {len(ledger_ids)} ledgers"
        body = json.dumps({"ledger_ids": [int(i) for i in ledger_ids], "verify": verify})
        doc = await self._json(
            "POST",
            "/v1/stored",
            body.encode(),
            content_type="application/json",
            what=what,
            timeout_s=timeout_s,
        )
        items = doc.get("ledgers")
        if not isinstance(items, list) or len(items) != len(ledger_ids):
            raise self._malformed(what, ValueError("not one answer per ledger asked"))
        out = [self._parsed(parse_stored, item, what) for item in items]
        if [info.ledger_id for info in out] != [int(i) for i in ledger_ids]:
            raise self._malformed(what, ValueError("answers not in the order asked"))
        return out

    async def info(self) -> dict[str, Any]:
        """The bookie's id, address, state (writable/readonly), instance id, disk ratios."""
        return await self._json("GET", "/v1/info", what="info")

    async def storage(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The bookie's storage report: file size and free pages, live, orphaned and
        pending-delete ledgers with their reasons, the last garbage-collection pass.
        ``timeout_s`` bounds the call instead of ``request_timeout_s`` (the report sums
        the sizes of every entry stored there)."""
        return await self._json("GET", "/v1/storage", what="storage report", timeout_s=timeout_s)

    async def storage_ledgers(
        self, after: int = -1, limit: int | None = None, timeout_s: float | None = None
    ) -> tuple[list[tuple[int, int]], int | None]:
        """One page of every ledger stored here with its payload bytes, ``(ledger_id,
        bytes)`` in ascending ids, and the ``after`` of the next page (None at the end).
        ``timeout_s`` bounds the call instead of ``request_timeout_s``."""
        params = [f"after={int(after)}"]
        if limit is not None:
            params.append(f"limit={max(1, min(int(limit), LIST_LIMIT_MAX))}")
        target = "/v1/storage/ledgers?" + "&".join(params)
        what = "stored ledgers' bytes"
        doc = await self._json("GET", target, what=what, timeout_s=timeout_s)
        try:
            page = [(int(item["ledger_id"]), int(item["bytes"])) for item in doc["ledgers"]]
            nxt = doc.get("next")
            return page, None if nxt is None else int(nxt)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._malformed(what, exc) from exc

    async def gc(self, dry_run: bool, timeout_s: float | None = None) -> dict[str, Any]:
        """Run a garbage-collection pass on the bookie now (``dry_run``: answer what it
        would free, deleting nothing). ``timeout_s`` bounds the call instead of
        ``request_timeout_s`` (a pass reads the metadata of every ledger stored there)."""
        target = f"/v1/gc?dry_run={'true' if dry_run else 'false'}"
        return await self._json("POST", target, what="garbage collection", timeout_s=timeout_s)

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
        timeout_s: float | None = None,
    ) -> HttpResponse:
        """One request; every failure leaves as a ``QuireError`` (docs/style.md §3). It takes
        at most ``timeout_s`` (default ``request_timeout_s``) plus ``extra_s``."""
        headers = self._headers
        request_id = REQUEST_ID.get()
        if content_type is not None or request_id is not None:
            headers = dict(headers)
            if content_type is not None:
                headers["Content-Type"] = content_type
            if request_id is not None:
                headers[REQUEST_ID_HEADER] = request_id
        transport = self._poll_transport if long_poll else self._transport
        base_s = self.request_timeout_s if timeout_s is None else timeout_s
        timeout_s = base_s + extra_s
        try:
            response = await transport.request(method, target, body, headers, timeout_s)
        except (TimeoutError, OSError, ProtocolError, asyncio.IncompleteReadError) as exc:
            raise self._unavailable(exc, what, timeout_s) from exc
        if response.status >= 400:
            raise self._error(response, what)
        return response

    async def _json(self, method: str, target: str, body: bytes = b"", **kw: Any) -> dict[str, Any]:
        return self._document(await self._call(method, target, body, **kw), kw["what"])

    def _document(self, response: HttpResponse, what: str) -> dict[str, Any]:
        """The answer's body as a JSON object (else a malformed answer)."""
        try:
            doc = json.loads(response.body)
        except ValueError as exc:
            raise self._malformed(what, exc) from exc
        if not isinstance(doc, dict):
            raise self._malformed(what, TypeError("not a JSON object"))
        return doc

    def _unavailable(self, exc: Exception, what: str, timeout_s: float) -> BookieUnavailable:
        return transport_error(self.address, exc, what, timeout_s)

    def _error(self, response: HttpResponse, what: str) -> QuireError:
        return answer_error(self.address, response, what)

    def _decode(self, body: bytes, what: str, max_records: int = 1) -> list[framing.FramedRecord]:
        try:
            return framing.decode(body, max_records=max_records)
        except QuireError as exc:
            raise self._malformed(what, exc) from exc

    def _parsed(self, parse: Callable[[Any], T], doc: Any, what: str) -> T:
        """``parse(doc)`` (``answers.parse_lac``, ``parse_stored``); a document it cannot
        read is a malformed answer."""
        try:
            return parse(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._malformed(what, exc) from exc

    def _malformed(self, what: str, exc: Exception) -> BookieUnavailable:
        return malformed(self.address, what, exc)
