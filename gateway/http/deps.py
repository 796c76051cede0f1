"""What routes get injected: the gateway context, and common path/query/header types.

Integers in paths and queries are canonical decimal (docs/api.md: ids are integers): digits
only, no sign but the minus of a negative query bound, no leading zero, no space, no
fraction — pydantic alone would read ``1.0``, ``+1`` and `` 1`` as 1, so that several
URLs would name one ledger. The path types check it with a validator that keeps their
OpenAPI type (integer); the integer query parameters of a router's routes are checked
by ``canonical_integer_queries``, a router dependency, whatever the route declares.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Query, Request
from fastapi.routing import APIRoute
from pydantic import BeforeValidator

from gateway.passwords import client_address
from gateway.service import Gateway
from services.errors import InvalidArgument, Unavailable
from services.limits import ID_MAX

# "0", or a non-zero digit then digits, optionally negative; at most 19 digits (2^63-1).
_CANONICAL_INTEGER = re.compile(r"0|-?[1-9][0-9]{0,18}")


def canonical_integer(value: Any) -> Any:
    """A pydantic before-validator: a string must be a canonical decimal integer."""
    if isinstance(value, str) and not _is_canonical(value):
        raise ValueError("not a canonical decimal integer")
    return value


def _is_canonical(text: str) -> bool:
    return _CANONICAL_INTEGER.fullmatch(text) is not None and abs(int(text)) <= ID_MAX


async def get_gateway(request: Request) -> Gateway:
    # async: a plain def would run in the thread pool on every request.
    gateway = request.app.state.gateway
    if gateway is None:
        # The lifespan connects to ZooKeeper in the background (gateway/app.py).
        raise Unavailable("the gateway is not ready: it is not connected to ZooKeeper yet")
    return gateway


async def canonical_integer_queries(request: Request) -> None:
    """Refuse (400) a query parameter the route reads as an integer unless every value
    given for it is a canonical decimal integer."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    for name in _integer_queries(route):
        for value in request.query_params.getlist(name):
            if not _is_canonical(value):
                raise InvalidArgument(f"{name}: not a canonical decimal integer")


async def remember_client(request: Request) -> None:
    """Set the client's address for this request's ledger password checks (a context
    variable: FastAPI runs async dependencies in the endpoint's task)."""
    client_address.set(request.client.host if request.client else None)


def _integer_queries(route: APIRoute) -> tuple[str, ...]:
    """The names (aliases) of the route's query parameters typed ``int`` or ``int | None``."""
    names: list[str] = []
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        names += [
            f.alias for f in dependant.query_params if _is_integer_type(f.field_info.annotation)
        ]
        pending += dependant.dependencies
    return tuple(dict.fromkeys(names))


def _is_integer_type(annotation: Any) -> bool:
    if annotation is int:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args == [int]
    return False


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
# The validator comes after Path so that the OpenAPI schema keeps minimum / maximum.
LedgerIdPath = Annotated[
    int, Path(ge=0, le=ID_MAX, description="ledger id"), BeforeValidator(canonical_integer)
]
EntryIdPath = Annotated[
    int, Path(ge=0, le=ID_MAX, description="entry id"), BeforeValidator(canonical_integer)
]
# A range read's bounds: ``from > to`` (both given) is 400 invalid_argument (docs/api.md).
FirstEntryQuery = Annotated[
    int | None, Query(alias="from", ge=0, le=ID_MAX, description="first entry id (default 0)")
]
LastEntryQuery = Annotated[
    int | None,
    Query(
        alias="to",
        ge=0,
        le=ID_MAX,
        description="last entry id, inclusive (default: the LAC, or the last entry of a "
        "closed ledger); below `from`: 400 invalid_argument",
    ),
]
PasswordHeader = Annotated[
    str | None,
    Header(
        alias="X-Ledger-Password",
        description="the ledger's password, when it was created with one",
    ),
]
