"""What the routes work with: the gateway's settings and metrics, the ledger client's
long-lived context, the write handles and recoveries this gateway runs, and the
metadata it keeps for reads (``gateway/metadata_cache.py``).

Built whole in the lifespan (``gateway/app.py``) and never partial: the context holds
only long-lived clients and stores, with the client's settings and metrics (built from
the gateway's: ``GatewaySettings.ledger_client``, ``GatewayMetrics.client``); the handle
table and the recoveries, which hold runners of the protocol core, live beside it here
(``services/ledger_client/handles.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.metadata_cache import MetadataCache
from gateway.metrics import GatewayMetrics
from gateway.stopping import Stopping
from services.errors import Unavailable
from services.ledger_client.context import LedgerClientContext
from services.ledger_client.handles import HandleTable, Recoveries
from services.ledger_client.senders import SenderLimits, SenderTable
from services.settings import GatewaySettings

if TYPE_CHECKING:
    from gateway.logs.cursors import Cursors
    from gateway.logs.writers import LogWriters


@dataclass(frozen=True, slots=True)
class Gateway:
    settings: GatewaySettings
    metrics: GatewayMetrics
    ctx: LedgerClientContext
    handles: HandleTable
    recoveries: Recoveries
    metadata: MetadataCache
    # The log layer (gateway/logs/writers.py ``serve_logs``), where logs are served: the
    # gateway app serves them, a replication worker does not.
    log_writers: list[LogWriters] = field(default_factory=list)
    # The durable cursors of the logs (gateway/logs/cursors.py ``serve_cursors``), beside
    # the log writers and like them served by the gateway app only.
    log_cursors: list[Cursors] = field(default_factory=list)
    # The server's shutdown began: long polls answer now (gateway/stopping.py).
    stopping: Stopping = field(default_factory=Stopping)

    @classmethod
    def build(
        cls, settings: GatewaySettings, metrics: GatewayMetrics, ctx: LedgerClientContext
    ) -> Gateway:
        """The gateway over ``ctx``, which holds ``settings.ledger_client()`` and
        ``metrics.client``."""
        senders = SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings))
        metadata = MetadataCache(ctx.ledgers, metrics.metadata_cache_hits)
        handles = HandleTable(ctx, senders)
        gateway = cls(settings, metrics, ctx, handles, Recoveries(ctx), metadata)
        gateway.stopping.on_begin(handles.wake_waiters)
        metrics.watch_long_polls(lambda: gateway.stopping.waiting)
        return gateway

    @property
    def logs(self) -> LogWriters:
        if not self.log_writers:
            raise Unavailable("this service does not serve logs")
        return self.log_writers[0]

    @property
    def cursors(self) -> Cursors:
        if not self.log_cursors:
            raise Unavailable("this service does not serve cursors")
        return self.log_cursors[0]

    async def aclose(self) -> None:
        for cursors in self.log_cursors:
            await cursors.aclose()
        for writers in self.log_writers:
            await writers.aclose()
        await self.handles.aclose()
