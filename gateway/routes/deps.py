"""What routes get injected: the gateway context, and common path/query/header types."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Request

from gateway.service import Gateway
from services.limits import ID_MAX


async def get_gateway(request: Request) -> Gateway:
    # async: a plain def would run in the thread pool on every request.
    return request.app.state.gateway


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
LedgerIdPath = Annotated[int, Path(ge=0, le=ID_MAX, description="ledger id")]
EntryIdPath = Annotated[int, Path(ge=0, le=ID_MAX, description="entry id")]
PasswordHeader = Annotated[
    str | None,
    Header(
        alias="X-Ledger-Password",
        description="the ledger's password, when it was created with one",
    ),
]
