"""A small synchronous client of the streaming append protocol (docs/streaming.md), over
the ``websockets`` library, for the integration tests: it sends within its credits,
records every acknowledgement and the error that ended the stream."""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass, field
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidMessage
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect

RECV_TIMEOUT_S = 30.0
OPEN_ATTEMPTS_MAX = 3


def ws_url(http_url: str, path: str) -> str:
    return "ws" + http_url.removeprefix("http") + path


@dataclass
class Stream:
    """One WebSocket stream; ``acks`` in the order received, ``error`` and
    ``close_code`` once it ended."""

    conn: ClientConnection
    connector: Any  # what connect() gave: closed as the context manager it is
    credits: int = 0
    acks: list[dict[str, Any]] = field(default_factory=list)
    sent: int = 0
    error: dict[str, Any] | None = None
    close_code: int | None = None

    @classmethod
    def open(
        cls,
        http_url: str,
        path: str,
        token: str | None = None,
        password: str | None = None,
        auth_message: dict[str, str] | None = None,
        expect_credits: bool = True,
        ssl_context: ssl.SSLContext | None = None,
    ) -> Stream:
        """A stream to ``path``; over wss when ``http_url`` is https (with
        ``ssl_context``)."""
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if password is not None:
            headers["X-Ledger-Password"] = password
        for attempt in range(1, OPEN_ATTEMPTS_MAX + 1):
            connector = connect(
                ws_url(http_url, path),
                additional_headers=headers,
                open_timeout=15,
                close_timeout=5,
                max_size=None,
                ssl=ssl_context,
            )
            try:
                conn = connector.__enter__()
                break
            except InvalidMessage as exc:
                # Over TLS, websockets' sync client writes its upgrade request while its
                # reader thread reads the same socket; Python's ssl then loses the request
                # now and then (docs/security.md, "TLS"): the gateway never saw it and
                # closed the silent connection, so nothing happened there. Connect again.
                lost = ssl_context is not None and isinstance(exc.__cause__, EOFError)
                if not lost or attempt == OPEN_ATTEMPTS_MAX:
                    raise
        stream = cls(conn, connector)
        if auth_message is not None:
            stream.conn.send(json.dumps(auth_message))
        if expect_credits:
            first = stream.next_message()
            assert first is not None and "credits" in first, first
            stream.credits = first["credits"]
        return stream

    @property
    def in_flight(self) -> int:
        return self.sent - len(self.acks)

    def next_message(self, timeout_s: float = RECV_TIMEOUT_S) -> dict[str, Any] | None:
        """The next message (an ack, credits or the error), or None once closed."""
        if self.close_code is not None:
            return None
        try:
            text = self.conn.recv(timeout=timeout_s)
        except ConnectionClosed as exc:
            self.close_code = exc.rcvd.code if exc.rcvd is not None else 1006
            return None
        assert isinstance(text, str), f"a binary message from the gateway: {text!r}"
        doc: dict[str, Any] = json.loads(text)
        if "error" in doc:
            assert set(doc) == {"error", "message"}, doc
            self.error = doc
        elif "credits" in doc:
            self.credits += doc["credits"]
        else:
            assert doc["seq"] == len(self.acks), (doc, len(self.acks))
            self.acks.append(doc)
        return doc

    def send(self, payload: bytes, key: str | None = None) -> bool:
        """Send one record (after its key); False when the gateway closed the stream
        already (its last messages are still read by ``next_message``)."""
        try:
            if key is not None:
                self.conn.send(json.dumps({"key": key}))
            self.conn.send(payload)
        except ConnectionClosed:
            return False
        self.sent += 1
        return True

    def send_all(self, payloads: list[bytes], keys: list[str | None] | None = None) -> bool:
        """Send every payload, never more than the credits in flight, reading acks as
        they come; True when all were acknowledged, False when the stream ended first."""
        for i, payload in enumerate(payloads):
            while self.in_flight >= self.credits:
                if self.next_message() is None or self.error is not None:
                    return False
            if not self.send(payload, keys[i] if keys else None):
                return False
        return self.drain()

    def drain(self) -> bool:
        """Read until every record sent is acknowledged (True) or the stream ended."""
        while self.in_flight > 0:
            if self.next_message() is None or self.error is not None:
                return False
        return True

    def end(self) -> int | None:
        """Send ``{"end": true}``, read to the close; the close code."""
        self.conn.send(json.dumps({"end": True}))
        while self.next_message() is not None:
            pass
        return self.close_code

    def wait_closed(self) -> int | None:
        """Read to the close (an error message first, if any); the close code."""
        while self.next_message() is not None:
            pass
        return self.close_code

    def send_frames_at_once(self, payloads: list[bytes]) -> None:
        """Send binary messages in ONE write on the socket, so that the gateway reads
        them together (before it could acknowledge any)."""
        frames = b"".join(
            Frame(Opcode.BINARY, p).serialize(mask=True, extensions=[]) for p in payloads
        )
        self.conn.socket.sendall(frames)
        self.sent += len(payloads)

    def close(self) -> None:
        self.connector.__exit__(None, None, None)
