"""Repairing one locked ledger, as a pure operation: plan from the mark and fresh metadata,
copy, swap, clear (docs/protocol.md, "Auto-recovery").

``RepairOp`` takes events and returns effects (docs/style.md §1); the replication
worker's runner (``replicator/repair.py``) and the simulator
(``tests/simulation/worker.py``) carry the effects out and feed the answers back. It
decides with ``services.protocol.replication``; it reads no clock (``now_ms`` comes with
every event) and draws targets from the seeded ``rng`` it is given. What it reads of the
worker's surroundings (the bookie registry as the worker's watches keep it, when the
worker first saw a bookie missing, whether replication is enabled) it reads through
``RepairView``, synchronously: a cache, no I/O.

The worker holds the ledger's lock while this runs. Each round re-reads the mark and the
metadata and plans again (``replication.repairs``): the missing bookies are the mark's
plus every fragment bookie that is not registered or is being decommissioned. Every
repair of a CLOSED ledger, and of a fragment of an OPEN ledger that is not its last, is
done at once, in fragment order: choose a target (writable, registered, not
decommissioning, not in the fragment, not missing unless no other is free: the mark may
name a bookie registered again, the only one left in a small cluster), copy the missing
bookie's share to it (``CopyShare``: from the fragment's bookies that are not missing
and, last, from missing ones still registered, which may hold the only copy: a live
bookie being decommissioned, as with Qw=1, or one the mark names for lacking other
entries, as with Qa=1; a failed target is replaced by another, up to
``REPAIR_TARGETS_TRIED_MAX``), then swap the bookie in that fragment by compare-and-set on
freshly read metadata, only while the repair still applies (same fragment, same span,
same bookie): a concurrent ensemble change or close is never overwritten; when the span
changed the round ends and the next one re-plans. A repair of the open-ended last
fragment waits for the grace period, counted from when its bookie was first seen missing
(``RepairView.missing_since``, never the mark's time: an old mark for another fragment's
bookie must not let a bookie that is restarting now fence its writer), and then recovers
the ledger (``Recover``: fence and close). A bookie of the open last fragment that is
registered and answers (``Probe``) is left to the writer, unless it is registered as
another instance than the fragment recorded: formatted since, it lost its share while
the writer, whose adds the new instance takes, cannot tell; it is waited for and
recovered like a missing one.

A bookie the mark names that is registered again (back after the lost-bookie delay, or
alive and found lacking entries by the auditor's replica check), not being
decommissioned and still the instance the fragment recorded, is FILLED IN PLACE: the
entries of its share it lacks (``AskStored``) are copied to it and the metadata stays as
it is. That is the only repair possible when every bookie of the cluster is in the
fragment, and it costs nothing when the bookie came back whole. A bookie that refuses
the copy, stores an entry with other bytes (corrupt), or does not answer is replaced as
above. A formatted bookie (registered as another instance than the fragment recorded)
lost its share and is replaced; only when no other bookie is free (every writable one is
in the fragment) is it given its whole share itself, its new instance recorded by the
swap's compare-and-set: a replacement by itself. Later rounds skip a bookie filled in
place only while it is registered as the instance filled: one that left meanwhile is
replaced (the auditor's mark already names it, so its marking changes nothing).

A mark may also ask for PLACEMENT MOVES (``MarkRead.misplaced``: the auditor found a
settled fragment whose write quorums span too few racks, docs/operations.md "Racks").
Once a round finds nothing missing, it plans one move per misplaced settled fragment
that a writable bookie on another rack improves (``replication.placement_moves``,
judged afresh on the round's metadata and registry): the moving bookie is a healthy
replica, so it is not asked to fill in place; its share is copied to a target on a rack
its write quorums lack (read from the fragment's bookies, itself included), and only
then swapped out, by the same compare-and-set as a repair. The last good replica is
never dropped: the copy lands before the swap, and a target that does not improve the
spread ends the repair (retried later) instead of moving anything. Each move leaves
fewer write quorums short, so the rounds end.

When a round finds nothing to repair the mark is deleted at the version read at the
round's start, in one transaction with a check that the metadata is still at the version
planned on; if either changed meanwhile (the auditor added a bookie; a close or an
ensemble change, maybe one a lagging read missed, settled a fragment) the next round
re-plans. What is transport stays with the runner: reading the share in bounded batches
from the sources and writing it to the target (``replicator/copy.py``), the mark and the
lock in ZooKeeper, the recovery itself. A failure the runner cannot answer with an event
(no source yields an entry, the store fails) ends the repair there: the worker releases
the lock and retries the ledger later.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from services.errors import (
    LedgerNotFound,
    MetadataConflict,
    NotEnoughBookies,
    QuireError,
    invariant,
    present,
)
from services.protocol.limits import (
    REPAIR_ROUNDS_MAX,
    REPAIR_SWAP_ATTEMPTS_MAX,
    REPAIR_TARGETS_TRIED_MAX,
)
from services.protocol.metadata import LedgerMetadata
from services.protocol.placement import Racks, rack_count, short_quorums
from services.protocol.replication import (
    Repair,
    Span,
    choose_target,
    entries_on,
    formatted,
    last_fragment_affected,
    missing_entries,
    placement_moves,
    repairs,
    replace_bookie,
    spans,
    still_applies,
)


class Outcome(StrEnum):
    DONE = "done"  # the mark was cleared: the ledger is whole
    GONE = "gone"  # no mark (or no ledger) any more
    POSTPONED = "postponed"  # an open ledger's last fragment waits for the grace period
    STOPPED = "stopped"  # replication was disabled (or the worker stops): nothing finished


class RepairView(Protocol):
    """What the operation reads of the worker's surroundings, without I/O."""

    @property
    def enabled(self) -> bool:
        """Replication is enabled and the worker is not stopping."""
        ...

    @property
    def writable(self) -> Collection[str]:
        """Registered writable bookies, none being decommissioned."""
        ...

    @property
    def racks(self) -> Racks:
        """Every registered bookie and its rack (None: it registered none)."""
        ...

    def usable(self, bookie: str) -> bool:
        """Registered and not being decommissioned."""
        ...

    def leaving(self, bookie: str) -> bool:
        """Registered and being decommissioned: replaced everywhere, yet read from (last)
        while its share is copied, for it may hold the only copy (Qw=1)."""
        ...

    def instance_of(self, bookie: str) -> str | None:
        """The instance registered under ``bookie`` now (None: unknown)."""
        ...

    def missing_since(self, bookie: str) -> int:
        """``bookie`` is unavailable now: since when the worker has seen it so (ms, on the
        clock ``now_ms`` is read from; recorded now if new)."""
        ...

    def back(self, bookie: str) -> None:
        """``bookie`` answers: a later absence starts a new grace."""
        ...


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class MarkRead:
    missing: frozenset[str]
    version: int
    misplaced: bool = False  # the auditor asks for placement moves too


@dataclass(frozen=True, slots=True)
class NoMark:
    """The ledger is not marked (any more)."""


@dataclass(frozen=True, slots=True)
class MetadataRead:
    metadata: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class NoLedger:
    """The ledger was deleted."""


@dataclass(frozen=True, slots=True)
class MarkCleared:
    cleared: bool  # False: the mark changed since it was read (a bookie was merged in)


@dataclass(frozen=True, slots=True)
class Probed:
    answering: frozenset[str]  # the probed bookies that answered (a 404 counts)


@dataclass(frozen=True, slots=True)
class StoredRead:
    """What the asked bookie stores of the ledger: runs ``(first, last)`` ascending (none
    when it knows nothing of it), and whether it found an entry of it corrupt."""

    ranges: tuple[tuple[int, int], ...]
    corrupt: bool


@dataclass(frozen=True, slots=True)
class StoredUnknown:
    """The asked bookie did not answer."""


@dataclass(frozen=True, slots=True)
class Copied:
    """Every wanted entry is stored on the target."""


@dataclass(frozen=True, slots=True)
class TargetFailed:
    """The target failed or refused a record: nothing is swapped to it."""

    reason: str


@dataclass(frozen=True, slots=True)
class CopyAborted:
    """The copy stopped early (replication disabled, the worker stopping)."""


@dataclass(frozen=True, slots=True)
class Swapped:
    """The compare-and-set of ``Swap`` landed."""


@dataclass(frozen=True, slots=True)
class SwapConflict:
    """The compare-and-set of ``Swap`` lost: the metadata's version moved."""


@dataclass(frozen=True, slots=True)
class Recovered:
    """The ledger was fenced and closed."""


Event = (
    MarkRead | NoMark | MetadataRead | NoLedger | MarkCleared | Probed | StoredRead
    | StoredUnknown | Copied | TargetFailed | CopyAborted | Swapped | SwapConflict | Recovered
)  # fmt: skip

# ---------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class ReadMark:
    """Read the ledger's under-replication mark (``MarkRead`` or ``NoMark``)."""


@dataclass(frozen=True, slots=True)
class ReadMetadata:
    """Read the ledger's metadata (``MetadataRead`` or ``NoLedger``)."""


@dataclass(frozen=True, slots=True)
class ClearMark:
    """Delete the mark if it is still at ``version`` and the ledger's metadata still at
    ``metadata_version`` (None: the ledger is gone), in one transaction (``MarkCleared``);
    ``missing`` is every bookie the round found missing, all of them repaired. The plan
    that found nothing left was made on that metadata, maybe read from a server behind
    the leader; a close or an ensemble change it missed, or made since, may have settled
    a fragment naming a bookie the mark names, which lacks entries."""

    version: int
    missing: frozenset[str]
    metadata_version: int | None


@dataclass(frozen=True, slots=True)
class Probe:
    """Ask each of ``bookies`` (in parallel) whether it answers about this ledger now
    (``Probed``): a killed bookie stays registered until its session expires."""

    bookies: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AskStored:
    """Ask ``bookie`` which entries of the ledger it stores (``StoredRead``,
    ``StoredUnknown``)."""

    bookie: str


@dataclass(frozen=True, slots=True)
class CopyShare:
    """Copy ``wanted`` (ascending) of the fragment at ``repair.first`` to ``target``: read
    from the fragment's ``bookies`` other than ``unusable``, asking ``last_resort`` only
    when no other replica of an entry is left, each record verified with the digest of
    ``metadata``; written with the recovery flag (``Copied``, ``TargetFailed``,
    ``CopyAborted``). ``target`` is ``repair.bookie`` itself when filling in place."""

    metadata: LedgerMetadata
    repair: Repair
    target: str
    bookies: tuple[str, ...]
    wanted: tuple[int, ...]
    unusable: frozenset[str]
    last_resort: frozenset[str]


@dataclass(frozen=True, slots=True)
class Swap:
    """Compare-and-set ``after`` (``before`` with ``repair.bookie`` replaced by ``target``
    in its fragment, recorded as the instance copied to; ``target`` is ``repair.bookie``
    itself for a formatted bookie given its share again) at ``version`` (``Swapped``,
    ``SwapConflict``)."""

    repair: Repair
    target: str
    before: LedgerMetadata
    after: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class Recover:
    """Fence and close the ledger (``Recovered``): its last fragment's ``bookies`` have
    been missing for the grace period."""

    metadata: LedgerMetadata
    version: int
    bookies: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Planned:
    """A round planned ``repairs`` repairs (for progress reports)."""

    repairs: int


@dataclass(frozen=True, slots=True)
class Repaired:
    """One repair is done: ``entries`` copied to ``target`` and swapped in, or to
    ``repair.bookie`` itself (``in_place``: the metadata unchanged, or for a formatted
    bookie its new instance recorded)."""

    repair: Repair
    target: str
    entries: int
    in_place: bool


@dataclass(frozen=True, slots=True)
class Finished:
    outcome: Outcome
    due_ms: int | None = None  # POSTPONED: when to come back (on the ``now_ms`` clock)


@dataclass(frozen=True, slots=True)
class Failed:
    """The repair ends without finishing: the lock is released, the ledger retried later."""

    error: type[QuireError]
    message: str

    def exception(self) -> QuireError:
        return self.error(self.message)


Effect = (
    ReadMark | ReadMetadata | ClearMark | Probe | AskStored | CopyShare | Swap | Recover
    | Planned | Repaired | Finished | Failed
)  # fmt: skip


class _State(StrEnum):
    MARK = "mark"  # ReadMark sent
    METADATA = "metadata"  # ReadMetadata sent to plan
    CLEAR = "clear"  # ClearMark sent
    PROBE = "probe"  # Probe sent
    STORED = "stored"  # AskStored sent (filling in place)
    FILL = "fill"  # CopyShare to the missing bookie itself sent
    COPY = "copy"  # CopyShare to a target sent
    SWAP_READ = "swap_read"  # ReadMetadata sent to swap
    SWAP = "swap"  # Swap sent
    RECOVER_READ = "recover_read"  # ReadMetadata sent to decide a recovery
    RECOVER = "recover"  # Recover sent
    DONE = "done"


@dataclass(slots=True)
class _Current:
    """The repair being carried out and what its copy needs."""

    repair: Repair
    span: Span
    wanted: tuple[int, ...]
    unusable: frozenset[str]
    last_resort: frozenset[str]
    instance: str | None = None  # the instance filled, or the target's when its copy began
    formatted: bool = False  # the bookie is registered as another instance than recorded
    lacking: tuple[int, ...] = ()
    target: str | None = None
    tried: int = 0
    excluded: frozenset[str] = frozenset()
    swap_attempts: int = 0


class RepairOp:
    """Repair ledger ``ledger_id`` under its lock (see the module docstring)."""

    def __init__(self, ledger_id: int, view: RepairView, rng: random.Random, grace_ms: int) -> None:
        self.ledger_id = ledger_id
        self.view = view
        self.rng = rng
        self.grace_ms = grace_ms
        self.rounds = 0
        self.now_ms = 0
        self._state = _State.MARK
        self._mark: MarkRead | None = None
        self._metadata: LedgerMetadata | None = None
        self._version = -1
        self._missing: frozenset[str] = frozenset()
        self._planned: list[Repair] = []
        self._probed: tuple[str, ...] = ()
        self._queue: list[Repair] = []
        self._open_bookies: tuple[str, ...] = ()
        self._open_missing_since: int | None = None
        # a repair of this round's plan was carried out: time passed since the plan
        self._repaired_since_plan = False
        self._current: _Current | None = None
        # (fragment first id, bookie) filled in place -> the instance it was filled as
        self._filled_as: dict[tuple[int, str], str | None] = {}

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    def start(self, now_ms: int) -> list[Effect]:
        self.now_ms = now_ms
        return self._round()

    def handle(self, event: Event, now_ms: int) -> list[Effect]:
        """The answer to the last action effect returned; the next effects."""
        invariant(not self.done, "an event after the repair ended")
        self.now_ms = now_ms
        state = self._state
        if isinstance(event, MarkRead | NoMark):
            invariant(state is _State.MARK, f"a mark read in state {state}")
            return self._on_mark(event)
        if isinstance(event, MetadataRead | NoLedger):
            return self._on_metadata(event)
        if isinstance(event, MarkCleared):
            invariant(state is _State.CLEAR, f"a mark cleared in state {state}")
            if event.cleared:
                outcome = Outcome.DONE if self._metadata is not None else Outcome.GONE
                return self._finish(outcome)
            return self._round()
        if isinstance(event, Probed):
            invariant(state is _State.PROBE, f"a probe answered in state {state}")
            return self._plan(event.answering & set(self._probed))
        if isinstance(event, StoredRead | StoredUnknown):
            invariant(state is _State.STORED, f"a stored answer in state {state}")
            return self._on_stored(event)
        if isinstance(event, Copied | TargetFailed | CopyAborted):
            invariant(state in (_State.FILL, _State.COPY), f"a copy answered in state {state}")
            return self._on_filled(event) if state is _State.FILL else self._on_copied(event)
        if isinstance(event, Swapped | SwapConflict):
            invariant(state is _State.SWAP, f"a swap answered in state {state}")
            return self._on_swapped(event)
        invariant(state is _State.RECOVER, f"a recovery answered in state {state}")
        return self._round()

    # ------------------------------------------------------------------ rounds

    def _finish(self, outcome: Outcome, due_ms: int | None = None) -> list[Effect]:
        self._state = _State.DONE
        return [Finished(outcome, due_ms)]

    def _fail(self, error: type[QuireError], message: str) -> list[Effect]:
        self._state = _State.DONE
        return [Failed(error, message)]

    def _round(self) -> list[Effect]:
        """Start a round: read the mark, then the metadata, and plan."""
        if self.rounds >= REPAIR_ROUNDS_MAX:
            message = f"ledger {self.ledger_id}: still changing after {REPAIR_ROUNDS_MAX} plans"
            return self._fail(MetadataConflict, message)
        self.rounds += 1
        if not self.view.enabled:
            return self._finish(Outcome.STOPPED)
        self._mark, self._metadata, self._current = None, None, None
        self._missing = frozenset()
        self._state = _State.MARK
        return [ReadMark()]

    def _on_mark(self, event: MarkRead | NoMark) -> list[Effect]:
        if isinstance(event, NoMark):
            return self._finish(Outcome.GONE)
        self._mark = event
        self._state = _State.METADATA
        return [ReadMetadata()]

    def _on_metadata(self, event: MetadataRead | NoLedger) -> list[Effect]:
        state = self._state
        if state is _State.METADATA:
            if isinstance(event, NoLedger):
                return self._clear()
            return self._read_for_plan(event)
        if isinstance(event, NoLedger):
            invariant(state in (_State.SWAP_READ, _State.RECOVER_READ), f"no ledger in {state}")
            return self._fail(LedgerNotFound, f"no ledger {self.ledger_id}")
        if state is _State.SWAP_READ:
            return self._swap(event)
        invariant(state is _State.RECOVER_READ, f"metadata read in state {state}")
        if not last_fragment_affected(event.metadata, self._missing):
            return self._round()  # its writer replaced the bookie itself
        self._state = _State.RECOVER
        return [Recover(event.metadata, event.version, self._open_bookies)]

    def _read_for_plan(self, event: MetadataRead) -> list[Effect]:
        """Plan on the round's metadata; ask the open last fragment's usable bookies
        whether they answer before deciding about them."""
        view, mark = self.view, present(self._mark, "planning without a mark")
        self._metadata, self._version = event.metadata, event.version
        self._missing = mark.missing | {b for b in event.metadata.bookies() if not view.usable(b)}
        self._planned = [
            r for r in repairs(event.metadata, self._missing) if not self._still_filled(r)
        ]
        if not self._planned and mark.misplaced:
            racks = view.racks
            self._planned = placement_moves(
                event.metadata, racks, racks.keys(), view.writable, self._missing
            )
        # A formatted bookie of the open last fragment answers, but lost its share: the
        # writer does not know (the new instance takes its adds), so it is not probed but
        # waited for and recovered like a missing one.
        formatted_last = formatted(event.metadata, view.instance_of, -1)
        self._probed = tuple(
            sorted(
                {
                    r.bookie
                    for r in self._planned
                    if r.is_open_last and view.usable(r.bookie) and r.bookie not in formatted_last
                }
            )
        )
        if self._probed:
            self._state = _State.PROBE
            return [Probe(self._probed)]
        return self._plan(frozenset())

    def _plan(self, back: frozenset[str]) -> list[Effect]:
        view = self.view
        plan = [r for r in self._planned if not (r.is_open_last and r.bookie in back)]
        for bookie in sorted(back):
            view.back(bookie)
        # The grace runs from the first absence of the last fragment's missing bookie.
        open_last = [r.bookie for r in plan if r.is_open_last]
        self._open_bookies = tuple(sorted(set(open_last)))
        self._open_missing_since = min((view.missing_since(b) for b in open_last), default=None)
        if not plan:
            return self._clear()
        self._queue = [r for r in plan if not r.is_open_last]
        self._repaired_since_plan = False
        return [Planned(len(plan)), *self._next_repair()]

    def _clear(self) -> list[Effect]:
        mark = present(self._mark, "clearing without a mark")
        self._state = _State.CLEAR
        metadata_version = self._version if self._metadata is not None else None
        return [ClearMark(mark.version, self._missing, metadata_version)]

    def _next_repair(self) -> list[Effect]:
        """The next repair of the plan; after the last, the open last fragment's fate,
        decided on a plan made now: when repairs ran since this one, a bookie it found
        missing may be back, so the next round plans (and probes) again."""
        if self._queue:
            self._repaired_since_plan = True
            return self._begin(self._queue.pop(0))
        self._current = None
        if self._open_missing_since is None or self._repaired_since_plan:
            return self._round()
        due = self._open_missing_since + self.grace_ms
        if self.now_ms < due:
            return self._finish(Outcome.POSTPONED, due)
        self._state = _State.RECOVER_READ
        return [ReadMetadata()]

    def _still_filled(self, repair: Repair) -> bool:
        """Filled in place earlier in this run and still registered as that instance. One
        gone since (or formatted) is repaired again: the auditor's mark already names it,
        so its marking changes nothing, and a mark cleared with it named would leave the
        fragment short until the periodic audit."""
        key = (repair.first, repair.bookie)
        return (
            key in self._filled_as
            and self.view.usable(repair.bookie)
            and self.view.instance_of(repair.bookie) == self._filled_as[key]
        )

    # ------------------------------------------------------------------ one repair

    def _begin(self, repair: Repair) -> list[Effect]:
        view, metadata = self.view, present(self._metadata, "repairing without metadata")
        span = next(s for s in spans(metadata) if s.first == repair.first)
        last = repair.last if repair.last is not None else repair.first - 1
        # A missing bookie still registered (being decommissioned, or named by the mark
        # for lacking some entries) may hold the only copy of others: read last.
        registered = frozenset(b for b in self._missing if view.usable(b) or view.leaving(b))
        wanted = entries_on(
            repair.first, last, repair.bookie_index, metadata.ensemble_size,
            metadata.write_quorum,
        )  # fmt: skip
        current = self._current = _Current(
            repair, span, tuple(wanted), self._missing - registered, registered
        )
        if repair.move or not view.usable(repair.bookie):
            return self._try_target()
        fragment = next(f for f in metadata.fragments if f.first_entry_id == repair.first)
        recorded = fragment.instances[repair.bookie_index] if fragment.instances else None
        current.instance = view.instance_of(repair.bookie)
        if recorded is not None and recorded != current.instance:
            current.formatted = True
            return self._fill_failed()  # formatted since: its share is gone, replace it
        self._state = _State.STORED
        return [AskStored(repair.bookie)]

    def _on_stored(self, event: StoredRead | StoredUnknown) -> list[Effect]:
        current = present(self._current, "a stored answer without a repair")
        if isinstance(event, StoredUnknown) or event.corrupt:
            return self._fill_failed()
        current.lacking = tuple(missing_entries(current.wanted, event.ranges))
        if not current.lacking:
            return self._filled()
        self._state = _State.FILL
        return [self._copy(current.repair.bookie, current.lacking, current.repair.bookie)]

    def _on_filled(self, event: Copied | TargetFailed | CopyAborted) -> list[Effect]:
        if isinstance(event, Copied):
            return self._filled()
        return self._fill_failed()

    def _filled(self) -> list[Effect]:
        current = present(self._current, "filled without a repair")
        repair = current.repair
        self._filled_as[(repair.first, repair.bookie)] = current.instance
        return [
            Repaired(repair, repair.bookie, len(current.lacking), in_place=True),
            *self._next_repair(),
        ]

    def _fill_failed(self) -> list[Effect]:
        """The bookie cannot be filled in place: replace it, unless replication stopped."""
        if not self.view.enabled:
            return self._finish(Outcome.STOPPED)
        return self._try_target()

    def _copy(self, target: str, wanted: tuple[int, ...], also_unusable: str | None) -> CopyShare:
        current = present(self._current, "copying without a repair")
        unusable = current.unusable | ({also_unusable} if also_unusable else frozenset())
        return CopyShare(
            present(self._metadata, "copying without metadata"), current.repair, target,
            current.span.bookies, wanted, unusable, current.last_resort,
        )  # fmt: skip

    def _try_target(self) -> list[Effect]:
        current = present(self._current, "choosing a target without a repair")
        repair = current.repair
        if current.tried >= REPAIR_TARGETS_TRIED_MAX:
            return self._fail(
                NotEnoughBookies,
                f"ledger {self.ledger_id}: {REPAIR_TARGETS_TRIED_MAX} targets failed for the "
                f"fragment at {repair.first}",
            )
        current.tried += 1
        try:
            target = self._choose_target(current)
        except NotEnoughBookies as exc:
            if not self._renewable(current):
                return self._fail(NotEnoughBookies, str(exc))
            target = repair.bookie
        if repair.move and not self._improves(current, target):
            return self._fail(
                NotEnoughBookies,
                f"ledger {self.ledger_id}: no bookie on another rack can take the share of "
                f"{repair.bookie} in the fragment at {repair.first}",
            )
        current.target = target
        current.instance = self.view.instance_of(target)  # the instance the copy goes to
        current.swap_attempts = 0
        self._state = _State.COPY
        renewing = repair.bookie if target == repair.bookie else None
        return [self._copy(target, current.wanted, renewing)]

    def _choose_target(self, current: _Current) -> str:
        """A writable bookie outside the fragment, not failed as a target of this repair;
        one the round found missing only when no other is free: the mark may name a
        bookie registered and writable again (back in time, or named for lacking entries
        of another fragment), which may be the only one left in a small cluster."""
        span, bookie = current.span.bookies, current.repair.bookie
        writable, rng, racks = self.view.writable, self.rng, self.view.racks
        quorum = present(self._metadata, "choosing without metadata").write_quorum
        try:
            return choose_target(
                span, bookie, writable, quorum, rng, racks, self._missing | current.excluded
            )
        except NotEnoughBookies:
            return choose_target(span, bookie, writable, quorum, rng, racks, current.excluded)

    def _improves(self, current: _Current, target: str) -> bool:
        """Whether moving the repair's bookie to ``target`` leaves fewer write quorums of
        its fragment short of racks."""
        racks, bookies = self.view.racks, current.span.bookies
        quorum = present(self._metadata, "judging without metadata").write_quorum
        racks_there = rack_count(racks.keys(), racks)
        moved = tuple(target if b == current.repair.bookie else b for b in bookies)
        before = short_quorums(bookies, quorum, racks, racks_there)
        return len(short_quorums(moved, quorum, racks, racks_there)) < len(before)

    def _renewable(self, current: _Current) -> bool:
        """No other bookie is free, and the missing one is a formatted bookie, writable
        again as a new instance, not yet tried: it is given its whole share and recorded
        as that instance, as a replacement by itself (the only repair possible when
        every writable bookie is in the fragment)."""
        bookie = current.repair.bookie
        return (
            current.formatted
            and bookie not in current.excluded
            and bookie in self.view.writable
            and self.view.instance_of(bookie) is not None
        )

    def _on_copied(self, event: Copied | TargetFailed | CopyAborted) -> list[Effect]:
        current = present(self._current, "a copy answered without a repair")
        if isinstance(event, CopyAborted):
            return self._finish(Outcome.STOPPED)
        if isinstance(event, TargetFailed):
            current.excluded |= {present(current.target, "a target failed unchosen")}
            return self._try_target()
        return self._read_to_swap()

    def _read_to_swap(self) -> list[Effect]:
        current = present(self._current, "swapping without a repair")
        if current.swap_attempts >= REPAIR_SWAP_ATTEMPTS_MAX:
            return self._round()
        current.swap_attempts += 1
        if not self.view.enabled:
            return self._finish(Outcome.STOPPED)
        self._state = _State.SWAP_READ
        return [ReadMetadata()]

    def _swap(self, event: MetadataRead) -> list[Effect]:
        """Replace the bookie by CAS on freshly read metadata, while the repair applies;
        the fragment records the target's instance of when the copy began."""
        current = present(self._current, "swapping without a repair")
        repair, target = current.repair, present(current.target, "swapping to no target")
        fresh = event.metadata
        if not still_applies(fresh, repair):
            return self._round()
        renewed = target == repair.bookie
        if not renewed and replace_bookie(fresh, repair.first, repair.bookie, target) is None:
            return self._round()
        after = fresh.replace_bookie(repair.first, repair.bookie, target, current.instance)
        self._state = _State.SWAP
        return [Swap(repair, target, fresh, after, event.version)]

    def _on_swapped(self, event: Swapped | SwapConflict) -> list[Effect]:
        if isinstance(event, SwapConflict):
            return self._read_to_swap()
        current = present(self._current, "swapped without a repair")
        repair, target = current.repair, present(current.target, "swapped to no target")
        renewed = target == repair.bookie
        if renewed:
            self._filled_as[(repair.first, repair.bookie)] = current.instance
        return [
            Repaired(repair, target, len(current.wanted), in_place=renewed),
            *self._next_repair(),
        ]
