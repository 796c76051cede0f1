"""Durable cursors: a reader's position in a log, kept by the cluster (docs/logs.md
"Durable cursors"; docs/api.md "Logs: cursors").

A cursor is named within its log and stores the LAST record it acknowledged
(``position``; None before any: a read starts at the log's first record). Acks only
move it forward: acks that arrive together are merged to the highest (``merged``), and
a position at or below the stored one changes nothing, whichever gateway stored it.

The lag of a cursor is counted from ledger metadata, never by reading entries
(``lag``): every entry after the position, and the bytes of those entries, which for the
position's own ledger and for an open ledger whose length is not known are estimated
from the mean entry size (see ``lag``).

This module decides values only: no clock (times arrive as arguments), no ZooKeeper.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from services.errors import InvalidArgument
from services.protocol.logs import LOG_NAME_MAX_CHARS, Position, check_log_name, parse_time

FORMAT_VERSION = 1
# A log's cursors are deleted with the log in one ZooKeeper transaction (one request,
# within ZooKeeper's 1 MiB), so a log holds at most this many.
CURSORS_PER_LOG_MAX = 1_000
CURSOR_NAME_MAX_CHARS = LOG_NAME_MAX_CHARS


def check_cursor_name(name: str) -> str:
    """``name`` when it is a valid cursor name (the rules of log names), else
    ``InvalidArgument`` naming a cursor."""
    try:
        return check_log_name(name)
    except InvalidArgument as exc:
        raise InvalidArgument(exc.message.replace("log name", "cursor name", 1)) from None


@dataclass(frozen=True, slots=True)
class CursorState:
    """What a cursor's znode holds: the last record acknowledged (None: none yet), when
    it was acknowledged and when the cursor was made (ms since the Unix epoch)."""

    position: Position | None
    acked_at: int | None
    created_at: int
    # Records retention removed before this cursor acknowledged them, in all, and when
    # it last did (services/protocol/retention.py; written by the auditor's pass).
    skipped_records: int = 0
    skipped_at: int | None = None

    def acked(self, position: Position, now_ms: int) -> CursorState:
        return replace(self, position=position, acked_at=now_ms)

    def skipped(self, records: int, now_ms: int) -> CursorState:
        """The cursor told that retention removed ``records`` it had not acknowledged."""
        return replace(self, skipped_records=self.skipped_records + records, skipped_at=now_ms)

    def next(self) -> Position | None:
        """Where a read through the cursor starts: just after its position (a read from
        one past the last entry of a CLOSED ledger goes on at the next ledger's entry 0,
        gateway/logs/reads.py); None: the log's first record."""
        if self.position is None:
            return None
        return Position(self.position.ledger_id, self.position.entry_id + 1)

    def to_json(self) -> bytes:
        doc = {
            "format_version": FORMAT_VERSION,
            "position": str(self.position) if self.position is not None else None,
            "acked_at": self.acked_at,
            "created_at": self.created_at,
        }
        if self.skipped_records:
            doc["skipped_records"] = self.skipped_records
            doc["skipped_at"] = self.skipped_at
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CursorState:
        """Parse a znode body; ``InvalidArgument`` when it is not a cursor."""
        try:
            doc = json.loads(data)
            version = doc.get("format_version", FORMAT_VERSION)
            if version != FORMAT_VERSION:
                raise InvalidArgument(f"unknown cursor format {version!r}")
            raw = doc["position"]
            return cls(
                Position.parse(raw) if raw is not None else None,
                doc.get("acked_at"),
                doc.get("created_at", 0),
                doc.get("skipped_records", 0),
                doc.get("skipped_at"),
            )
        except InvalidArgument:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"invalid cursor: {exc}") from exc

    def to_api(self, name: str, lag_records: int, lag_bytes: int) -> dict[str, Any]:
        """docs/api.md's cursor object."""
        return {
            "name": name,
            "position": str(self.position) if self.position is not None else None,
            "lag_records": lag_records,
            "lag_bytes": lag_bytes,
            "acked_at": self.acked_at,
            "skipped_records": self.skipped_records,
            "skipped_at": self.skipped_at,
        }


def merged(stored: Position | None, acks: Sequence[Position]) -> Position | None:
    """The position to store after ``acks``: the highest of them when it is past
    ``stored``, else None (nothing to write: a cursor never moves back)."""
    if not acks:
        return None
    highest = max(acks)
    return highest if stored is None or highest > stored else None


@dataclass(frozen=True, slots=True)
class CursorStart:
    """Where a new cursor starts (``PUT .../cursors/{cursor}``'s ``start``): ``earliest``
    (before the log's first record), ``latest`` (at its last record), a position, or a
    time (at the record before the first stamped >= ``time_ms``)."""

    kind: str  # "earliest", "latest", "position" or "time"
    position: Position | None = None
    time_ms: int | None = None

    @classmethod
    def from_api(cls, value: Any) -> CursorStart:
        """``"earliest"``, ``"latest"``, ``"LID:EID"`` or ``{"time": T}`` (T: ms since the
        Unix epoch or RFC 3339); ``InvalidArgument``."""
        if value == "earliest" or value == "latest":
            return cls(value)
        if isinstance(value, str):
            return cls("position", position=Position.parse(value, "start"))
        if isinstance(value, Mapping) and set(value) == {"time"}:
            raw = value["time"]
            if isinstance(raw, int) and not isinstance(raw, bool):
                raw = str(raw)
            if isinstance(raw, str):
                return cls("time", time_ms=parse_time(raw, "start.time"))
        raise InvalidArgument('start must be "earliest", "latest", "LID:EID" or {"time": T}')


@dataclass(frozen=True, slots=True)
class LedgerSpan:
    """What ledger metadata tells of a listed ledger: its entries 0..``end`` (-1: none)
    and their bytes (None: not known, an open ledger another gateway writes)."""

    ledger_id: int
    end: int
    length: int | None


def lag(position: Position | None, spans: Sequence[LedgerSpan]) -> tuple[int, int]:
    """(records, bytes) after ``position`` in ``spans``, the log's ledgers from the
    position's ledger on (all of them when ``position`` is None).

    Records are entries: exact. Bytes are the ledgers' lengths (which count the log
    layer's envelope of each record); for the position's own ledger the share after the
    position is estimated from its mean entry size, and an open ledger of unknown length
    from the mean entry size of the spans whose length is known (0 when none is)."""
    known = [s for s in spans if s.length is not None and s.end >= 0]
    known_entries = sum(s.end + 1 for s in known)
    mean = sum(s.length or 0 for s in known) / known_entries if known_entries else 0.0
    records, size = 0, 0.0
    for span in spans:
        first = 0
        if position is not None and span.ledger_id == position.ledger_id:
            first = position.entry_id + 1
        count = max(0, span.end + 1 - first)
        records += count
        if span.length is None:
            size += count * mean
        elif span.end >= 0:
            size += span.length * count / (span.end + 1)
    return records, round(size)
