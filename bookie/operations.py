"""What the event loop submits to the group-commit writer (bookie/writer.py), each
operation with the future its result or error comes back on, and how it comes back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.wire.framing import FramedRecord

Snapshot = tuple[int, int, bool]  # a ledger's (lac, last_entry_id, fenced)


@dataclass(slots=True)
class AddOp:
    records: list[FramedRecord]
    future: asyncio.Future[Any]
    payload_bytes: int


@dataclass(slots=True)
class FenceOp:
    ledger_id: int
    future: asyncio.Future[Any]


@dataclass(slots=True)
class SetLacOp:
    """An explicit LAC from a writer (POST /v1/ledgers/{id}/lac, /v1/lacs), kept if higher."""

    ledger_id: int
    lac: int
    future: asyncio.Future[Any]


@dataclass(slots=True)
class DeleteOp:
    """Delete a ledger's entries and flags. With ``if_state`` (garbage collection,
    bookie/gc.py) only while the ledger's state is still that one: a write since the
    collector's look keeps the ledger. The result is True when deleted, False when kept."""

    ledger_id: int
    future: asyncio.Future[Any]
    if_state: Snapshot | None = None


@dataclass(slots=True)
class AddOpResult:
    """What the writer did with an ``AddOp``: entries stored, and the ones it refused."""

    stored: int
    # (ledger_id, entry_id, error code): ledger_fenced, entry_exists
    rejected: list[tuple[int, int, str]] = field(default_factory=list)


Op = AddOp | FenceOp | SetLacOp | DeleteOp

# Delivered on the loop: (changed ledger states, None = deleted), (future, result or error).
Deliver = Callable[[dict[int, Snapshot | None], list[tuple[asyncio.Future[Any], Any]]], None]
