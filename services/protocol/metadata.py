"""Ledger metadata: the value stored in a ledger's znode (docs/protocol.md, "Ledgers").

``LedgerMetadata`` is immutable. Every change (ensemble change, recovery
marker, close) builds a new value that the caller writes by compare-and-set
against the znode version it read; the version is kept beside the value, not
in it. ``to_json()``/``from_json()`` are the znode body; ``to_api()`` is the
ledger object of docs/api.md, which never shows the password hash.

A ledger's entries live in fragments: fragment ``i`` holds the entries from
its ``first_entry_id`` up to the next fragment's first id (the last fragment
is open-ended) on its own ensemble of E bookies. The first fragment starts at
entry 0; first ids strictly increase.

Times are integer milliseconds since the Unix epoch (``created_at``), passed
in by the caller: nothing here reads a clock.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeGuard

from services.errors import InvalidArgument, InvariantViolation, invariant
from services.protocol import quorum
from services.wire.digest import DIGEST_TYPES

FORMAT_VERSION = 1
CUSTOM_METADATA_MAX_BYTES = 64 * 1024
# Distinct fragment lists, and write-set tables, shared across ledgers (``_shared_*``).
# Ensembles are ordered (placement shuffles them), so a cluster of B bookies has up to
# B!/(B-E)! of them: 4,896 for 18 bookies at E 3, all shared here.
SHARED_FRAGMENTS_MAX = 16_384


class LedgerState(StrEnum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class Fragment:
    """Entries from ``first_entry_id`` on are stored on ``bookies`` (the ensemble).

    ``instances`` is parallel to ``bookies``: the instance id (the bookie's cookie)
    each bookie had when it was chosen for this fragment, None when unknown (metadata
    written before instances were recorded; ``()`` means all unknown). Recovery
    compares it with the instance that answers the fence: a bookie that came back
    under another instance lost what this fragment put on it (``recovery.py``)."""

    first_entry_id: int
    bookies: tuple[str, ...]
    instances: tuple[str | None, ...] = ()

    def __post_init__(self) -> None:
        bookies = tuple(self.bookies)
        instances = tuple(self.instances) or (None,) * len(bookies)
        if len(instances) != len(bookies) or not all(
            i is None or (isinstance(i, str) and i) for i in instances
        ):
            raise InvalidArgument(
                f"fragment at {self.first_entry_id}: instances must be one string or null "
                f"per bookie, got {list(instances)} for {list(bookies)}"
            )
        object.__setattr__(self, "bookies", bookies)
        object.__setattr__(self, "instances", instances)

    def instance_of(self, bookie: str) -> str | None:
        """The instance recorded for ``bookie`` in this fragment (None: unknown or absent)."""
        for b, instance in zip(self.bookies, self.instances, strict=True):
            if b == bookie:
                return instance
        return None

    def to_api_obj(self) -> dict[str, Any]:
        """The fragment of docs/api.md's ledger object (no instances)."""
        return {"first_entry_id": self.first_entry_id, "bookies": list(self.bookies)}

    def to_json_obj(self) -> dict[str, Any]:
        """The znode form: the API form, plus ``instances`` when any is known."""
        obj = self.to_api_obj()
        if any(i is not None for i in self.instances):
            obj["instances"] = list(self.instances)
        return obj

    @classmethod
    def from_json_obj(cls, obj: Mapping[str, Any]) -> Fragment:
        instances = obj.get("instances") or []
        if not isinstance(instances, list):
            raise InvalidArgument(f"fragment instances must be a list, got {instances!r}")
        return cls(obj["first_entry_id"], tuple(obj["bookies"]), tuple(instances))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# Ledgers created on the same bookies have equal fragment lists (one fragment at 0, the
# same bookies and instances) and equal write-set tables. The metadata is frozen, so they
# share one object of each instead of holding copies: a gateway keeps the metadata of
# every ledger it writes, 100,000 idle open ones in issue 42's target (benchmarks/README.md,
# "Many open things"). Each table is bounded by ``SHARED_FRAGMENTS_MAX``, its oldest entry
# dropped to make room (a reader of many unlike ledgers, such as the auditor, only loses
# some sharing); a race between threads only loses a share too.
_shared_fragments: dict[tuple[Fragment, ...], tuple[Fragment, ...]] = {}
_shared_write_sets: dict[tuple[tuple[str, ...], int], tuple[tuple[str, ...], ...]] = {}


def _shared_fragment_list(fragments: tuple[Fragment, ...]) -> tuple[Fragment, ...]:
    shared = _shared_fragments.get(fragments)
    if shared is not None:
        return shared
    if len(_shared_fragments) >= SHARED_FRAGMENTS_MAX:
        _drop_oldest(_shared_fragments)
    _shared_fragments[fragments] = fragments
    return fragments


def _shared_write_set_table(
    bookies: tuple[str, ...], write_quorum: int
) -> tuple[tuple[str, ...], ...]:
    """The write sets of an ensemble, by ``entry_id % len(bookies)``."""
    key = (bookies, write_quorum)
    shared = _shared_write_sets.get(key)
    if shared is not None:
        return shared
    table = tuple(
        tuple(bookies[i] for i in write_set)
        for write_set in quorum.write_quorums(len(bookies), write_quorum)
    )
    if len(_shared_write_sets) >= SHARED_FRAGMENTS_MAX:
        _drop_oldest(_shared_write_sets)
    _shared_write_sets[key] = table
    return table


def _drop_oldest(table: dict[Any, Any]) -> None:
    """Drop the entry put in first (dicts keep their order of insertion)."""
    try:
        del table[next(iter(table))]
    except (StopIteration, KeyError, RuntimeError):
        pass  # emptied or changed by another thread meanwhile: nothing to drop


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    """One ledger's metadata. Validated on construction (``InvalidArgument``).

    Slotted, with its fragment list and write sets shared with equal ledgers'
    (``_shared_fragment_list``): a gateway holds one per ledger it writes."""

    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    fragments: tuple[Fragment, ...]
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int | None = None
    length: int = 0
    digest_type: str = "crc32c"
    password_hash: str | None = field(default=None, repr=False)
    custom: Mapping[str, Any] = field(default_factory=dict, hash=False)
    created_at: int = 0
    # When the ledger was closed (ms since the Unix epoch; 0: not known, a ledger still
    # open or closed before this field existed). Stamped by the metadata store on the
    # write that closes it (services/zk/ledger_store.py), kept by every later change.
    closed_at: int = 0
    # hmac-sha256 ledgers: the MAC key sealed with the cluster secret
    # (``services.wire.digest.seal_mac_key``), so replication workers can verify the
    # entries they copy; never the password, never in ``to_api``.
    mac_key_sealed: str | None = field(default=None, repr=False)
    # The write sets of the last fragment, by ``entry_id % ensemble_size`` (the writer asks
    # for one per entry it adds). Derived, never given; shared.
    _write_sets: tuple[tuple[str, ...], ...] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        quorum.check_sizes(self.ensemble_size, self.write_quorum, self.ack_quorum)
        if not _is_int(self.ledger_id) or not 0 <= self.ledger_id < 1 << 63:
            raise InvalidArgument(f"ledger id {self.ledger_id!r} is not a 64-bit id")
        object.__setattr__(self, "state", LedgerState(self.state))
        object.__setattr__(self, "fragments", tuple(self.fragments))
        object.__setattr__(self, "custom", dict(self.custom))
        if self.digest_type not in DIGEST_TYPES:
            raise InvalidArgument(f"unknown digest type {self.digest_type!r}")
        if not self.fragments or self.fragments[0].first_entry_id != 0:
            raise InvalidArgument(f"ledger {self.ledger_id}: the first fragment must start at 0")
        previous = -1
        for fragment in self.fragments:
            bookies = fragment.bookies
            if not _is_int(fragment.first_entry_id) or fragment.first_entry_id <= previous:
                raise InvalidArgument(
                    f"ledger {self.ledger_id}: fragment first ids must increase, "
                    f"got {fragment.first_entry_id} after {previous}"
                )
            if len(bookies) != self.ensemble_size or len(set(bookies)) != len(bookies):
                raise InvalidArgument(
                    f"ledger {self.ledger_id}: fragment at {fragment.first_entry_id} needs "
                    f"{self.ensemble_size} distinct bookies, got {list(bookies)}"
                )
            if not all(isinstance(b, str) and b for b in bookies):
                raise InvalidArgument(f"ledger {self.ledger_id}: bookie ids must be strings")
            previous = fragment.first_entry_id
        if self.state is LedgerState.CLOSED:
            if not _is_int(self.last_entry_id) or self.last_entry_id < -1:
                raise InvalidArgument(
                    f"ledger {self.ledger_id}: a CLOSED ledger needs last_entry_id >= -1"
                )
        elif self.last_entry_id is not None:
            raise InvalidArgument(
                f"ledger {self.ledger_id}: last_entry_id is null unless the ledger is CLOSED"
            )
        if not _is_int(self.length) or self.length < 0:
            raise InvalidArgument(f"ledger {self.ledger_id}: length must be >= 0")
        if not _is_int(self.created_at) or self.created_at < 0:
            raise InvalidArgument(f"ledger {self.ledger_id}: created_at must be >= 0 (ms)")
        if not _is_int(self.closed_at) or self.closed_at < 0:
            raise InvalidArgument(f"ledger {self.ledger_id}: closed_at must be >= 0 (ms)")
        fragments = _shared_fragment_list(self.fragments)
        object.__setattr__(self, "fragments", fragments)
        write_sets = _shared_write_set_table(fragments[-1].bookies, self.write_quorum)
        object.__setattr__(self, "_write_sets", write_sets)

    # ------------------------------------------------------------------ building

    @classmethod
    def new(
        cls,
        ledger_id: int,
        ensemble: Sequence[str],
        write_quorum: int,
        ack_quorum: int,
        *,
        digest_type: str = "crc32c",
        password_hash: str | None = None,
        custom: Mapping[str, Any] | None = None,
        created_at: int = 0,
        mac_key_sealed: str | None = None,
        instances: Mapping[str, str | None] | None = None,
    ) -> LedgerMetadata:
        """An OPEN ledger with one fragment on ``ensemble`` (E = its length), recording
        each bookie's instance from ``instances`` (the registry's view; else unknown)."""
        custom = dict(custom or {})
        if len(json.dumps(custom)) > CUSTOM_METADATA_MAX_BYTES:
            raise InvalidArgument(f"custom metadata over {CUSTOM_METADATA_MAX_BYTES} bytes of JSON")
        return cls(
            ledger_id=ledger_id,
            ensemble_size=len(ensemble),
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            fragments=(
                Fragment(0, tuple(ensemble), tuple((instances or {}).get(b) for b in ensemble)),
            ),
            digest_type=digest_type,
            password_hash=password_hash,
            custom=custom,
            created_at=created_at,
            mac_key_sealed=mac_key_sealed,
        )

    def with_ensemble(
        self,
        first_entry_id: int,
        bookies: Sequence[str],
        instances: Mapping[str, str | None] | None = None,
    ) -> LedgerMetadata:
        """The metadata after an ensemble change: entries from ``first_entry_id`` on go
        to ``bookies``. When the last fragment starts at that same entry it is
        replaced in place (none of its entries was acknowledged).

        A bookie kept from the last fragment keeps the instance recorded there (entries
        it acknowledged before the change may be carried into the new fragment, so the
        instance that took them is the one to compare with); a new bookie gets its
        instance from ``instances`` (the registry's view when it was chosen), else
        unknown."""
        last = self.last_fragment
        invariant(
            first_entry_id >= last.first_entry_id,
            f"ledger {self.ledger_id}: a new fragment at {first_entry_id} would start before "
            f"the last one at {last.first_entry_id}",
        )
        kept = self.fragments[:-1] if first_entry_id == last.first_entry_id else self.fragments
        known = instances or {}
        recorded = tuple(
            last.instance_of(b) if b in last.bookies else known.get(b) for b in bookies
        )
        fragment = Fragment(first_entry_id, tuple(bookies), recorded)
        return replace(self, fragments=(*kept, fragment))

    def replace_bookie(
        self, first_entry_id: int, old: str, new: str, new_instance: str | None = None
    ) -> LedgerMetadata:
        """The metadata with ``old`` replaced by ``new`` at its index in the fragment that
        starts at ``first_entry_id`` (re-replication; the entries were copied first).
        ``new_instance`` is the instance the entries were copied to (None: unknown);
        the other bookies keep theirs. ``new`` may be ``old`` itself: a formatted bookie
        that was given its whole share again, recorded as its new instance."""
        fragments = list(self.fragments)
        for i, fragment in enumerate(fragments):
            if fragment.first_entry_id == first_entry_id:
                invariant(old in fragment.bookies, f"{old} is not in fragment {first_entry_id}")
                invariant(
                    new == old or new not in fragment.bookies,
                    f"{new} is in fragment {first_entry_id}",
                )
                bookies = tuple(new if b == old else b for b in fragment.bookies)
                instances = tuple(
                    new_instance if b == old else instance
                    for b, instance in zip(fragment.bookies, fragment.instances, strict=True)
                )
                fragments[i] = Fragment(first_entry_id, bookies, instances)
                return replace(self, fragments=tuple(fragments))
        raise InvariantViolation(f"ledger {self.ledger_id} has no fragment at {first_entry_id}")

    def in_recovery(self) -> LedgerMetadata:
        """The metadata with state IN_RECOVERY (recovery step 1)."""
        invariant(self.state is LedgerState.OPEN, f"ledger {self.ledger_id} is {self.state}")
        return replace(self, state=LedgerState.IN_RECOVERY)

    def stamped_closed(self, now_ms: int) -> LedgerMetadata:
        """A CLOSED ledger's metadata with ``closed_at`` set to ``now_ms`` unless it is
        set (the store stamps the write that closes a ledger); any other unchanged."""
        if self.state is not LedgerState.CLOSED or self.closed_at:
            return self
        return replace(self, closed_at=max(1, now_ms))

    def closed(self, last_entry_id: int, length: int) -> LedgerMetadata:
        """The metadata with state CLOSED at ``last_entry_id`` and total ``length``."""
        invariant(
            self.state is not LedgerState.CLOSED, f"ledger {self.ledger_id} is already CLOSED"
        )
        return replace(self, state=LedgerState.CLOSED, last_entry_id=last_entry_id, length=length)

    # ------------------------------------------------------------------ reading

    @property
    def last_fragment(self) -> Fragment:
        return self.fragments[-1]

    @property
    def ensemble(self) -> tuple[str, ...]:
        """The bookies of the last fragment: where new entries go."""
        return self.fragments[-1].bookies

    def fragment_for(self, entry_id: int) -> Fragment:
        """The fragment that contains ``entry_id``."""
        invariant(entry_id >= 0, f"entry id {entry_id} < 0")
        firsts = [f.first_entry_id for f in self.fragments]
        return self.fragments[bisect.bisect_right(firsts, entry_id) - 1]

    def write_set_bookies(self, entry_id: int) -> tuple[str, ...]:
        """The Qw bookies that store ``entry_id``, in write-set order."""
        if entry_id >= self.fragments[-1].first_entry_id:  # new entries: the ensemble
            return self._write_sets[entry_id % self.ensemble_size]
        bookies = self.fragment_for(entry_id).bookies
        return tuple(
            bookies[i] for i in quorum.write_set(entry_id, self.ensemble_size, self.write_quorum)
        )

    def bookies(self) -> tuple[str, ...]:
        """Every bookie that stores some fragment, each once, in fragment order."""
        return tuple(dict.fromkeys(b for f in self.fragments for b in f.bookies))

    # ------------------------------------------------------------------ formats

    def to_json(self) -> bytes:
        """The znode body (includes the password hash)."""
        doc = {
            "format_version": FORMAT_VERSION,
            "ledger_id": self.ledger_id,
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "state": self.state.value,
            "last_entry_id": self.last_entry_id,
            "length": self.length,
            "fragments": [f.to_json_obj() for f in self.fragments],
            "digest": self.digest_type,
            "password_hash": self.password_hash,
            "metadata": self.custom,
            "created_at": self.created_at,
        }
        if self.mac_key_sealed is not None:
            doc["mac_key_sealed"] = self.mac_key_sealed
        if self.closed_at:
            doc["closed_at"] = self.closed_at
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LedgerMetadata:
        """Parse a znode body; ``InvalidArgument`` when it is not valid ledger metadata."""
        try:
            doc = json.loads(data)
            version = doc.get("format_version", FORMAT_VERSION)
            if version != FORMAT_VERSION:
                raise InvalidArgument(f"unknown ledger metadata format {version!r}")
            return cls(
                ledger_id=doc["ledger_id"],
                ensemble_size=doc["ensemble_size"],
                write_quorum=doc["write_quorum"],
                ack_quorum=doc["ack_quorum"],
                fragments=tuple(Fragment.from_json_obj(f) for f in doc["fragments"]),
                state=LedgerState(doc["state"]),
                last_entry_id=doc.get("last_entry_id"),
                length=doc.get("length", 0),
                digest_type=doc.get("digest", "crc32c"),
                password_hash=doc.get("password_hash"),
                custom=doc.get("metadata") or {},
                created_at=doc.get("created_at", 0),
                closed_at=doc.get("closed_at", 0),
                mac_key_sealed=doc.get("mac_key_sealed"),
            )
        except InvalidArgument:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"malformed ledger metadata: {exc}") from exc

    def to_api(self) -> dict[str, Any]:
        """The ledger object of docs/api.md (never the password hash)."""
        return {
            "ledger_id": self.ledger_id,
            "state": self.state.value,
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "digest": self.digest_type,
            "last_entry_id": self.last_entry_id,
            "length": self.length,
            "fragments": [f.to_api_obj() for f in self.fragments],
            "metadata": dict(self.custom),
            "created_at": self.created_at,
            "closed_at": self.closed_at or None,
        }
