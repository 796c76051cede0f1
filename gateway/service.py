"""What the routes work with: the long-lived context, and the write handles and
recoveries this gateway runs.

Built whole in the lifespan (``gateway/app.py``) and never partial: the context holds
only long-lived clients and stores; the handle table and the recoveries, which hold
runners of the protocol core, live beside it here (``gateway/handles.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.context import GatewayContext
from gateway.handles import HandleTable, Recoveries
from gateway.senders import SenderLimits, SenderTable


@dataclass(frozen=True, slots=True)
class Gateway:
    ctx: GatewayContext
    handles: HandleTable
    recoveries: Recoveries

    @classmethod
    def build(cls, ctx: GatewayContext) -> Gateway:
        senders = SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings))
        return cls(ctx, HandleTable(ctx, senders), Recoveries(ctx))

    async def aclose(self) -> None:
        await self.handles.aclose()
