"""The ``quire`` commands' HTTP client of a gateway, and how they report its errors.

A thin synchronous wrapper over ``httpx.Client`` (one command is a handful
of calls; the data path of ``quire bench`` does not use it). It adds the API
token and the ledger password headers and turns every failure into a
``QuireError`` at this one boundary (docs/style.md §3):

- an API error answer ``{"error", "message"}`` becomes its class
  (``error_for_code``), with the answer's message;
- an answer that is not one (a proxy's HTML page, a body cut short) becomes
  ``QuireError`` with the status;
- a transport failure (refused, reset, DNS, timeout) becomes
  ``GatewayUnreachable``, whose message names the URL.

``reported()`` prints such an error as ``quire: error: CODE: MESSAGE`` on
stderr and exits with the code of its class (``EXIT_CODES``), so scripts can
tell "no such ledger" from "gateway down" without parsing text. Neither the
token nor the password ever appears in a message.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.console import Console

from services.cli.limits import CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S
from services.errors import (
    Conflict,
    Forbidden,
    GatewayUnreachable,
    InvalidArgument,
    NotFound,
    PayloadTooLarge,
    PositionMismatch,
    QuireError,
    QuorumTimeout,
    StreamBroken,
    Unauthorized,
    Unavailable,
    error_for_code,
)
from services.tls.contexts import TlsError, verifying_context

PASSWORD_HEADER = "X-Ledger-Password"


# Exit codes by error class (the first matching class wins; 2 is click's usage error).
EXIT_ERROR = 1
EXIT_CODES: tuple[tuple[type[QuireError], int], ...] = (
    (GatewayUnreachable, 3),
    (InvalidArgument, 4),
    (Unauthorized, 5),
    (NotFound, 6),
    (Conflict, 7),
    (PayloadTooLarge, 8),
    (Unavailable, 9),
    (QuorumTimeout, 10),
    (Forbidden, 14),
    (PositionMismatch, 15),
)
EXIT_CODES_HELP = (
    "Exit codes: 0 ok, 1 other error, 2 bad usage, 3 gateway unreachable, 4 invalid argument, "
    "5 unauthorized (token or ledger password), 6 not found, 7 conflict (closed, fenced, "
    "not the writer), 8 payload too large, 9 unavailable (not enough bookies), "
    "10 quorum timeout (outcome unknown), 14 forbidden (the token's scope does not allow "
    "the call), 15 position mismatch (--expect: the log's last record is elsewhere)."
)

_err = Console(stderr=True, highlight=False, soft_wrap=True)


def exit_code_for(exc: QuireError) -> int:
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return code
    return EXIT_ERROR


@contextmanager
def reported(prog: str = "quire") -> Iterator[None]:
    """Print a ``QuireError`` raised inside as one stderr line and exit with its code."""
    try:
        yield
    except QuireError as exc:
        _err.print(f"{prog}: error: {exc.code}: {exc.message}", markup=False)
        raise typer.Exit(exit_code_for(exc)) from None


def api_error(response: httpx.Response) -> QuireError:
    """The ``QuireError`` an error answer stands for."""
    try:
        doc = json.loads(response.read())
    except (ValueError, httpx.HTTPError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        cls = error_for_code(doc["error"])
        error = cls(str(doc.get("message") or doc["error"]))
        if cls is QuireError:  # a code this client does not know: keep it visible
            error = QuireError(f"{doc['error']}: {doc.get('message') or ''}".rstrip(": "))
        return error
    reason = response.reason_phrase or "error"
    return QuireError(f"HTTP {response.status_code} {reason} from {response.request.url}")


@functools.cache
def tls_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """How an https:// gateway is verified: against ``ca_file`` (``--ca-file`` or
    ``QUIRE_CA_FILE``), one context per bundle for the whole process, since loading a
    bundle is the costly part of a client's TLS; None without one (the client's
    default: the system's CA bundle). A bundle that cannot be used is an
    ``InvalidArgument``."""
    if ca_file is None:
        return None
    try:
        return verifying_context(ca_file)
    except TlsError as exc:
        raise InvalidArgument(f"--ca-file: {exc}") from None


def tls_failure(url: str, detail: str) -> str | None:
    """What to change when ``detail`` (a transport error's text) is a TLS failure of
    the gateway at ``url``; None when it is not one."""
    if "CERTIFICATE_VERIFY_FAILED" in detail:
        reason = detail.split("certificate verify failed:", 1)[-1].split("(_ssl", 1)[0]
        return (
            f"the gateway at {url} presented a certificate that does not verify "
            f"({reason.strip() or 'certificate verify failed'}); give the CA bundle that "
            "signed it with --ca-file or QUIRE_CA_FILE"
        )
    if "WRONG_VERSION_NUMBER" in detail or "record layer failure" in detail:
        return f"the gateway at {url} does not speak TLS: use an http:// URL"
    return None


def _transport_failure(url: str, exc: httpx.HTTPError) -> str:
    """Why ``url`` could not be used, for people: TLS failures say what to change."""
    detail = str(exc) or type(exc).__name__
    if (hint := tls_failure(url, detail)) is not None:
        return hint
    if isinstance(exc, httpx.RemoteProtocolError) and url.startswith("http://"):
        return (
            f"the gateway at {url} closed the connection without an answer "
            "(does it serve https://?)"
        )
    return f"cannot reach the gateway at {url}: {detail}"


class GatewayClient:
    """Calls of one command to one gateway; use as a context manager."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        password: str | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        ca_file: Path | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.password = password
        self.http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S),
            transport=transport,
            verify=tls_context(ca_file) or True,
        )

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def _headers(self, extra: Mapping[str, str] | None, password: bool) -> dict[str, str]:
        headers = dict(extra or {})
        if password and self.password is not None:
            headers[PASSWORD_HEADER] = self.password
        return headers

    def _unreachable(self, exc: httpx.HTTPError) -> GatewayUnreachable:
        what = type(exc).__name__
        if isinstance(exc, httpx.TimeoutException):
            return GatewayUnreachable(f"no answer from the gateway at {self.url} in time ({what})")
        return GatewayUnreachable(_transport_failure(self.url, exc))

    def request(
        self,
        method: str,
        path: str,
        *,
        password: bool = False,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """One call; a 2xx answer is returned, anything else raised as a ``QuireError``."""
        try:
            response = self.http.request(
                method, path, headers=self._headers(headers, password), **kwargs
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        if response.is_success:
            return response
        raise api_error(response)

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise QuireError(f"the gateway's answer to {method} {path} is not JSON") from exc

    @contextmanager
    def stream(
        self,
        method: str,
        path: str,
        *,
        password: bool = False,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Iterator[httpx.Response]:
        """A streamed call: the response is yielded once its status is a success. A
        transport error while the caller reads the body is raised as ``StreamBroken``."""
        started = False
        try:
            with self.http.stream(
                method, path, headers=self._headers(headers, password), **kwargs
            ) as response:
                if not response.is_success:
                    raise api_error(response)
                started = True
                yield response
        except httpx.HTTPError as exc:
            if started:
                raise StreamBroken(
                    f"the answer from the gateway at {self.url} broke off: "
                    f"{str(exc) or type(exc).__name__}"
                ) from exc
            raise self._unreachable(exc) from exc


def pages(
    client: GatewayClient, path: str, limit: int, after: int | str | None, every: bool
) -> Iterator[dict[str, Any]]:
    """The pages of a paged listing (``{..., "next": ID|NAME|null}``) from ``after`` on:
    the first one, or with ``every`` each one until ``next`` is null."""
    next_after = after
    while True:
        params: dict[str, int | str] = {"limit": limit}
        if next_after is not None:
            params["after"] = next_after
        page: dict[str, Any] = client.json("GET", path, params=params)
        yield page
        next_after = page.get("next")
        if next_after is None or not every:
            return
