"""The write handles a ledger client holds and the recoveries it runs: the parts of the
client that run the protocol core's state machines, beside its context.

A service builds them whole with the context (the gateway in its lifespan,
``gateway.service.Gateway.build``; the replication worker only ``Recoveries``); their
bounds come from the client's settings (``explicit_lac_delay_ms``,
``closed_handles_kept_max``, ``recovery_timeout_ms`` and the per-bookie sender bounds).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from services.ledger_client.context import LedgerClientContext
from services.ledger_client.runners.recovery import RecoveryRunner
from services.ledger_client.runners.write import HandleRunner
from services.ledger_client.senders import SenderTable
from services.protocol.limits import RecoveryLimits, WriterLimits
from services.protocol.metadata import LedgerMetadata
from services.protocol.recovery import LedgerRecovery
from services.protocol.writer import WriteHandle


class HandleTable:
    """The write handles this client holds, by ledger id.

    Handles of ledgers this client closed are kept (at most
    ``closed_handles_kept_max``, oldest dropped first) so a second close returns
    the same object and an add answers ``ledger_closed`` rather than ``not_writer``."""

    def __init__(self, ctx: LedgerClientContext, senders: SenderTable) -> None:
        self.ctx = ctx
        self.senders = senders
        # An idle ledger's explicit LAC update goes to every bookie of its ensemble
        # (coalesced across ledgers per bookie, services/ledger_client/senders.py).
        # Tailing readers see the last entry within this delay; busy ledgers carry the
        # LAC on every add.
        self.limits = WriterLimits(
            add_timeout_ms=ctx.settings.add_timeout_ms,
            explicit_lac_delay_ms=ctx.settings.explicit_lac_delay_ms,
        )
        self.closed_kept_max = ctx.settings.closed_handles_kept_max
        self._live: dict[int, HandleRunner] = {}
        self._closed: OrderedDict[int, HandleRunner] = OrderedDict()
        # One bound method given to every runner, not one made per runner (64 bytes each).
        self._on_retired = self._retire

    def open(self, metadata: LedgerMetadata, version: int, digest_key: bytes) -> HandleRunner:
        handle = WriteHandle(
            metadata,
            version,
            rng=self.ctx.rng,
            digest_key=digest_key,
            limits=self.limits,
            now=self.ctx.clock(),
        )
        runner = HandleRunner(self.ctx, self.senders, handle)
        runner.on_retired = self._on_retired
        self._live[metadata.ledger_id] = runner
        self.ctx.metrics.open_handles.set(len(self._live))
        return runner

    def get(self, ledger_id: int) -> HandleRunner | None:
        runner = self._live.get(ledger_id)
        if runner is not None and runner.retired:
            self._retire(runner)
        return self._live.get(ledger_id) or self._closed.get(ledger_id)

    def _retire(self, runner: HandleRunner) -> None:
        """Move a handle that is no longer live from the live table to the bounded table
        of closed ones: as soon as it stops being live (``on_retired``), not only on the
        next lookup, so handles closed or fenced and never looked up again do not pile
        up in the unbounded live table."""
        if self._live.get(runner.ledger_id) is not runner:
            return
        self._live.pop(runner.ledger_id, None)
        self._closed[runner.ledger_id] = runner
        while len(self._closed) > self.closed_kept_max:
            self._closed.popitem(last=False)
        self.ctx.metrics.open_handles.set(len(self._live))

    def forget(self, ledger_id: int) -> None:
        self._live.pop(ledger_id, None)
        self._closed.pop(ledger_id, None)
        self.ctx.metrics.open_handles.set(len(self._live))

    @property
    def live_count(self) -> int:
        """Write handles held and still live."""
        return len(self._live)

    def live(self, ledger_id: int) -> HandleRunner | None:
        """The live write handle of the ledger, if this client holds one."""
        runner = self.get(ledger_id)
        return runner if runner is not None and runner.live else None

    def wake_waiters(self) -> None:
        """Have every wait on a live handle check its condition now (``wait_lac``'s
        ``until``: the gateway's shutdown began, gateway/stopping.py)."""
        for runner in list(self._live.values()):
            runner.wake_waiters()

    def recovered(self, ledger_id: int) -> None:
        """This client's own recovery closed the ledger: its live write handle, if it
        holds one, is fenced now (the recovery fenced the bookies, but a handle whose
        adds hang, say in an ensemble change that cannot reach ZooKeeper, would learn it
        only later). Its pending adds fail ``ledger_fenced`` (outcome unknown) and reads
        on this client stop taking its OPEN metadata and LAC for the ledger's end."""
        runner = self.live(ledger_id)
        if runner is not None:
            runner.fenced()

    def writer_lac(self, ledger_id: int) -> int | None:
        """The LAC of this client's live write handle of the ledger, else None."""
        runner = self.live(ledger_id)
        return runner.lac if runner is not None else None

    async def aclose(self) -> None:
        runners = [*self._live.values(), *self._closed.values()]
        await asyncio.gather(*(r.aclose() for r in runners), return_exceptions=True)
        await self.senders.aclose()


class Recoveries:
    """Recoveries running on this client, one per ledger at a time."""

    def __init__(self, ctx: LedgerClientContext) -> None:
        self.ctx = ctx
        self.limits = RecoveryLimits(
            recovery_timeout_ms=ctx.settings.recovery_timeout_ms,
            speculative_read_ms=ctx.settings.speculative_read_ms,
        )
        self._running: dict[int, asyncio.Future[tuple[LedgerMetadata, int]]] = {}

    async def recover(
        self, metadata: LedgerMetadata, version: int, digest_key: bytes
    ) -> tuple[LedgerMetadata, int]:
        ledger_id = metadata.ledger_id
        running = self._running.get(ledger_id)
        if running is None:
            machine = LedgerRecovery(metadata, version, digest_key=digest_key, limits=self.limits)
            running = asyncio.ensure_future(RecoveryRunner(self.ctx, machine).run())
            self._running[ledger_id] = running
            running.add_done_callback(lambda _: self._running.pop(ledger_id, None))
        return await asyncio.shield(running)
