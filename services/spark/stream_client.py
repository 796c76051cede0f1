"""The few gateway calls the streaming source makes (a small synchronous httpx client).

On the driver: the log's list of ledgers, a ledger's state and last entry, the LAC of
an open ledger, a short binary range read to find where the last whole batch ends.
On executors: the binary range read (``Accept: application/vnd.quire.entries``) of a
partition. The client pickles as its settings only, so a reader holding one may
travel to executors; the connection pool is made again on first use.

Every failure is a ``QuireStreamError`` whose text says what the gateway answered
(``GET /v1/logs/x: 404 log_not_found: …``), so a failed query explains itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from services.errors import InvalidArgument
from services.wire.entries_stream import MEDIA_TYPE, FrameDecoder

# Bytes asked of the socket per chunk of a streamed range read.
STREAM_CHUNK_BYTES = 1 << 20
TIMEOUT_S = 60.0


class QuireStreamError(Exception):
    """A Quire streaming query cannot go on: a bad option, a position no longer in
    the log, or an error answer of the gateway."""


class StreamClient:
    """One gateway (``url``) with the API token and the ledger password when given."""

    def __init__(self, url: str, token: str | None = None, password: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.password = password
        self._http: httpx.Client | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (StreamClient, (self.url, self.token, self.password))

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            if self.password is not None:
                headers["X-Ledger-Password"] = self.password
            self._http = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S)
        return self._http

    def _get(self, path: str) -> Any:
        try:
            response = self.http.get(path)
        except httpx.HTTPError as exc:
            raise QuireStreamError(f"GET {self.url}{path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise _error(response, f"GET {path}")
        return response.json()

    def log(self, name: str) -> list[int]:
        """The log's ledgers, in order."""
        return [int(lid) for lid in self._get(f"/v1/logs/{name}")["ledgers"]]

    def ledger(self, ledger_id: int) -> tuple[bool, int]:
        """(closed, last entry id) of a ledger; the last entry is -1 when it is open
        or empty."""
        doc = self._get(f"/v1/ledgers/{ledger_id}")
        last = doc.get("last_entry_id")
        closed = doc["state"] == "CLOSED"
        return closed, int(last) if closed and last is not None else -1

    def lac(self, ledger_id: int) -> int:
        return int(self._get(f"/v1/ledgers/{ledger_id}/lac")["last_add_confirmed"])

    def read_range(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Entries ``first..last`` of a ledger in order, streamed in the binary format.
        Raises when the stream stops before ``last`` (the caller planned a range the
        gateway can serve whole)."""
        path = f"/v1/ledgers/{ledger_id}/entries"
        what = f"GET {path}?from={first}&to={last}"
        decoder = FrameDecoder()
        expected = first
        try:
            with self.http.stream(
                "GET", path, params={"from": first, "to": last}, headers={"Accept": MEDIA_TYPE}
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise _error(response, what)
                for chunk in response.iter_bytes(STREAM_CHUNK_BYTES):
                    for entry_id, payload in decoder.feed(chunk):
                        if entry_id != expected:
                            raise QuireStreamError(f"{what}: entry {entry_id}, not {expected}")
                        expected += 1
                        yield entry_id, payload
        except httpx.HTTPError as exc:
            raise QuireStreamError(f"{what} on {self.url}: {type(exc).__name__}: {exc}") from exc
        except InvalidArgument as exc:
            raise QuireStreamError(f"{what}: a broken frame: {exc}") from exc
        if decoder.pending or expected != last + 1:
            raise QuireStreamError(
                f"{what}: the stream ended at entry {expected - 1}, before entry {last}"
            )


def _error(response: httpx.Response, what: str) -> QuireStreamError:
    """The gateway's ``{"error", "message"}`` answer as an exception."""
    try:
        doc = response.json()
        text = f"{doc['error']}: {doc['message']}"
    except (ValueError, KeyError, TypeError):
        text = response.text[:200] or response.reason_phrase
    return QuireStreamError(f"{what}: {response.status_code} {text}")
