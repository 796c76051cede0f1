"""Recovery steps 3 and 4: reading forward from the floor (part of LedgerRecoveryOp).

Every entry up to ``floor`` was acknowledged to a client. Entries from
``floor + 1`` are read in bounded windows (``batch_max`` entries undecided at
once), each from the FENCED bookies of its write set only: a fenced bookie's
"missing" is final, it will never take the old writer's add afterwards.

Fenced means: the same bookie INSTANCE that answered this recovery's fence. A
bookie that lost its state (reformatted: a new instance under its cookie) and
came back is a new, unfenced bookie; its answers are UNKNOWN, never "missing",
and it is asked nothing more in this recovery (docs/protocol.md, invariants). A
bookie that answers the fence late (after fencing was complete) joins then.

Across runs the same holds for a "replaced" bookie (``fencing.FenceAnswers``): it
answered the fence under another instance than the last fragment recorded for it,
so it lost what was written to it before (reformatted before this fence or between
two recovery attempts). It is fenced and asked (what it holds now is real: a
record whose digest verifies is the entry, whoever holds it), after the others,
but its "missing" is no evidence of absence. An entry that then cannot be proven
absent waits for the fences still awaited and otherwise fails the recovery
(retriable): liveness is lost, never an acknowledged entry.

Speculative reads, as the read path does (BookKeeper's sequential recovery
read). An entry is first asked from as few fenced bookies of its write set as
could prove it absent, ``Qw - Qa + 1`` (the first with the entry decides it);
asks are batched: one ``ReadEntries`` per bookie per step, which the runner
carries out as one range read. More are asked only when needed: after a
"missing" from a bookie that no longer counts, after a read error (the same
bookie is retried up to ``attempts_max`` times), or when a bookie asked has not
answered within ``speculative_ms``. A bookie that missed that deadline is "slow" and asked last
from then on, so a hanging bookie costs one speculative delay, not a client
time-out per entry. A replica whose digest does not verify is never used and is
NOT evidence of absence (the bookie holds some copy): a read error.

Entries are decided in id order: found -> the recovery writes it back; missing
from ``Qw - Qa + 1`` fenced bookies of its write set -> it cannot have been
acknowledged, the last entry is the one before; neither, with nobody left to
ask -> the recovery fails.

When nothing is found beyond the floor, the ledger's length at ``floor`` comes
from the fence answers (a bookie's length at its LAC or at its last entry); only
when none gave it is entry ``floor`` itself read (the "probe", from any bookie
of its write set).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from services.errors import present
from services.protocol import quorum
from services.protocol.fencing import FenceLengths
from services.protocol.messages import EntryRead, ReadEntries, ReadOutcome
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import record_usable
from services.wire.framing import FramedRecord


@dataclass(slots=True)
class EntryReads:
    """Answers about one entry: outstanding asks (bookie -> when asked), who said
    missing, read errors per bookie, the bookies tried, a good record."""

    asked: dict[str, int] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    tried: set[str] = field(default_factory=set)
    record: FramedRecord | None = None


class ReadForward:
    def __init__(
        self,
        fenced: LedgerMetadata,
        fenced_bookies: Mapping[str, str | None],
        floor: int,
        *,
        key: bytes,
        batch_max: int,
        attempts_max: int,
        speculative_ms: int = 2_000,
        lengths: FenceLengths | None = None,
        now: int = 0,
        replaced: Collection[str] = (),
    ) -> None:
        self.fenced = fenced  # the metadata as fenced: every read uses it
        # bookie -> the instance that answered its fence; only these answers count.
        self.fenced_bookies: dict[str, str | None] = dict(fenced_bookies)
        # Fenced under another instance than the fragment recorded: "missing" from
        # them is no evidence (see the module docstring).
        self.replaced: set[str] = set(replaced)
        self.lost: set[str] = set()  # answered under another instance than its fence
        self.slow: set[str] = set()  # missed a speculative deadline: asked last
        self._silent_since: dict[str, int] = {}  # bookie -> its oldest unanswered ask
        # Bookies whose fence is still unanswered: an entry that could be decided once
        # one of them is fenced does not fail the recovery while it waits.
        self.fences_awaited: set[str] = set()
        self.floor = floor
        self.last_entry_id: int | None = None  # the last entry, once found
        self.last_record: FramedRecord | None = None  # the highest entry found past the floor
        self.probe: EntryReads | None = None
        self.lengths = lengths or FenceLengths()
        self._want_probe = self.lengths.get(floor) is None
        self._key = key
        self._batch_max = batch_max
        self._attempts_max = attempts_max
        self._speculative_ms = speculative_ms
        self.now = now
        self._reads: dict[int, EntryReads] = {}
        self._cursor = floor + 1  # the lowest entry not decided yet
        self._next_read = floor + 1  # the lowest entry not asked for yet

    @property
    def ledger_id(self) -> int:
        return self.fenced.ledger_id

    def start(self) -> list[ReadEntries]:
        effects: list[ReadEntries] = []
        if self._want_probe:
            bookies = self.fenced.write_set_bookies(self.floor)
            self.probe = EntryReads(asked={b: self.now for b in bookies})
            effects += [ReadEntries(self.ledger_id, b, (self.floor,)) for b in bookies]
        return effects + self.fill_window()

    # ------------------------------------------------------------------ asking

    def _candidates(self, entry_id: int, reads: EntryReads) -> list[str]:
        """Fenced bookies of the entry's write set not tried yet, replaced instances and
        slow ones last."""
        bookies = [
            b
            for b in self.fenced.write_set_bookies(entry_id)
            if b in self.fenced_bookies and b not in reads.tried and b not in reads.asked
        ]
        # stable: write-set order
        return sorted(bookies, key=lambda b: (b in self.replaced, b in self.slow))

    def _live_asks(self, reads: EntryReads) -> int:
        return sum(1 for at in reads.asked.values() if at + self._speculative_ms > self.now)

    def _wanted(self, reads: EntryReads) -> int:
        """How many asks must be outstanding (not yet speculative) for the entry: enough
        to prove it absent, ``Qw - Qa + 1`` less the "missing" answers counted."""
        md = self.fenced
        return max(1, quorum.fence_threshold(md.write_quorum, md.ack_quorum) - len(reads.missing))

    def _pump(self) -> list[ReadEntries]:
        """Ask more bookies for every undecided entry that needs it (batched by bookie)."""
        asks: dict[str, list[int]] = {}
        for entry_id in sorted(self._reads):
            reads = self._reads[entry_id]
            if reads.record is not None:
                continue
            short = self._wanted(reads) - self._live_asks(reads)
            for bookie in self._candidates(entry_id, reads)[: max(0, short)]:
                reads.asked[bookie] = self.now
                reads.tried.add(bookie)
                self._silent_since.setdefault(bookie, self.now)
                asks.setdefault(bookie, []).append(entry_id)
        return [ReadEntries(self.ledger_id, b, tuple(ids)) for b, ids in asks.items()]

    def fill_window(self) -> list[ReadEntries]:
        """Ask what the undecided entries need; once the window is half decided, top it
        up to ``batch_max`` entries (so a bookie gets a few ids per request, not one)."""
        if len(self._reads) > self._batch_max // 2:
            return self._pump()
        while self.last_entry_id is None and len(self._reads) < self._batch_max:
            self._reads[self._next_read] = EntryReads()
            self._next_read += 1
        return self._pump()

    def add_fenced(
        self, bookie: str, instance_id: str | None, *, replaced: bool = False
    ) -> list[ReadEntries]:
        """A bookie answered the fence after fencing was complete: it counts from now on
        (``replaced``: as a replaced instance, whose "missing" never counts)."""
        self.fences_awaited.discard(bookie)
        if bookie in self.lost or bookie in self.fenced_bookies:
            return []
        self.fenced_bookies[bookie] = instance_id
        if replaced:
            self.replaced.add(bookie)
        return self._pump()

    def next_deadline(self) -> int | None:
        """When an outstanding ask turns speculative (the next bookie is asked)."""
        asks = [at for r in self._reads.values() if r.record is None for at in r.asked.values()]
        asks += [at for b, at in self._silent_since.items() if b not in self.slow]
        times = [at + self._speculative_ms for at in asks if at + self._speculative_ms > self.now]
        return min(times) if times else None

    def tick(self, now: int) -> list[ReadEntries]:
        """Time passed: bookies that missed the speculative deadline are slow, and the
        entries waiting on them are asked from the next bookies."""
        self.now = max(self.now, now)
        for bookie, at in self._silent_since.items():
            if at + self._speculative_ms <= self.now:
                self.slow.add(bookie)  # silent since, whether its entries were decided or not
        return self._pump()

    # ------------------------------------------------------------------ answers

    def answer(self, event: EntryRead) -> list[ReadEntries] | None:
        """Record one answer: None when it is not awaited, else the retry of a read error
        (bounded), usually none. The caller decides, then ``fill_window`` asks the next
        bookies the undecided entries need."""
        if event.now is not None:
            self.now = max(self.now, event.now)
        self._silent_since.pop(event.bookie, None)  # its request ended
        if event.outcome is not ReadOutcome.ERROR:
            self.slow.discard(event.bookie)  # it answers again (a time-out is no answer)
        if event.entry_id == self.floor and self.probe is not None:
            return self._probe_answer(event)
        reads = self._reads.get(event.entry_id)
        if reads is None or event.bookie not in reads.asked:
            return None
        del reads.asked[event.bookie]
        usable = event.outcome is ReadOutcome.FOUND and record_usable(
            event.record, self.fenced, event.entry_id, self._key
        )
        if usable:
            # A valid record is the entry, whoever holds it.
            if reads.record is None:
                reads.record = event.record
            return []
        if not self._same_instance(event):
            # Lost its state since the fence (or never fenced): unknown, never missing.
            self._lose(event.bookie)
            return []
        if event.outcome is ReadOutcome.MISSING:
            if event.bookie not in self.replaced:
                reads.missing.add(event.bookie)
            # else: it lost what was written before its fence; the next bookie is asked
            return []
        # An error, or a replica whose digest does not verify: never used, and no
        # evidence of absence either (the bookie does hold some copy).
        count = reads.errors.get(event.bookie, 0) + 1
        reads.errors[event.bookie] = count
        if count < self._attempts_max:
            reads.asked[event.bookie] = self.now
            self._silent_since.setdefault(event.bookie, self.now)
            return [ReadEntries(self.ledger_id, event.bookie, (event.entry_id,))]
        return []

    def _probe_answer(self, event: EntryRead) -> list[ReadEntries] | None:
        probe = self.probe
        if probe is None or probe.record is not None or event.bookie not in probe.asked:
            return None
        del probe.asked[event.bookie]
        if event.outcome is ReadOutcome.FOUND and record_usable(
            event.record, self.fenced, event.entry_id, self._key
        ):
            probe.record = event.record
        return []

    def _same_instance(self, event: EntryRead) -> bool:
        """Whether the answer is from the instance that answered the fence. An error
        that did not reach the bookie (a time-out) names no instance: it is just an
        error; a "missing" must name the fenced instance to count."""
        if event.bookie not in self.fenced_bookies:
            return False
        if event.outcome is not ReadOutcome.MISSING and event.instance_id is None:
            return True
        return self.fenced_bookies[event.bookie] == event.instance_id

    def _lose(self, bookie: str) -> None:
        self.lost.add(bookie)
        self.fenced_bookies.pop(bookie, None)
        for reads in self._reads.values():
            reads.asked.pop(bookie, None)
            reads.missing.discard(bookie)  # its earlier "missing" no longer counts either

    # ------------------------------------------------------------------ deciding

    def decide(self) -> tuple[list[FramedRecord], str | None]:
        """Decide entries in id order: the records found (to write back), and a reason to
        fail when an entry is neither found nor provably absent."""
        md = self.fenced
        found: list[FramedRecord] = []
        while self.last_entry_id is None and self._cursor in self._reads:
            entry_id = self._cursor
            reads = self._reads[entry_id]
            if reads.record is not None:
                del self._reads[entry_id]
                found.append(reads.record)
                self.last_record = reads.record
                self._cursor += 1
            elif quorum.entry_absent(md.write_quorum, md.ack_quorum, len(reads.missing)):
                self.last_entry_id = entry_id - 1
                self._reads.clear()
            elif (
                not reads.asked
                and not self._candidates(entry_id, reads)
                and not self.fences_awaited.intersection(md.write_set_bookies(entry_id))
            ):
                return found, (
                    f"entry {entry_id} is neither found nor provably absent: missing from "
                    f"{sorted(reads.missing)}, errors from {sorted(reads.errors)}, unknown "
                    f"from {sorted(self.lost)} (lost their state since the fence) and "
                    f"{sorted(self.replaced)} (a new instance since the fragment was "
                    f"written); absence needs "
                    f"{quorum.fence_threshold(md.write_quorum, md.ack_quorum)} fenced "
                    "bookies that knew the entry; it can be run again"
                )
            else:
                break
        return found, None

    def end_length(self) -> tuple[int | None, str | None]:
        """Once the last entry is known: the ledger's length there, ``(length, None)``;
        ``(None, None)`` while the floor entry is still being read for it; ``(None,
        reason)`` when it cannot be learned."""
        last = present(self.last_entry_id, "no last entry yet")
        if last > self.floor:
            return present(self.last_record, "no record of the last entry").length, None
        known = self.lengths.get(last)
        if known is not None:
            return known, None
        probe = self.probe
        if probe is not None and probe.record is not None:
            return probe.record.length, None
        if probe is not None and probe.asked:
            return None, None
        return None, (
            f"cannot read entry {last} (the last one) from any bookie of its write set "
            "to learn the ledger's length"
        )
