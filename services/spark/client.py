"""A small synchronous client of the gateway's REST API for the Spark connector.

Used on the driver (planning: the log, ledger metadata, LACs) and inside partitions
(the binary range read). A ``SparkGatewayClient`` pickles as its settings only (the httpx
connection pool is made again on first use), so it may travel to executors; the
readers still create their clients inside partitions.

Every failure is one exception class, ``QuireSparkError``, whose text says what the
gateway said (``gateway said 404 log_not_found: log x does not exist``) so a failed
Spark job explains itself without a worker traceback.
"""

from __future__ import annotations

import functools
import ssl
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


class SparkGatewayClient:
    """One gateway (``url``), with the API token (``Authorization: Bearer``) when given.
    A ledger password goes with each call that reads entries or the LAC."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = limits.REQUEST_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self._transport = transport  # tests: a mock gateway (never pickled)
        self._http: httpx.Client | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (SparkGatewayClient, (self.url, self.token, self.timeout_s))

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
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self._http = httpx.Client(
                base_url=self.url,
                headers=headers,
                timeout=self.timeout_s,
                transport=self._transport,
                verify=tls_context(),
            )
        return self._http

    # ------------------------------------------------------------ JSON calls

    def request(
        self,
        method: str,
        path: str,
        password: str | None = None,
        ok: tuple[int, ...] = (200,),
        **kw: Any,
    ) -> Any:
        """One JSON call; its decoded answer (None for 204), or ``QuireSparkError``."""
        headers = dict(kw.pop("headers", None) or {})
        headers.update(password_header(password))
        what = f"{method} {path}"
        try:
            response = self.http.request(method, path, headers=headers, **kw)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc, what) from exc
        if response.status_code not in ok:
            raise _error_of(response, what)
        return None if response.status_code == 204 else response.json()

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
        try:
            with self.http.stream(
                "GET", path, params={"from": first, "to": last}, headers=headers
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise _error_of(response, what)
                for chunks in _gathered(response):
                    data, spans = decoder.feed_spans(*chunks)
                    if spans:
                        yield data, spans
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
