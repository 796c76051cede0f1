"""``quire log append --stream`` and ``quire ledger append --stream``: records over
streaming appends (docs/streaming.md) on one WebSocket, within the gateway's
credits, instead of one request per batch. The same summaries as ``LogAppender`` and
``ledger_io.Appender``; an error message from the gateway is raised as the
``QuireError`` of its code (what was acknowledged before stays acknowledged)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import IO, Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from services.cli.client import PASSWORD_HEADER, GatewayClient, tls_context, tls_failure
from services.cli.common import GlobalOptions, fail
from services.cli.ledger_io import append_summary as ledger_summary
from services.cli.ledger_io import batches, err, input_lines
from services.cli.limits import STREAM_ACK_TIMEOUT_S, STREAM_OPEN_TIMEOUT_S
from services.cli.log_io import LogAppender, position_text, request_key
from services.cli.log_io import append_summary as log_summary
from services.cli.progress import AppendProgress
from services.errors import GatewayUnreachable, error_for_code


def stream_url(gateway: str, path: str) -> str:
    base = gateway.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base.removeprefix("https://") + path
    return "ws://" + base.removeprefix("http://") + path


class StreamAppender:
    """Sends payloads in order over one stream at ``path`` (a ledger's or a log's),
    within the gateway's credits; what each acknowledgement means is the subclass's
    (``_acked``)."""

    def __init__(
        self, options: GlobalOptions, path: str, headers: dict[str, str] | None = None
    ) -> None:
        token = options.token
        headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
        self.records = 0  # acknowledged
        self.sent = 0
        self.bytes = 0
        self.sizes: list[int] = []  # of the records in flight, oldest first
        url = stream_url(options.gateway, path)
        context = tls_context(options.ca_file) if url.startswith("wss://") else None
        try:
            self._connector = connect(
                url,
                additional_headers=headers,
                open_timeout=STREAM_OPEN_TIMEOUT_S,
                max_size=None,
                ssl=context,
            )
            self.ws: ClientConnection = self._connector.__enter__()
        except InvalidStatus as exc:
            raise GatewayUnreachable(f"{url}: refused the stream ({exc})") from exc
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            hint = tls_failure(options.gateway, str(exc))
            raise GatewayUnreachable(hint or f"cannot open a stream to {url}: {exc}") from exc
        hello = self._next()
        self.credits = int(hello.get("credits", 0))

    def close(self) -> None:
        self._connector.__exit__(None, None, None)

    def _next(self) -> dict[str, Any]:
        try:
            text = self.ws.recv(timeout=STREAM_ACK_TIMEOUT_S)
        except TimeoutError as exc:
            raise GatewayUnreachable(
                f"no answer on the stream in {STREAM_ACK_TIMEOUT_S:g} s"
            ) from exc
        except ConnectionClosed as exc:
            raise GatewayUnreachable(f"the stream closed: {exc}") from exc
        doc: dict[str, Any] = json.loads(text)
        if "error" in doc:
            raise error_for_code(str(doc["error"]))(str(doc.get("message", "")))
        return doc

    def _take_ack(self) -> None:
        doc = self._next()
        if "credits" in doc:
            self.credits += int(doc["credits"])
            return
        self._acked(doc)
        self.records += 1
        self.bytes += self.sizes.pop(0)

    def _acked(self, doc: dict[str, Any]) -> None:
        raise NotImplementedError

    def _control(self, seq: int) -> str | None:
        """A text message to send before record ``seq`` (None: nothing)."""
        return None

    def send(self, payloads: list[bytes]) -> None:
        for payload in payloads:
            while self.sent - self.records >= self.credits:
                self._take_ack()
            try:
                control = self._control(self.sent)
                if control is not None:
                    self.ws.send(control)
                self.ws.send(payload)
            except ConnectionClosed:
                self._drain_error()
                raise
            self.sent += 1
            self.sizes.append(len(payload))

    def _drain_error(self) -> None:
        """The gateway closed the stream: raise its error message if it sent one."""
        while True:
            self._next()  # raises the error, or GatewayUnreachable once closed

    def finish(self) -> None:
        """Wait for every acknowledgement, then end the stream."""
        while self.records < self.sent:
            self._take_ack()
        try:
            self.ws.send(json.dumps({"end": True}))
        except ConnectionClosed:
            pass


class LogStreamAppender(StreamAppender):
    """Records to log ``name``; with ``key`` the Nth record carries
    ``request_key(key, N)`` (the same command run again appends nothing twice). Same
    summary as ``LogAppender``."""

    def __init__(self, options: GlobalOptions, name: str, key: str | None) -> None:
        self.name = name
        self.key = key
        self.first_position: str | None = None
        self.last_position: str | None = None
        super().__init__(options, f"/v1/logs/{name}/stream")

    def _control(self, seq: int) -> str | None:
        return None if self.key is None else json.dumps({"key": request_key(self.key, seq)})

    def _acked(self, doc: dict[str, Any]) -> None:
        position = position_text(doc["position"])
        if self.first_position is None:
            self.first_position = position
        self.last_position = position

    def summary(self) -> dict[str, Any]:
        return log_summary(
            self.name, self.records, self.bytes, self.first_position, self.last_position
        )


class LedgerStreamAppender(StreamAppender):
    """Entries to ledger ``ledger_id`` (which this gateway writes); the same summary
    and counters as ``ledger_io.Appender``."""

    def __init__(self, options: GlobalOptions, password: str | None, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        self.first_entry_id: int | None = None
        self.last_entry_id: int | None = None
        self.lac: int | None = None
        headers = {PASSWORD_HEADER: password} if password is not None else {}
        super().__init__(options, f"/v1/ledgers/{ledger_id}/stream", headers)

    @property
    def entries(self) -> int:
        return self.records

    def _acked(self, doc: dict[str, Any]) -> None:
        if self.first_entry_id is None:
            self.first_entry_id = int(doc["entry_id"])
        self.last_entry_id = int(doc["entry_id"])
        self.lac = doc.get("last_add_confirmed")

    def single(self, payload: bytes) -> None:
        self.send([payload])

    def batch(self, payloads: list[bytes]) -> None:
        self.send(payloads)

    def summary(self) -> dict[str, Any]:
        return ledger_summary(
            self.ledger_id, self.records, self.bytes, self.first_entry_id, self.last_entry_id,
            self.lac,
        )  # fmt: skip


Appender = LogAppender | LogStreamAppender


def open_appender(
    client: GatewayClient,
    options: GlobalOptions,
    name: str,
    key: str | None,
    stream: bool,
    expect: str | None = None,
) -> Appender:
    """A ``StreamAppender`` with ``stream``, else a ``LogAppender`` (one request per batch,
    conditional with ``expect``)."""
    if stream:
        if expect is not None:
            fail("--expect works with requests, not --stream", 2)
        return LogStreamAppender(options, name, key)
    return LogAppender(client, name, key, expect)


def append_input(appender: Appender, file: Path | None, batch: int, quiet: bool) -> None:
    """Send the records of ``file`` (or stdin for None or "-"), one per line, in batches
    of ``batch``, with a progress bar unless ``quiet``."""
    if file is None or str(file) == "-":
        if sys.stdin.isatty():
            err.print("reading records from the terminal, one per line; end with Ctrl-D")
        _append_lines(appender, sys.stdin.buffer, None, batch, quiet)
        return
    try:
        stream = open(file, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    with stream:
        total = os.fstat(stream.fileno()).st_size if file.is_file() else None
        _append_lines(appender, stream, total, batch, quiet)


def _append_lines(
    appender: Appender, stream: IO[bytes], total: int | None, batch: int, quiet: bool
) -> None:
    with AppendProgress(total, quiet, noun="records") as progress:
        for chunk in batches(input_lines(stream), batch):
            appender.send(chunk)
            # Each line also had its newline; close enough for a progress bar.
            progress.advance(appender.records, sum(map(len, chunk)) + len(chunk))
