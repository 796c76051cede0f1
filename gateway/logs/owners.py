"""Any gateway takes any append (docs/logs.md, "Any gateway appends").

A log has one writer, a gateway named in its znode (``LogMetadata.writer``). Every
gateway registers itself (``/gateways/{host:port}``, ephemeral: services/zk/gateways.py)
and an append that reaches a gateway which is not the log's writer is:

- forwarded to the writer's gateway while that one is registered (``forward``): the
  client's body, ``Idempotency-Key``, ``Expected-Last-Position``, token and request id
  go along, marked ``X-Quire-Forwarded-By`` with the cluster secret, and its answer comes
  back unchanged. A forwarded append is never forwarded again: a gateway that gets one
  for a log another gateway writes refuses it (409 ``not_writer``) and the sender reads
  the log again and routes once more;
- taken here when the log has no live writer (``vacant``: nobody, this gateway's address
  from an earlier process, or a gateway no longer registered): the role is taken as
  ``POST /writer`` takes it (the last two ledgers fenced, the CAS), but only while the
  log is still vacant when read inside the take-over, so two gateways racing for a
  vacant log end with one writer and the other forwarding to it.

A writer's gateway that stops answering is waited for until its registration goes (its
ZooKeeper session ends), then the log is vacant and taken: an append in flight to it is
abandoned at that moment and, with an Idempotency-Key, appended again through the new
writer (whose dedup window, rebuilt from the log's tail after the fence, answers it if
the first attempt landed); without a key its outcome is unknown (504).

Draining (``drain``): the gateway says so in its registration and ``/health`` (503),
takes no log's role any more, and hands each log it writes to the other gateways in
turn (each takes the role by ``POST /writer``); appends that reach it afterwards are
forwarded like anywhere else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.limits import (
    DRAIN_HANDOVERS_CONCURRENT_MAX,
    DRAIN_TIMEOUT_S,
    FORWARD_CONNECT_TIMEOUT_S,
    FORWARD_GRACE_S,
    LOG_WRITERS_KNOWN_MAX,
)
from gateway.logs.grouping import RecordGroups
from services.bookie_client.channel import AddChannel
from services.bookie_client.client import SECRET_HEADER
from services.bookie_client.transport import HttpResponse
from services.errors import (
    InvariantViolation,
    NotFound,
    NotWriter,
    QuireError,
    QuorumTimeout,
    Unauthorized,
    Unavailable,
    error_from_json,
)
from services.protocol.logs import LogMetadata
from services.request_ids import REQUEST_ID_HEADER, current_request_id
from services.zk import paths as zkpaths
from services.zk.gateways import GatewayDirectory, GatewayInfo
from services.zk.registration import Registration
from services.zk.store import MetadataStore

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway

log = logging.getLogger(__name__)

FORWARDED_BY = "X-Quire-Forwarded-By"
EXPECTED_LAST_POSITION = "Expected-Last-Position"


@dataclass(frozen=True, slots=True)
class Caller:
    """What an append carries besides its body: the client's token (passed on when the
    append is forwarded), and, on a forwarded append, the gateway that sent it and the
    cluster secret it showed."""

    authorization: str | None = None
    forwarded_by: str | None = None
    secret: str | None = None


NO_CALLER = Caller()


class Owners:
    """This gateway's registration, the live gateways, and the forwarding of appends."""

    def __init__(self, gw: Gateway, store: MetadataStore, ssl_context: ssl.SSLContext | None):
        self.gw = gw
        self.me = gw.settings.address
        self.directory = GatewayDirectory(store)
        self.registration = Registration(
            store, zkpaths.gateway(self.me), uuid.uuid4().hex, self._registered, "gateway"
        )
        self.draining = False
        self._ssl = ssl_context
        self._channels: dict[str, AddChannel] = {}  # to each other gateway
        # The writer's gateway of each log as last read here: a hint, corrected by a
        # refusal (the log is read again).
        self._writers: dict[str, str | None] = {}
        self.groups = RecordGroups(self._forward_group, gw.metrics.log_forwarded_records)

    def _registered(self) -> dict[str, Any]:
        scheme = "https" if self._ssl is not None else "http"
        return {"address": self.me, "scheme": scheme, "draining": self.draining}

    async def start(self) -> None:
        """Watch the live gateways and register this one (tried again after a failure)."""
        if not self.directory.started:
            await self.directory.start()
        if not self.registration.started:
            await self.registration.start()

    async def aclose(self) -> None:
        await self.groups.aclose()
        await self.registration.stop()
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(channel.aclose() for channel in channels), return_exceptions=True)

    # ------------------------------------------------------------ routing

    def vacant(self, log: LogMetadata) -> bool:
        """Whether this gateway may take ``log``'s role without taking it from a live
        writer: nobody writes it, or its writer is this address (an earlier process of
        it) or a gateway that is no longer registered."""
        writer = log.writer
        return (
            writer is None
            or writer.gateway == self.me
            or not self.directory.is_live(writer.gateway)
        )

    def check_caller(self, caller: Caller) -> None:
        """A forwarded append must show the cluster secret when the cluster has one."""
        expected = self.gw.settings.cluster_secret
        if caller.forwarded_by is not None and expected and caller.secret != expected:
            raise Unauthorized("a forwarded append without the cluster secret")

    async def target(self, name: str, fresh: bool, forwarded: bool) -> str | None:
        """Where an append to ``name`` goes when this gateway does not write the log: the
        gateway to forward it to, or None to take the role here. ``fresh`` reads the log
        from ZooKeeper rather than the hint. A ``forwarded`` append for a log another
        live gateway writes is refused (409 ``not_writer``): its sender routes again; so
        is one for a log with no live writer while this gateway drains (the sender takes
        it; a log that still names this gateway is served here, drained or not)."""
        if fresh or name not in self._writers:
            current = (await self.gw.logs.logs.get(name)).log
            self.remember(name, current.writer.gateway if current.writer is not None else None)
        writer = self._writers.get(name)
        if writer is not None and writer != self.me and self.directory.is_live(writer):
            if forwarded:
                raise NotWriter(f"this gateway does not write log {name}: {writer} does")
            return writer
        if self.draining and writer != self.me:  # a log named ours stays ours to serve
            if forwarded:
                raise NotWriter(f"this gateway is draining: it takes no log ({name})")
            other = await self._other_gateway(name)
            if other is not None:
                return other
        return None

    def remember(self, name: str, writer: str | None) -> None:
        if len(self._writers) >= LOG_WRITERS_KNOWN_MAX:
            self._writers.clear()
        self._writers[name] = writer

    async def _other_gateway(self, name: str) -> str | None:
        """A live gateway other than this one that is not draining (for a log this
        draining gateway will not take), chosen by the log's name; None: there is none."""
        others = sorted(g.address for g in await self.directory.all() if self._takes(g))
        return others[zlib.crc32(name.encode()) % len(others)] if others else None

    def _takes(self, info: GatewayInfo) -> bool:
        return info.address != self.me and not info.draining

    # ------------------------------------------------------------ forwarding

    def _channel(self, address: str) -> AddChannel:
        """The callback-driven connections to ``address`` (the bookie client's add
        channel: no task per request; services/bookie_client/channel.py)."""
        channel = self._channels.get(address)
        if channel is None:
            host, _, port = address.rpartition(":")
            channel = self._channels[address] = AddChannel(
                host, int(port), FORWARD_CONNECT_TIMEOUT_S, self._ssl, host
            )
        return channel

    async def _post(
        self,
        target: str,
        path: str,
        body: bytes,
        headers: dict[str, str],
        timeout_s: float,
        gone: asyncio.Future[None] | None = None,
    ) -> HttpResponse | Exception | None:
        """POST ``body`` to ``path`` on gateway ``target``: its answer, the error that
        ended the exchange, or None when ``gone`` (the gateway's registration leaving)
        came first."""
        answered: asyncio.Future[HttpResponse | Exception | None] = (
            asyncio.get_running_loop().create_future()
        )

        def done(result: HttpResponse | Exception | None) -> None:
            if not answered.done():
                answered.set_result(result)

        self._channel(target).start(_request(target, path, body, headers), timeout_s, done)
        if gone is None:
            return await answered

        def went(_: asyncio.Future[None]) -> None:
            done(None)

        gone.add_done_callback(went)
        try:
            return await answered
        finally:
            gone.remove_done_callback(went)

    def _headers(self, caller: Caller, extra: Iterable[tuple[str, str | None]]) -> dict[str, str]:
        headers = {FORWARDED_BY: self.me}
        secret = self.gw.settings.cluster_secret
        if secret:
            headers[SECRET_HEADER] = secret
        if caller.authorization is not None:
            headers["Authorization"] = caller.authorization
        request_id = current_request_id()
        if request_id is not None:
            headers[REQUEST_ID_HEADER] = request_id
        headers.update((k, v) for k, v in extra if v is not None)
        return headers

    async def forward(
        self,
        target: str,
        name: str,
        raw: bytes,
        batch: bool,
        key: str | None,
        expected: str | None,
        caller: Caller,
    ) -> dict[str, Any] | None:
        """Send the append to ``target``, the gateway writing ``name``: its answer as it
        gave it (an error raised as that error), or None when it must be routed again
        (``target`` refused it, or went away before it could have been appended, or with
        an Idempotency-Key whatever happened to it)."""
        headers = self._headers(
            caller,
            (
                ("Content-Type", "application/json" if batch else "application/octet-stream"),
                ("Idempotency-Key", key),
                (EXPECTED_LAST_POSITION, expected),
            ),
        )
        settings = self.gw.settings
        timeout_s = (settings.add_timeout_ms + settings.log_settle_timeout_ms) / 1000
        self.gw.metrics.log_forwards.inc()
        result = await self._post(
            target,
            f"/v1/logs/{name}/records",
            raw,
            headers,
            timeout_s + FORWARD_GRACE_S,
            self.directory.gone(target),
        )
        if result is None:  # the gateway's registration went first
            self._lost(name, target, key, "went away")
            return None
        if isinstance(result, ConnectionRefusedError | socket.gaierror):
            # Nothing was sent: wait for the gateway to be gone for good, then route again.
            wait_s = settings.zk_session_timeout + FORWARD_GRACE_S
            if await self.directory.wait_gone(target, wait_s):
                return None
            raise Unavailable(
                f"log {name} is written by gateway {target}, which cannot be reached and is "
                "still registered; nothing was appended, try again"
            )
        if isinstance(result, Exception):
            self._lost(name, target, key, f"failed ({result!r})")
            return None
        return self._answer(target, result)

    async def _forward_group(
        self, target: str, name: str, body: bytes, batch: bool, authorization: str | None
    ) -> dict[str, Any] | None:
        """``forward`` of a group of single records (grouping.py): no key, no condition."""
        return await self.forward(target, name, body, batch, None, None, Caller(authorization))

    def _lost(self, name: str, target: str, key: str | None, what: str) -> None:
        """The forwarded append's answer is lost: with a key it is sent again (routed
        again: the key makes the retry safe), else its outcome is unknown (raised)."""
        if key is not None:
            return
        raise QuorumTimeout(
            f"log {name}: the gateway writing it ({target}) {what} before it answered; the "
            "append's outcome is unknown (an Idempotency-Key makes a retry safe)"
        )

    def _answer(self, target: str, response: HttpResponse) -> dict[str, Any] | None:
        try:
            doc = json.loads(response.body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise QuireError(f"gateway {target} answered {response.status} without a JSON body")
        if response.status == 200:
            return doc
        if doc.get("error") == NotWriter.code:
            return None
        raise error_from_json(doc)

    # ------------------------------------------------------------ draining

    async def drain(self, authorization: str | None) -> dict[str, Any]:
        """Stop taking logs and hand each log this gateway writes to another gateway."""
        if not self.draining:
            self.draining = True
            self.registration.refresh()
            log.info("draining: handing this gateway's logs to the others")
        names = self.gw.logs.held()
        others = sorted(g.address for g in await self.directory.all() if self._takes(g))
        if names and not others:
            raise Unavailable("no other gateway that is not draining is live to take the logs")
        limit = asyncio.Semaphore(DRAIN_HANDOVERS_CONCURRENT_MAX)
        failed: list[dict[str, str]] = []

        async def hand_over(index: int, name: str) -> None:
            target = others[index % len(others)]
            headers = self._headers(Caller(authorization), ())
            async with limit:
                result = await self._post(
                    target, f"/v1/logs/{name}/writer", b"", headers, DRAIN_TIMEOUT_S
                )
            if isinstance(result, Exception):
                failed.append({"log": name, "gateway": target, "error": repr(result)})
            elif result is not None and result.status != 200:
                failed.append({"log": name, "gateway": target, "error": str(result.status)})

        await asyncio.gather(*(hand_over(i, name) for i, name in enumerate(names)))
        return {
            "gateway": self.me,
            "draining": True,
            "handed_over": len(names) - len(failed),
            "failed": failed,
        }

    async def drain_gateway(self, address: str, authorization: str | None) -> dict[str, Any]:
        """Drain ``address``: this gateway, or another live one (asked over the internal
        hop, its answer passed on)."""
        if address == self.me:
            return await self.drain(authorization)
        if not self.directory.is_live(address):
            raise NotFound(f"no live gateway {address!r} (GET /v1/admin/gateways lists them)")
        headers = self._headers(Caller(authorization), ())
        path = f"/v1/admin/gateways/{address}/drain"
        result = await self._post(address, path, b"", headers, DRAIN_TIMEOUT_S)
        if not isinstance(result, HttpResponse):
            raise Unavailable(f"gateway {address} did not answer the drain ({result!r})")
        answer = self._answer(address, result)
        if answer is None:
            raise InvariantViolation("a drain answered not_writer")
        return answer

    async def gateways(self) -> list[dict[str, Any]]:
        return [
            {"address": g.address, "scheme": g.scheme, "draining": g.draining}
            for g in await self.directory.all()
        ]


def _request(address: str, target: str, body: bytes, headers: dict[str, str]) -> bytes:
    """The bytes of one HTTP/1.1 POST of ``body`` to ``target`` at ``address``."""
    lines = [f"POST {target} HTTP/1.1", f"Host: {address}", f"Content-Length: {len(body)}"]
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1") + body
