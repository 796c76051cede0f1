"""The logs this gateway writes, by name: taking a log's writer role
(``log_writer.AcquireWriter``) and the ``LogWriter`` that then serves its appends."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING

from gateway.logs import steps
from gateway.logs.owners import Owners
from gateway.logs.writer import LogWriter
from services.errors import InvariantViolation, NotWriter, present
from services.protocol import log_writer as lw
from services.protocol.logs import LogMetadata
from services.zk.log_store import LogStore

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway


class LogWriters:
    """The logs this gateway writes, by name (one role per log at a time)."""

    def __init__(self, gw: Gateway, logs: LogStore, owners: Owners) -> None:
        self.gw = gw
        self.logs = logs
        self.owners = owners
        self._writers: dict[str, LogWriter] = {}
        self._acquiring: dict[str, asyncio.Future[LogWriter]] = {}
        logs.on_written = self._wrote

    def _wrote(self, name: str, version: int) -> None:
        """This gateway wrote log ``name``'s znode (a roll, a truncation, a retention
        policy, an attach): its writer of the log serves no older copy of the list."""
        writer = self._writers.get(name)
        if writer is not None:
            writer.wrote(version)

    def get(self, name: str) -> LogWriter | None:
        writer = self._writers.get(name)
        return writer if writer is not None and writer.lost is None else None

    def held(self) -> list[str]:
        """The logs this gateway writes now."""
        return [name for name, writer in self._writers.items() if writer.lost is None]

    def writer_or_409(self, name: str) -> LogWriter:
        writer = self._writers.get(name)
        if writer is None:
            raise NotWriter(f"this gateway is not the writer of log {name}")
        writer._check_role()
        return writer

    async def acquire(
        self, name: str, vacant: Callable[[LogMetadata], bool] | None = None
    ) -> LogWriter:
        """Take the writer role of ``name`` (single flight per log on this gateway); with
        ``vacant``, only while the log has no live writer (``AcquireWriter``)."""
        running = self._acquiring.get(name)
        if running is None:
            running = asyncio.ensure_future(self._acquire(name, vacant))
            self._acquiring[name] = running
            running.add_done_callback(lambda _: self._acquiring.pop(name, None))
        return await asyncio.shield(running)

    async def _acquire(self, name: str, vacant: Callable[[LogMetadata], bool] | None) -> LogWriter:
        # A role this gateway holds already ends now: its appends during the hand-over
        # answer not_writer rather than settle and roll (which would race the CAS).
        held = self._writers.get(name)
        if held is not None:
            held._lose("this gateway is taking the role again")
        op = lw.AcquireWriter(name, self.gw.settings.address, self.gw.ctx.rng, vacant=vacant)
        acquired = await steps.run(self.gw, self.logs, op, op.start())
        if not isinstance(acquired, lw.Acquired):
            raise InvariantViolation(f"acquiring a log answered {acquired!r}")
        runner = present(
            self.gw.handles.live(acquired.ledger_id), "a new writer's ledger has a live handle"
        )
        if held is not None:
            await held.aclose()
        writer = LogWriter(self.gw, self.logs, acquired, runner)
        self._writers[name] = writer
        self.owners.remember(name, self.gw.settings.address)
        metrics = self.gw.metrics
        metrics.log_handovers.labels(name).inc()
        if vacant is not None:
            metrics.log_takeovers.inc()
        metrics.log_writer_epoch.labels(name).set(acquired.epoch)
        previous = [lid for lid in acquired.log.ledgers if lid != acquired.ledger_id]
        writer._spawn(writer.rebuild_window(previous))
        return writer

    def forget(self, name: str) -> None:
        """The log was deleted through this gateway."""
        writer = self._writers.pop(name, None)
        if writer is not None:
            writer._lose(f"log {name} was deleted")

    async def aclose(self) -> None:
        await asyncio.gather(*(w.aclose() for w in self._writers.values()))
        await self.owners.aclose()


def serve_logs(
    gateway: Gateway, logs: LogStore, ssl_context: ssl.SSLContext | None = None
) -> Gateway:
    """``gateway`` serves logs from ``logs`` (built beside it: the gateway knows its log
    writers only as ``Gateway.logs``); ``ssl_context`` reaches the other gateways (None:
    plain HTTP)."""
    owners = Owners(gateway, logs.store, ssl_context)
    gateway.log_writers[:] = [LogWriters(gateway, logs, owners)]
    return gateway
