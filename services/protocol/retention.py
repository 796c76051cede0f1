"""Retention: a log's policy and which of its ledgers the policy removes (docs/logs.md
"Retention").

A policy bounds a log by the age of its data (``max_age_s``), its bytes (``max_bytes``)
and its records (``max_records``), each optional. It is applied in whole CLOSED ledgers
from the front of the log, never to the log's last ledger (where its writer appends, or
the tail the next writer fences), by the elected auditor (auditor/retention.py).

Which ledgers go (``plan``): walking from the front, a ledger is due when

- ``max_age_s``: it was closed at least ``max_age_s`` ago (a closed ledger's records
  were all appended before it closed, so none of them is younger than that);
- ``max_bytes`` / ``max_records``: the log, counted without the ledgers already due,
  holds more than the limit.

The walk stops at the first ledger that is not due: removal is a prefix. With
``retain_for_cursors`` a due ledger that some durable cursor has not acknowledged to
its end is kept (*held*), and so is everything after it; the held ledgers' bytes are
bounded by ``max_backlog_bytes``, past which the oldest held ones go anyway and the
cursors that had not read them are told (``Plan.skipped``, kept on the cursor).

A log with a policy rolls its ledger at a quarter of each limit (``roll_limits``), so
usage stays within one ledger's size of the policy.

This module decides values only: no clock (times arrive as arguments), no ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from services.errors import InvalidArgument
from services.limits import ID_MAX
from services.protocol.logs import LogMetadata, Position

# Where a log's policy lives in its metadata (``LogMetadata.extra``: kept by gateways
# that do not know it), and the ledgers a retention pass removed from the list but has
# not deleted yet (a pass that died between the two is finished by the next one).
POLICY_KEY = "retention"
DELETING_KEY = "deleting"
# The last ledger removed from the front and its last entry: a reader whose next
# position is just past its end (it read it all) goes on at the first listed ledger
# (``resume_at``).
REMOVED_THROUGH_KEY = "removed_through"
# The longest age a policy takes: 100 years, in seconds.
MAX_AGE_S_MAX = 100 * 365 * 24 * 3600
# A log with a policy rolls at a quarter of each limit, but not below these.
ROLL_SHARE = 4
ROLL_BYTES_MIN = 64 * 1024
ROLL_ENTRIES_MIN = 100
ROLL_AGE_S_MIN = 1.0

_LIMITS = ("max_age_s", "max_bytes", "max_records", "max_backlog_bytes")
_FIELDS = (*_LIMITS, "retain_for_cursors")


def _limit(name: str, value: Any) -> int | None:
    if value is None:
        return None
    top = MAX_AGE_S_MAX if name == "max_age_s" else ID_MAX
    # An integral JSON number (``10.0``) is that integer, as everywhere in the API.
    if isinstance(value, float) and value.is_integer() and abs(value) <= top:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise InvalidArgument(f"retention.{name} must be an integer from 1 to {top}, or null")
    return value


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """A log's retention policy (docs/api.md "Retention")."""

    max_age_s: int | None = None
    max_bytes: int | None = None
    max_records: int | None = None
    retain_for_cursors: bool = False
    max_backlog_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in _LIMITS:
            _limit(name, getattr(self, name))
        if not isinstance(self.retain_for_cursors, bool):
            raise InvalidArgument("retention.retain_for_cursors must be true or false")
        if self.max_backlog_bytes is not None and not self.retain_for_cursors:
            raise InvalidArgument(
                "retention.max_backlog_bytes bounds what cursors hold back: it needs "
                "retain_for_cursors true"
            )

    @property
    def limited(self) -> bool:
        """Whether any limit removes data (else the policy removes nothing)."""
        return any(v is not None for v in (self.max_age_s, self.max_bytes, self.max_records))

    @classmethod
    def from_api(cls, value: Any) -> RetentionPolicy | None:
        """The policy object of a request (null or ``{}``: no policy); ``InvalidArgument``
        naming an unknown field or a bad value."""
        if value is None:
            return None
        return cls().patched(value)

    def patched(self, patch: Any) -> RetentionPolicy | None:
        """This policy with ``patch`` applied as a JSON merge patch (RFC 7396): a field
        given a value takes it, a field given null is cleared, a field not named stays.
        None when nothing is left (no limit, not retaining for cursors)."""
        if not isinstance(patch, Mapping):
            raise InvalidArgument("retention must be an object or null")
        unknown = sorted(set(patch) - set(_FIELDS))
        if unknown:
            raise InvalidArgument(
                f"unknown retention field {unknown[0]!r}; known: {', '.join(_FIELDS)}"
            )
        changes: dict[str, Any] = {}
        for name, value in patch.items():
            if name == "retain_for_cursors":
                changes[name] = False if value is None else value
            else:
                changes[name] = _limit(name, value)
        policy = replace(self, **changes)
        return None if policy == RetentionPolicy() else policy

    def to_api(self) -> dict[str, Any]:
        return {
            "max_age_s": self.max_age_s,
            "max_bytes": self.max_bytes,
            "max_records": self.max_records,
            "retain_for_cursors": self.retain_for_cursors,
            "max_backlog_bytes": self.max_backlog_bytes,
        }

    @classmethod
    def from_stored(cls, value: Any) -> RetentionPolicy | None:
        """The policy as a log's metadata keeps it; a value this version cannot read is
        no policy (nothing is removed on a guess)."""
        try:
            return cls.from_api(value)
        except InvalidArgument:
            return None

    def roll_limits(self, size: int, entries: int, age_s: float) -> tuple[int, int, float]:
        """The roll thresholds of a log with this policy, from the gateway's: a quarter
        of each limit where that is lower (not below ``ROLL_*_MIN``)."""
        if self.max_bytes is not None:
            size = min(size, max(ROLL_BYTES_MIN, self.max_bytes // ROLL_SHARE))
        if self.max_records is not None:
            entries = min(entries, max(ROLL_ENTRIES_MIN, self.max_records // ROLL_SHARE))
        if self.max_age_s is not None:
            age_s = min(age_s, max(ROLL_AGE_S_MIN, self.max_age_s / ROLL_SHARE))
        return size, entries, age_s


def policy_of(log: LogMetadata) -> RetentionPolicy | None:
    return RetentionPolicy.from_stored(log.extra.get(POLICY_KEY))


def with_policy(log: LogMetadata, policy: RetentionPolicy | None) -> LogMetadata:
    """The log with ``policy`` (None: without one)."""
    extra = {k: v for k, v in log.extra.items() if k != POLICY_KEY}
    if policy is not None:
        extra[POLICY_KEY] = policy.to_api()
    return replace(log, extra=extra)


def deleting_of(log: LogMetadata) -> tuple[int, ...]:
    """Ledgers a retention pass removed from the list and has not deleted yet."""
    value = log.extra.get(DELETING_KEY)
    if not isinstance(value, list):
        return ()
    return tuple(x for x in value if isinstance(x, int) and not isinstance(x, bool))


def with_removed(log: LogMetadata, removed: Sequence[int], last_entry_id: int) -> LogMetadata:
    """The list without ``removed`` (a prefix of it, whose last ledger ends at
    ``last_entry_id``), which are noted as to be deleted in the same write
    (``deleting_of``)."""
    trimmed = log.without_ledgers(removed)
    pending = list(dict.fromkeys((*deleting_of(log), *removed)))
    through = [removed[-1], last_entry_id]
    return replace(
        trimmed, extra={**log.extra, DELETING_KEY: pending, REMOVED_THROUGH_KEY: through}
    )


def resume_at(log: LogMetadata, start: Position) -> Position | None:
    """Where a read from ``start``, a position in no listed ledger, goes on: the first
    listed ledger's first entry when ``start`` is just past the end of the last ledger
    removed from the front (a reader at the head read it all: no gap); None otherwise
    (records the reader did not read are gone)."""
    through = log.extra.get(REMOVED_THROUGH_KEY)
    if not log.ledgers or not isinstance(through, list) or len(through) != 2:
        return None
    if start == Position(through[0], through[1] + 1):
        return Position(log.ledgers[0], 0)
    return None


def without_deleting(log: LogMetadata, deleted: Sequence[int]) -> LogMetadata:
    """The log with ``deleted`` no longer noted as to be deleted."""
    gone = set(deleted)
    pending = [x for x in deleting_of(log) if x not in gone]
    extra = {k: v for k, v in log.extra.items() if k != DELETING_KEY}
    if pending:
        extra[DELETING_KEY] = pending
    return replace(log, extra=extra)


@dataclass(frozen=True, slots=True)
class LedgerUsage:
    """What the metadata of a listed ledger tells: whether it is CLOSED, its records
    (entries 0..``records - 1``) and bytes (0 for an open ledger, whose length is not
    in its metadata), when it was made and when it closed (ms; None: not known)."""

    ledger_id: int
    closed: bool
    records: int
    bytes: int
    created_at: int
    closed_at: int | None


@dataclass(frozen=True, slots=True)
class Usage:
    """A log's totals over its ledgers (``usage``)."""

    ledgers: int
    records: int
    bytes: int
    oldest_ms: int | None  # when its oldest ledger was made (its records are no older)

    def to_api(self) -> dict[str, Any]:
        return {
            "ledgers": self.ledgers,
            "records": self.records,
            "bytes": self.bytes,
            "oldest_ms": self.oldest_ms,
        }


def usage(spans: Sequence[LedgerUsage]) -> Usage:
    oldest = spans[0].created_at if spans and spans[0].created_at > 0 else None
    return Usage(len(spans), sum(s.records for s in spans), sum(s.bytes for s in spans), oldest)


@dataclass(frozen=True, slots=True)
class Plan:
    """A retention pass's decision for one log: the ledgers to remove (a prefix of the
    list, in order) with the limit that removes each (``age``, ``bytes``, ``records``
    or ``backlog``), the due ledgers kept for cursors, and for each cursor the records
    removed before it acknowledged them."""

    remove: tuple[int, ...] = ()
    reasons: Mapping[int, str] = field(default_factory=dict)
    held: tuple[int, ...] = ()
    skipped: Mapping[str, int] = field(default_factory=dict)


def plan(
    policy: RetentionPolicy | None,
    spans: Sequence[LedgerUsage],
    cursors: Mapping[str, Position | None],
    now_ms: int,
    limit: int | None = None,
) -> Plan:
    """What ``policy`` removes from a log whose ledgers are ``spans`` (in list order),
    with durable cursors at ``cursors`` (each the last record it acknowledged; None:
    none), at ``now_ms``; at most ``limit`` ledgers (the pace of a pass)."""
    if policy is None or not policy.limited or len(spans) < 2:
        return Plan()
    total_bytes = sum(s.bytes for s in spans)
    total_records = sum(s.records for s in spans)
    due: list[tuple[int, str]] = []  # (index, reason)
    for index, span in enumerate(spans[:-1]):
        if not span.closed:
            break
        reason = _due(policy, span, total_bytes, total_records, now_ms)
        if reason is None:
            break
        due.append((index, reason))
        total_bytes -= span.bytes
        total_records -= span.records
    if not due:
        return Plan()
    index_of = {s.ledger_id: i for i, s in enumerate(spans)}
    held_from = len(due)
    if policy.retain_for_cursors and cursors:
        first_unread = min(_first_unread(p, spans, index_of) for p in cursors.values())
        held_from = min(held_from, first_unread)
    removed = list(due[:held_from])
    held = list(due[held_from:])
    if policy.max_backlog_bytes is not None:
        held_bytes = sum(spans[i].bytes for i, _ in held)
        while held and held_bytes > policy.max_backlog_bytes:
            index, _ = held.pop(0)
            removed.append((index, "backlog"))
            held_bytes -= spans[index].bytes
    if limit is not None:
        removed = removed[: max(0, limit)]
    removed_spans = [spans[i] for i, _ in removed]
    skipped = {}
    for name, position in cursors.items():
        count = sum(_unread(position, span, index_of) for span in removed_spans)
        if count:
            skipped[name] = count
    return Plan(
        remove=tuple(s.ledger_id for s in removed_spans),
        reasons={spans[i].ledger_id: reason for i, reason in removed},
        held=tuple(spans[i].ledger_id for i, _ in held),
        skipped=skipped,
    )


def _due(
    policy: RetentionPolicy, span: LedgerUsage, total_bytes: int, total_records: int,
    now_ms: int,
) -> str | None:  # fmt: skip
    if (
        policy.max_age_s is not None
        and span.closed_at is not None
        and now_ms - span.closed_at >= policy.max_age_s * 1000
    ):
        return "age"
    if policy.max_bytes is not None and total_bytes > policy.max_bytes:
        return "bytes"
    if policy.max_records is not None and total_records > policy.max_records:
        return "records"
    return None


def _first_unread(
    position: Position | None, spans: Sequence[LedgerUsage], index_of: Mapping[int, int]
) -> int:
    """The index of the first ledger a cursor at ``position`` has not acknowledged to
    its end (a position in no listed ledger: the first)."""
    index = index_of.get(position.ledger_id) if position is not None else None
    if position is None or index is None:
        return 0
    return index + 1 if position.entry_id >= spans[index].records - 1 else index


def _unread(position: Position | None, span: LedgerUsage, index_of: Mapping[int, int]) -> int:
    """The records of ``span`` after ``position`` (all when the position is in no
    listed ledger; none when it is in a later ledger)."""
    index = index_of.get(position.ledger_id) if position is not None else None
    if position is None or index is None:
        return span.records
    here = index_of[span.ledger_id]
    if index > here:
        return 0
    if index < here:
        return span.records
    return max(0, span.records - 1 - position.entry_id)
