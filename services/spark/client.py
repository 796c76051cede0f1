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

An https gateway is verified against the CA bundle of ``TlsOptions`` (the options
``caFile``, ``certFile`` and ``keyFile``, services/spark/options.py), or the system's
without one. A gateway whose certificate does not verify is no gateway to wait for: the
call goes to the next gateway when there is one, and fails at once, naming the URL and
what it was verified against, when there is none (docs/security.md, "TLS"); so does
one that refuses the handshake (it requires a client certificate, ``certFile`` and
``keyFile``, signed by its CA).
"""

from __future__ import annotations

import functools
import os
import ssl
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from services.errors import InvalidArgument
from services.protocol.logs import Position
from services.spark import limits
from services.tls.contexts import TlsError, add_certificate, verifying_context
from services.wire.entries_stream import MEDIA_TYPE, FrameDecoder

# Codes the connector itself reports (the gateway's own codes are docs/api.md's).
INVALID_OPTION = "invalid_option"
GATEWAY_UNREACHABLE = "gateway_unreachable"
GATEWAY_NOT_VERIFIED = "gateway_not_verified"
GATEWAY_TLS_REFUSED = "gateway_tls_refused"
# TLS failures no wait will mend, where the gateway served no request: its certificate
# does not verify, or it refused the handshake (an alert: our certificate missing or
# not signed by its CA). Transient ones (a connection cut mid-handshake) are not here.
TLS_FAILURES = frozenset({GATEWAY_NOT_VERIFIED, GATEWAY_TLS_REFUSED})
SHORT_READ = "short_read"
# A gateway's answer that does not have the shape docs/api.md gives it.
BAD_ANSWER = "bad_answer"
# Answers that say "try again": the gateway's retriable errors (services/errors.py).
RETRIABLE_STATUSES = frozenset({503, 504})
# Transport errors raised before the request left: nothing reached the gateway.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
# The gateway closed the connection without an answer. Over TLS 1.3 that is also how the
# gateway (asyncio's TLS) refuses a client without a certificate when it requires one:
# no alert comes, so a message says what to check.
CLOSED = (httpx.RemoteProtocolError, httpx.ReadError)
NO_CERTIFICATE_HINT = (
    " (no client certificate was shown: if the gateway requires one, give the options "
    "'certFile' and 'keyFile')"
)


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


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """What the connector trusts and shows on an https gateway: ``ca_file``, a PEM bundle
    of the CAs that sign the gateway's certificate (None: the system's bundle), and
    ``cert_file`` with ``key_file``, a certificate chain and its unencrypted key, for a
    gateway that requires client certificates. Paths are absolute (made so on the
    driver), so an executor in another directory reads the same files. ``ca_source``
    says where the CA bundle was named (the option or the variable), for messages."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    ca_source: str = field(default="option 'caFile'", compare=False)


class SparkGatewayClient:
    """A gateway, or several in turn (``url``: URLs separated by commas; ``url`` is then
    the one in use), with the API token (``Authorization: Bearer``) when given, verified
    over https as ``tls`` says. A ledger password goes with each call that reads entries
    or the LAC."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = limits.REQUEST_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        tls: TlsOptions = TlsOptions(),
    ) -> None:
        self.urls = gateway_list(url) or (url,)
        self.current = 0
        self.token = token
        self.timeout_s = timeout_s
        self.tls = tls
        self._transport = transport  # tests: a mock gateway (never pickled)
        self._http: httpx.Client | None = None

    @property
    def url(self) -> str:
        """The gateway in use."""
        return self.urls[self.current]

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            SparkGatewayClient,
            (",".join(self.urls), self.token, self.timeout_s, None, self.tls),
        )

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
                verify=tls_context(self.tls),
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
                tls_failure = failure.code in TLS_FAILURES
                if tls_failure or isinstance(exc, NOT_SENT):
                    if untried > 0:
                        untried -= 1
                        continue
                    if tls_failure:
                        raise failure from exc  # waiting will not make the handshake pass
                elif not repeatable:
                    raise failure from exc
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

    def position_at_time(self, name: str, from_ms: int) -> Position | None:
        """Where a read of log ``name`` from time ``from_ms`` starts (the gateway's search,
        ``from_time``): the first record stamped at or after it, or the end of the log;
        None when the log has no ledger yet (its start). One read of at most one record."""
        doc = self.request(
            "GET", f"/v1/logs/{name}/records", params={"from_time": from_ms, "limit": 1}
        )
        try:
            records = doc["records"]
            found = records[0]["position"] if records else doc["next"]
            return None if found is None else Position.from_api(found)
        except (KeyError, TypeError, IndexError, InvalidArgument) as exc:
            raise QuireSparkError(
                BAD_ANSWER, f"the gateway's answer to a read from a time is malformed ({exc})"
            ) from exc

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
        tls = _tls_error(exc)
        if isinstance(tls, ssl.SSLCertVerificationError):
            return QuireSparkError(
                GATEWAY_NOT_VERIFIED,
                f"{what}: the certificate of {self.url} is not verified by "
                f"{self._trusted()}: {tls.verify_message or tls.reason}",
            )
        if tls is not None and "_ALERT_" in (tls.reason or ""):
            shown = (
                f"the certificate {self.tls.cert_file} (options 'certFile' and 'keyFile')"
                if self.tls.cert_file is not None
                else "none (a client certificate is given with the options 'certFile' and "
                "'keyFile')"
            )
            return QuireSparkError(
                GATEWAY_TLS_REFUSED,
                f"{what}: {self.url} refused the TLS handshake ({tls.reason}); the client "
                f"certificate shown: {shown}",
            )
        hint = ""
        if isinstance(exc, CLOSED) and self.url.startswith("https:") and not self.tls.cert_file:
            hint = NO_CERTIFICATE_HINT
        return QuireSparkError(
            GATEWAY_UNREACHABLE, f"{what} on {self.url}: {type(exc).__name__}: {exc}{hint}"
        )

    def _trusted(self) -> str:
        """What this client verifies a gateway against, as a message says it."""
        if self.tls.ca_file is None:
            return (
                "the system's CA bundle (name the gateway's CA with the option 'caFile' "
                "or the variable QUIRE_CA_FILE)"
            )
        return f"the CA bundle {self.tls.ca_file} ({self.tls.ca_source})"


def _tls_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS failure under an httpx error, if that is what it is (httpx and httpcore
    each chain the error they translate)."""
    seen: BaseException | None = exc
    for _ in range(limits.ERROR_CHAIN_MAX):
        if seen is None or isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


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


def tls_context(tls: TlsOptions = TlsOptions()) -> ssl.SSLContext:
    """The verifying TLS context of this process for ``tls``: one per (CA bundle,
    certificate, key) and the files' modification times, so a Python worker, which
    Spark keeps for many tasks, builds it once and a rewritten file is read again. httpx
    would otherwise build one for every client, loading the CA bundle each time, paid by
    every Spark task and every planning of a job (benchmarks/README.md, "Measured
    choices"). A file that cannot be used is a ``QuireSparkError`` (``invalid_option``)
    naming its option."""
    stamps = tuple(_modified_ns(path, option) for path, option in _files(tls))
    return _context(tls, stamps)


def _files(tls: TlsOptions) -> list[tuple[str, str]]:
    """The files of ``tls`` with the option (or variable) that named each."""
    named = [(tls.ca_file, tls.ca_source), (tls.cert_file, "option 'certFile'")]
    named.append((tls.key_file, "option 'keyFile'"))
    return [(path, option) for path, option in named if path is not None]


def _modified_ns(path: str, option: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError as exc:
        why = exc.strerror or "cannot be read"
        raise QuireSparkError(INVALID_OPTION, f"{option}: {path}: {why}") from None


@functools.lru_cache(maxsize=limits.TLS_CONTEXTS_MAX)
def _context(tls: TlsOptions, stamps: tuple[int, ...]) -> ssl.SSLContext:
    """``tls_context``'s context, built (``stamps`` is part of the cache's key only) as
    the CLI builds its own (services/tls/contexts.py), a refused file named by its
    option."""
    if tls.ca_file is None:
        context = httpx.create_ssl_context()  # its CA bundle, or SSL_CERT_FILE / _DIR
    else:
        try:
            context = verifying_context(Path(tls.ca_file))
        except TlsError as exc:
            raise QuireSparkError(INVALID_OPTION, f"{tls.ca_source}: {exc}") from None
    if tls.cert_file is not None and tls.key_file is not None:
        try:
            add_certificate(context, Path(tls.cert_file), Path(tls.key_file))
        except TlsError as exc:
            raise QuireSparkError(
                INVALID_OPTION, f"options 'certFile' and 'keyFile': {exc}"
            ) from None
    return context


def password_header(password: str | None) -> Mapping[str, str]:
    return {"X-Ledger-Password": password} if password is not None else {}
