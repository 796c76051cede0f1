"""A small synchronous client of the gateway's REST API for the Spark connector.

Used on the driver (planning: the log, ledger metadata, LACs) and inside partitions
(the binary range read). A ``SparkGatewayClient`` pickles as its settings only (the httpx
connection pool is made again on first use), so it may travel to executors; the
readers still create their clients inside partitions.

Every failure is one exception class, ``QuireSparkError``, whose text says what the
gateway said (``gateway said 404 log_not_found: log x does not exist``) so a failed
Spark job explains itself without a worker traceback.

A client may be given several gateways (``"http://g1:8080,http://g2:8080"``): it uses
one at a time, the first until it cannot be reached, and moves on to the next when a
call gets no answer. A call that never reached a gateway (the connection refused or
not made in time) is sent to the next at once, whatever it is; a call that may have
reached one and got no answer, or got 503/504 (the gateway's retriable errors: its
ZooKeeper session lost during an election, say), is sent again, after
``RETRY_DELAY_S``, until ``RETRY_BUDGET_S`` is spent, unless its caller says it may
not be repeated (an append, which would land twice: its task fails instead, and
Spark runs it again). Every other call of the connector may be repeated: reads,
closes and deletes are idempotent, an attach that landed answers the same again
(docs/api.md), and a ledger created twice is one its job's commit deletes.
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from services.errors import InvalidArgument
from services.spark import limits
from services.wire.entries_stream import MEDIA_TYPE, FrameDecoder

# Codes the connector itself reports (the gateway's own codes are docs/api.md's).
INVALID_OPTION = "invalid_option"
GATEWAY_UNREACHABLE = "gateway_unreachable"
SHORT_READ = "short_read"
# Answers that say "try again": the gateway's retriable errors (services/errors.py).
RETRIABLE_STATUSES = frozenset({503, 504})
# Transport errors raised before the request left: nothing reached the gateway.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)


class QuireSparkError(Exception):
    """A Quire Spark job cannot go on: a bad option, or an error answer of the gateway
    (``status`` and ``code`` as docs/api.md says; ``status`` 0 for errors of the connector
    itself)."""

    def __init__(self, code: str, message: str, status: int = 0) -> None:
        self.code = code
        self.message = message
        self.status = status
        super().__init__(self._text())

    def _text(self) -> str:
        if self.status:
            return f"gateway said {self.status} {self.code}: {self.message}"
        return f"{self.code}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (QuireSparkError, (self.code, self.message, self.status))


def _error_of(response: httpx.Response, what: str) -> QuireSparkError:
    """The gateway's ``{"error", "message"}`` answer as an exception."""
    try:
        doc = response.json()
        code, message = str(doc["error"]), str(doc["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "http_error", response.text[:200] or response.reason_phrase
    return QuireSparkError(code, f"{message} ({what})", response.status_code)


def gateway_list(text: str) -> tuple[str, ...]:
    """The gateways of a ``gateway`` option: one URL or several separated by commas,
    each without its trailing slash."""
    return tuple(url.strip().rstrip("/") for url in text.split(",") if url.strip())


class SparkGatewayClient:
    """A gateway, or several in turn (``url``: URLs separated by commas; ``url`` is then
    the one in use), with the API token (``Authorization: Bearer``) when given. A ledger
    password goes with each call that reads entries or the LAC."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = limits.REQUEST_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.urls = gateway_list(url) or (url,)
        self.current = 0
        self.token = token
        self.timeout_s = timeout_s
        self._transport = transport  # tests: a mock gateway (never pickled)
        self._http: httpx.Client | None = None

    @property
    def url(self) -> str:
        """The gateway in use."""
        return self.urls[self.current]

    def __reduce__(self) -> tuple[Any, ...]:
        return (SparkGatewayClient, (",".join(self.urls), self.token, self.timeout_s))

    def __enter__(self) -> SparkGatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    @property
    def http(self) -> httpx.Client:
        """One connection pool for every gateway (calls name their gateway's URL)."""
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self._http = httpx.Client(
                headers=headers,
                timeout=self.timeout_s,
                transport=self._transport,
                verify=tls_context(),
            )
        return self._http

    def _next_gateway(self) -> None:
        self.current = (self.current + 1) % len(self.urls)

    # ------------------------------------------------------------ JSON calls

    def request(
        self,
        method: str,
        path: str,
        password: str | None = None,
        ok: tuple[int, ...] = (200,),
        repeatable: bool = True,
        **kw: Any,
    ) -> Any:
        """One JSON call; its decoded answer (None for 204), or ``QuireSparkError``. A
        call that reached no gateway goes to the next; one without an answer, or
        answered 503/504, is sent again until ``RETRY_BUDGET_S`` is spent, unless it is
        not ``repeatable`` (the module's docstring)."""
        headers = dict(kw.pop("headers", None) or {})
        headers.update(password_header(password))
        what = f"{method} {path}"
        deadline = time.monotonic() + limits.RETRY_BUDGET_S
        untried = len(self.urls) - 1  # gateways left before a pause
        while True:
            url = self.url
            try:
                response = self.http.request(method, url + path, headers=headers, **kw)
            except httpx.HTTPError as exc:
                failure = self._unreachable(exc, what)
                self._next_gateway()
                if not isinstance(exc, NOT_SENT):
                    if not repeatable:
                        raise failure from exc
                elif untried > 0:
                    untried -= 1
                    continue
            else:
                if response.status_code in ok:
                    return None if response.status_code == 204 else response.json()
                failure = _error_of(response, what)
                if not repeatable or response.status_code not in RETRIABLE_STATUSES:
                    raise failure
            if time.monotonic() + limits.RETRY_DELAY_S > deadline:
                raise failure
            time.sleep(limits.RETRY_DELAY_S)
            untried = len(self.urls) - 1

    def get_log(self, name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self.request("GET", f"/v1/logs/{name}")
        return doc

    def ledger(self, ledger_id: int) -> dict[str, Any]:
        doc: dict[str, Any] = self.request("GET", f"/v1/ledgers/{ledger_id}")
        return doc

    def lac(self, ledger_id: int, password: str | None = None) -> int:
        doc = self.request("GET", f"/v1/ledgers/{ledger_id}/lac", password)
        return int(doc["last_add_confirmed"])

    # ------------------------------------------------------------ binary range read

    def read_range(
        self, ledger_id: int, first: int, last: int, password: str | None = None
    ) -> Iterator[list[tuple[int, bytes]]]:
        """Entries ``first..last`` of a ledger, streamed in the binary format, as lists
        of ``(entry_id, payload)`` in order (one list per chunk received). Entries the
        gateway cannot serve (past its readable end) simply do not come; the caller
        checks it got what it planned."""
        for data, spans in self.read_range_spans(ledger_id, first, last, password):
            yield [(entry_id, data[start:end]) for entry_id, start, end in spans]

    def read_range_spans(
        self, ledger_id: int, first: int, last: int, password: str | None = None
    ) -> Iterator[tuple[bytes, list[tuple[int, int, int]]]]:
        """``read_range`` as ``FrameDecoder.feed_spans`` gives it: per chunk received,
        its bytes and each entry's ``(entry_id, payload start, payload end)``."""
        path = f"/v1/ledgers/{ledger_id}/entries"
        what = f"GET {path}?from={first}&to={last}"
        headers = {"Accept": MEDIA_TYPE, **password_header(password)}
        decoder = FrameDecoder()
        params = {"from": first, "to": last}
        for untried in range(len(self.urls) - 1, -1, -1):
            try:
                with self.http.stream(
                    "GET", self.url + path, params=params, headers=headers
                ) as response:
                    if response.status_code != 200:
                        response.read()
                        raise _error_of(response, what)
                    for chunks in _gathered(response):
                        data, spans = decoder.feed_spans(*chunks)
                        if spans:
                            yield data, spans
                break
            except NOT_SENT as exc:  # nothing was read yet: the next gateway, if any
                failure = self._unreachable(exc, what)
                self._next_gateway()
                if not untried:
                    raise failure from exc
            except httpx.HTTPError as exc:
                raise self._unreachable(exc, what) from exc
            except InvalidArgument as exc:
                raise QuireSparkError(SHORT_READ, f"{what}: a broken frame: {exc}") from exc
        if decoder.pending:
            # The stream ended inside a frame: the gateway stopped mid-range.
            raise QuireSparkError(SHORT_READ, f"{what}: the stream ended inside a frame")

    def _unreachable(self, exc: httpx.HTTPError, what: str) -> QuireSparkError:
        return QuireSparkError(
            GATEWAY_UNREACHABLE, f"{what} on {self.url}: {type(exc).__name__}: {exc}"
        )


def _gathered(response: httpx.Response) -> Iterator[list[bytes]]:
    """The body as it arrives from the socket, in groups of about ``STREAM_CHUNK_BYTES``.
    ``iter_bytes(n)`` would give the same bytes re-cut through a buffer (two copies of
    every byte); the decoder joins a group in one copy. A
    body with a content encoding (never the gateway's own) is decoded first."""
    if response.headers.get("content-encoding", "identity") != "identity":
        for chunk in response.iter_bytes(limits.STREAM_CHUNK_BYTES):
            yield [chunk]
        return
    group: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():
        group.append(chunk)
        size += len(chunk)
        if size >= limits.STREAM_CHUNK_BYTES:
            yield group
            group, size = [], 0
    if group:
        yield group


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one verifying TLS context of this process (httpx's default: its CA bundle,
    or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``). httpx would otherwise build one for every
    client, loading the CA bundle each time, paid by every Spark task and every planning
    of a job (benchmarks/README.md, "Measured choices")."""
    return httpx.create_ssl_context()


def password_header(password: str | None) -> Mapping[str, str]:
    return {"X-Ledger-Password": password} if password is not None else {}
