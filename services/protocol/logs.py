"""Logs: the value stored in a log's znode, log names and positions (docs/protocol.md,
"Ledgers to logs").

A log is a named, ordered list of ledgers. ``LogMetadata`` is immutable: every
change (a writer taking the role, a roll, a truncation) builds a new value that the
caller writes by compare-and-set against the znode version it read, exactly like
ledger metadata. The functions here decide what the new value is; they never read a
clock or touch ZooKeeper.

The writer role. ``writer`` names the gateway that holds the role and its ``epoch``;
the epoch grows by one with every hand-over (``with_new_writer``), and the log keeps
the highest epoch ever handed out even when the role is free. A writer appends only
to the LAST ledger of the list, which it created and put there itself in the same CAS
that gave it the role or in a later roll (``with_roll``), and only while the stored
writer is still itself at its epoch (``held_by``). Taking the role fences the last TWO
ledgers of the list first (``to_fence``): the previous writer may still be adding to
the second-to-last while its roll put the last one in the list.

Positions are ``(ledger_id, entry_id)``, written ``LID:EID`` in URLs and answers.
Log order is the order of the ledger list, then entry order inside a ledger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from services.errors import InvalidArgument, invariant
from services.limits import ID_MAX
from services.protocol import quorum

FORMAT_VERSION = 1
LOG_NAME_MAX_CHARS = 200
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
# A canonical decimal id (like ids in URLs, gateway/http/deps.py): no sign, no leading
# zero, at most 19 digits; so one position has exactly one text form.
_ID = re.compile(r"0|[1-9][0-9]{0,18}")
# A position in a URL as the OpenAPI documents state it (each id also at most 2^63-1).
POSITION_PATTERN = rf"^({_ID.pattern}):({_ID.pattern})$"
# A log's list of ledgers is one znode body (ZooKeeper's 1 MiB limit): at most this
# many ledgers. A roll past it is refused (truncate first); a writer hand-over is too.
LOG_LEDGERS_MAX = 20_000
# Commit ids remembered per log (``with_attached``: exactly-once batch commits).
COMMITS_KEY = "commits"
COMMITS_MAX = 1_000
COMMIT_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def check_log_name(name: str) -> str:
    """``name`` when it is a valid log name (docs/api.md), else ``InvalidArgument``."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        shown = name[:40] + "…" if isinstance(name, str) and len(name) > 40 else name
        raise InvalidArgument(
            f"invalid log name {shown!r}: 1-{LOG_NAME_MAX_CHARS} characters of A-Za-z0-9._-"
        )
    return name


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A record's place in a log: its ledger and its entry in that ledger."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    def to_api(self) -> str:
        return str(self)

    @classmethod
    def parse(cls, text: str, what: str = "position") -> Position:
        """``LID:EID`` (canonical non-negative decimal integers: no sign, no leading
        zero) → Position; ``InvalidArgument``."""
        parts = text.split(":") if isinstance(text, str) else []
        if len(parts) != 2 or not all(_ID.fullmatch(p) for p in parts):
            raise InvalidArgument(f"{what} must be LID:EID (two non-negative integers)")
        ledger_id, entry_id = int(parts[0]), int(parts[1])
        if ledger_id > ID_MAX or entry_id > ID_MAX:
            raise InvalidArgument(f"{what} out of range")
        return cls(ledger_id, entry_id)

    @classmethod
    def from_api(cls, value: Any, what: str = "position") -> Position:
        """``"LID:EID"`` or ``{"ledger_id", "entry_id"}`` (docs/api.md's JSON form)."""
        if isinstance(value, str):
            return cls.parse(value, what)
        if isinstance(value, Mapping) and set(value) == {"ledger_id", "entry_id"}:
            lid, eid = value["ledger_id"], value["entry_id"]
            if all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= ID_MAX
                   for v in (lid, eid)):  # fmt: skip
                return cls(lid, eid)
        raise InvalidArgument(f'{what} must be "LID:EID" or {{"ledger_id", "entry_id"}}')


# A time as ``from_time`` takes it: ms since the Unix epoch, or RFC 3339 with a date, a
# time (fractions allowed) and ``Z`` or an offset.
_EPOCH_MS = re.compile(r"0|[1-9][0-9]{0,15}")
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time(text: str, what: str = "from_time") -> int:
    """A time given as ms since the Unix epoch (a decimal integer) or RFC 3339
    (``2026-11-29T10:00:00Z``, ``2026-11-29T11:00:00.250+01:00``) → ms since the epoch
    (fractions below a millisecond dropped; a time before the epoch is 0);
    ``InvalidArgument`` naming ``what``."""
    if _EPOCH_MS.fullmatch(text):
        return int(text)
    if _RFC3339.fullmatch(text):
        iso = text.upper().replace(" ", "T").replace("Z", "+00:00")
        try:
            at = datetime.fromisoformat(iso)
        except ValueError:
            pass
        else:
            # A time before the epoch is before every record: the same as the epoch.
            return max(0, (at - _EPOCH) // timedelta(milliseconds=1))
    raise InvalidArgument(
        f"{what} must be ms since the Unix epoch (a decimal integer) or an RFC 3339 time "
        "with Z or an offset, e.g. 2026-11-29T10:00:00Z"
    )


@dataclass(frozen=True, slots=True)
class ExpectedLast:
    """The condition of an append (``Expected-Last-Position``): the log's last record is
    at ``position`` (None: the log has no record)."""

    position: Position | None

    @classmethod
    def parse(cls, text: str) -> ExpectedLast:
        """``LID:EID`` or ``none``; ``InvalidArgument``."""
        if text == "none":
            return cls(None)
        return cls(Position.parse(text, "Expected-Last-Position"))

    def __str__(self) -> str:
        return str(self.position) if self.position is not None else "none"


@dataclass(frozen=True, slots=True)
class WriterRole:
    """Who holds a log's writer role: a gateway's id (``host:port``) and the epoch."""

    gateway: str
    epoch: int

    def to_api(self) -> dict[str, Any]:
        return {"gateway": self.gateway, "epoch": self.epoch}


@dataclass(frozen=True)
class LogMetadata:
    """One log. ``epoch`` is the highest writer epoch handed out (0: never)."""

    name: str
    ledgers: tuple[int, ...] = ()
    writer: WriterRole | None = None
    epoch: int = 0
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    created_at: int = 0
    # Fields a later version writes, kept as read so an older gateway's CAS keeps them.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_log_name(self.name)
        quorum.check_sizes(self.ensemble_size, self.write_quorum, self.ack_quorum)
        ledgers = tuple(self.ledgers)
        if len(set(ledgers)) != len(ledgers):
            raise InvalidArgument(f"log {self.name}: a ledger listed twice")
        if not all(isinstance(x, int) and 0 <= x <= ID_MAX for x in ledgers):
            raise InvalidArgument(f"log {self.name}: ledger ids must be non-negative integers")
        object.__setattr__(self, "ledgers", ledgers)
        if self.writer is not None:
            invariant(self.writer.epoch <= self.epoch, "a writer epoch above the log's epoch")

    # ------------------------------------------------------------ questions

    @property
    def last_ledger(self) -> int | None:
        return self.ledgers[-1] if self.ledgers else None

    def to_fence(self) -> tuple[int, ...]:
        """The ledgers a new writer fences before taking the role: the last two."""
        return self.ledgers[-2:]

    def held_by(self, gateway: str, epoch: int) -> bool:
        """Whether ``gateway`` still holds the writer role at ``epoch``."""
        return self.writer == WriterRole(gateway, epoch)

    def index_of(self, ledger_id: int) -> int | None:
        try:
            return self.ledgers.index(ledger_id)
        except ValueError:
            return None

    # ------------------------------------------------------------ changes

    def with_new_writer(self, gateway: str, ledger_id: int) -> LogMetadata:
        """The role for ``gateway`` at the next epoch, writing to ``ledger_id`` (new, last)."""
        invariant(ledger_id not in self.ledgers, "a new writer's ledger is already listed")
        self._check_room()
        epoch = self.epoch + 1
        return replace(
            self,
            ledgers=(*self.ledgers, ledger_id),
            writer=WriterRole(gateway, epoch),
            epoch=epoch,
        )

    def with_roll(self, gateway: str, epoch: int, ledger_id: int) -> LogMetadata:
        """``ledger_id`` appended by the writer ``gateway`` at ``epoch`` (a roll)."""
        invariant(self.held_by(gateway, epoch), "a roll by a gateway that is not the writer")
        invariant(ledger_id not in self.ledgers, "a rolled-in ledger is already listed")
        self._check_room()
        return replace(self, ledgers=(*self.ledgers, ledger_id))

    def committed(self, commit_id: str) -> int | None:
        """The last sequence committed under ``commit_id`` (``with_attached``), if any."""
        value = dict(self.extra.get(COMMITS_KEY) or {}).get(commit_id)
        return value if isinstance(value, int) else None

    def with_attached(
        self, ledger_ids: Sequence[int], commit: tuple[str, int] | None = None
    ) -> LogMetadata:
        """``ledger_ids`` (CLOSED ledgers written elsewhere, e.g. by Spark tasks) appended in
        order, the role taken and left free at the next epoch (the writer that was is
        fenced off: its ledgers were fenced before this), and with ``commit`` the
        sequence recorded under its id (at most ``COMMITS_MAX`` ids, oldest dropped)."""
        ids = tuple(ledger_ids)
        invariant(not set(ids) & set(self.ledgers), "an attached ledger is already listed")
        if len(self.ledgers) + len(ids) > LOG_LEDGERS_MAX:
            raise InvalidArgument(
                f"log {self.name} would hold {len(self.ledgers) + len(ids)} ledgers, over "
                f"{LOG_LEDGERS_MAX}: truncate it first"
            )
        extra = dict(self.extra)
        if commit is not None:
            commits = {k: v for k, v in dict(extra.get(COMMITS_KEY) or {}).items()
                       if k != commit[0]}  # fmt: skip
            commits[commit[0]] = commit[1]
            while len(commits) > COMMITS_MAX:
                commits.pop(next(iter(commits)))
            extra[COMMITS_KEY] = commits
        return replace(
            self, ledgers=(*self.ledgers, *ids), writer=None, epoch=self.epoch + 1, extra=extra
        )

    def without_writer(self, gateway: str, epoch: int) -> LogMetadata:
        """The role given up by its holder (the epoch stays: the next writer's is higher)."""
        invariant(self.held_by(gateway, epoch), "giving up a role not held")
        return replace(self, writer=None)

    def without_ledgers(self, removed: Sequence[int]) -> LogMetadata:
        """The list without ``removed`` (which must be a prefix of it: truncation)."""
        count = len(removed)
        invariant(tuple(removed) == self.ledgers[:count], "truncation removes a prefix only")
        return replace(self, ledgers=self.ledgers[count:])

    def _check_room(self) -> None:
        if len(self.ledgers) >= LOG_LEDGERS_MAX:
            raise InvalidArgument(
                f"log {self.name} has {len(self.ledgers)} ledgers, the most a log holds: "
                "truncate it before adding another"
            )

    # ------------------------------------------------------------ forms

    def to_api(self) -> dict[str, Any]:
        """docs/api.md's log object."""
        return {
            "name": self.name,
            "ledgers": list(self.ledgers),
            "writer": self.writer.to_api() if self.writer else None,
            # The policy as stored (services/protocol/retention.py writes its API form).
            "retention": policy if isinstance(policy := self.extra.get("retention"), dict)
            else None,
        }  # fmt: skip

    def to_json(self) -> bytes:
        doc = {
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "ledgers": list(self.ledgers),
            "writer": self.writer.to_api() if self.writer else None,
            "epoch": self.epoch,
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "created_at": self.created_at,
            "extra": dict(self.extra),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LogMetadata:
        """Parse a znode body; ``InvalidArgument`` when it is not valid log metadata."""
        try:
            doc = json.loads(data)
            version = doc.get("format_version", FORMAT_VERSION)
            if version != FORMAT_VERSION:
                raise InvalidArgument(f"unknown log metadata format {version!r}")
            writer = doc.get("writer")
            return cls(
                name=doc["name"],
                ledgers=tuple(doc["ledgers"]),
                writer=WriterRole(writer["gateway"], writer["epoch"]) if writer else None,
                epoch=doc["epoch"],
                ensemble_size=doc["ensemble_size"],
                write_quorum=doc["write_quorum"],
                ack_quorum=doc["ack_quorum"],
                created_at=doc.get("created_at", 0),
                extra=doc.get("extra") or {},
            )
        except InvalidArgument:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"invalid log metadata: {exc}") from exc


def truncation(
    log: LogMetadata, before: Position, ledger_ends: Mapping[int, int | None]
) -> tuple[int, ...]:
    """The ledgers a truncation before ``before`` removes: whole ledgers that end before
    it, from the front of the list. ``before`` must be in the log (``InvalidArgument``).

    ``ledger_ends`` gives each listed ledger's last entry id when it is CLOSED (None:
    still open). Every ledger listed before ``before.ledger_id`` ends before the
    position; the position's own ledger is removed only when ``before`` is just past
    its end (a CLOSED ledger whose last entry is below ``before.entry_id``), which is
    also the form a reader's ``next`` takes at the end of a ledger. A ledger that is
    not CLOSED is never removed, nor anything after it."""
    index = log.index_of(before.ledger_id)
    if index is None:
        raise InvalidArgument(f"position {before} is not in log {log.name}")
    end = ledger_ends.get(before.ledger_id)
    if end is not None and before.entry_id > end + 1:
        raise InvalidArgument(
            f"position {before} is past the end of ledger {before.ledger_id} (last entry {end})"
        )
    if end is not None and before.entry_id > end:
        index += 1
    # Only CLOSED ledgers end: an open one (a writer may still add to it) stays, and so
    # does everything after it.
    removed: list[int] = []
    for ledger_id in log.ledgers[:index]:
        if ledger_ends.get(ledger_id) is None:
            break
        removed.append(ledger_id)
    return tuple(removed)
