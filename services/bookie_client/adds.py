"""``BookieClient.start_add``: the gateway's adds driven by callbacks on an ``AddChannel``
(services/bookie_client/channel.py), with ``add``'s body, headers and answers."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from services.bookie_client.answers import (
    INSTANCE_HEADER,
    answer_error,
    malformed,
    parse_add,
    transport_error,
)
from services.bookie_client.channel import AddChannel
from services.bookie_client.results import BookieAddResult
from services.bookie_client.transport import HttpResponse
from services.errors import PayloadTooLarge, QuireError
from services.limits import BATCH_ENTRIES_MAX, BODY_SIZE_MAX_BYTES
from services.request_ids import REQUEST_ID_HEADER
from services.wire import framing

AddDone = Callable[[BookieAddResult | QuireError], None]


def add_body(records: Sequence[framing.FramedRecord]) -> bytes:
    """The framed body of an add of ``records``; ``PayloadTooLarge`` over the bounds."""
    if len(records) > BATCH_ENTRIES_MAX:
        raise PayloadTooLarge(
            f"{len(records)} entries in one add; the limit is {BATCH_ENTRIES_MAX}"
        )
    body = framing.encode(records)
    if len(body) > BODY_SIZE_MAX_BYTES:
        raise PayloadTooLarge(f"add body of {len(body)} bytes; the limit is {BODY_SIZE_MAX_BYTES}")
    return body


class CallbackAdds:
    """One bookie's callback-driven adds: the request's head is built once around the
    body's length and the request id line; the answer becomes what ``add`` returns or
    raises."""

    def __init__(
        self,
        host: str,
        port: int,
        headers: Mapping[str, str],
        connect_timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        self.address = f"{host}:{port}"
        self.channel = AddChannel(host, port, connect_timeout_s, ssl_context, server_hostname)
        fixed = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._head_start = (
            f"POST /v1/entries HTTP/1.1\r\nHost: {self.address}\r\nContent-Length: "
        ).encode("latin-1")
        self._head_rest = f"\r\nContent-Type: {framing.MEDIA_TYPE}\r\n{fixed}".encode("latin-1")

    def start(
        self,
        records: Sequence[framing.FramedRecord],
        timeout_s: float,
        done: AddDone,
        request_id: str | None,
    ) -> None:
        try:
            body = add_body(records)
        except QuireError as exc:
            asyncio.get_running_loop().call_soon(done, exc)
            return
        id_line = b"" if request_id is None else f"{REQUEST_ID_HEADER}: {request_id}\r\n".encode()
        data = b"".join(
            (self._head_start, b"%d" % len(body), self._head_rest, id_line, b"\r\n", body)
        )
        self.channel.start(data, timeout_s, partial(self._answered, timeout_s, done))

    def _answered(self, timeout_s: float, done: AddDone, answer: HttpResponse | Exception) -> None:
        if not isinstance(answer, HttpResponse):
            done(transport_error(self.address, answer, "add", timeout_s))
        elif answer.status >= 400:
            done(answer_error(self.address, answer, "add"))
        else:
            done(self._result(answer))

    def _result(self, response: HttpResponse) -> BookieAddResult | QuireError:
        try:
            doc = json.loads(response.body)
            if not isinstance(doc, dict):
                raise TypeError("not a JSON object")
            return parse_add(doc, response.headers.get(INSTANCE_HEADER))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return malformed(self.address, "add", exc)

    async def aclose(self) -> None:
        await self.channel.aclose()
