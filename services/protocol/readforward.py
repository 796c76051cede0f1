"""Recovery steps 3 and 4: reading forward from the floor (part of LedgerRecoveryOp).

Every entry up to ``floor`` was acknowledged to a client. Entries from
``floor + 1`` are read in bounded windows (``batch_max`` entries asked at
once), each from the FENCED bookies of its write set only: a fenced bookie's
"missing" is final, it will never take the old writer's add afterwards. A
replica whose digest does not verify is never used and is NOT evidence of
absence (the bookie holds some copy): it counts as a read error, retried up to
``attempts_max`` times per bookie. Entries are decided in id order: found ->
the recovery writes it back; missing from ``Qw - Qa + 1`` fenced bookies of
its write set -> it cannot have been acknowledged, the last entry is the one
before; neither, with nobody left to ask -> the recovery fails.

When nothing is found beyond the floor, entry ``floor`` itself is read (the
"probe", from any bookie of its write set) to learn the ledger's length.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from services.protocol import quorum
from services.protocol.messages import EntryRead, ReadEntries, ReadOutcome
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import record_usable
from services.wire.framing import Record


@dataclass(slots=True)
class EntryReads:
    """Answers about one entry: outstanding bookies, who said missing, a good record."""

    asked: set[str]
    missing: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    record: Record | None = None


class ReadForward:
    def __init__(
        self,
        fenced: LedgerMetadata,
        fenced_bookies: Collection[str],
        floor: int,
        *,
        key: bytes,
        batch_max: int,
        attempts_max: int,
    ) -> None:
        self.fenced = fenced  # the metadata as fenced: every read uses it
        self.fenced_bookies = frozenset(fenced_bookies)
        self.floor = floor
        self.last_entry_id: int | None = None  # the last entry, once found
        self.last_record: Record | None = None  # the highest entry found past the floor
        self.probe: EntryReads | None = None
        self._key = key
        self._batch_max = batch_max
        self._attempts_max = attempts_max
        self._reads: dict[int, EntryReads] = {}
        self._cursor = floor + 1  # the lowest entry not decided yet
        self._next_read = floor + 1  # the lowest entry not asked for yet

    @property
    def ledger_id(self) -> int:
        return self.fenced.ledger_id

    def start(self) -> list[ReadEntries]:
        effects: list[ReadEntries] = []
        if self.floor >= 0:
            bookies = self.fenced.write_set_bookies(self.floor)
            self.probe = EntryReads(asked=set(bookies))
            effects += [ReadEntries(self.ledger_id, b, (self.floor,)) for b in bookies]
        return effects + self.fill_window()

    def fill_window(self) -> list[ReadEntries]:
        asks: dict[str, list[int]] = {}
        while self.last_entry_id is None and len(self._reads) < self._batch_max:
            entry_id = self._next_read
            self._next_read += 1
            candidates = self.fenced.write_set_bookies(entry_id)
            fenced = [b for b in candidates if b in self.fenced_bookies]
            self._reads[entry_id] = EntryReads(asked=set(fenced))
            for bookie in fenced:
                asks.setdefault(bookie, []).append(entry_id)
        return [ReadEntries(self.ledger_id, b, tuple(ids)) for b, ids in asks.items()]

    def answer(self, event: EntryRead) -> list[ReadEntries] | None:
        """Record one answer: None when it is not awaited, else the reads to retry (a read
        error, bounded) — usually none."""
        if event.entry_id == self.floor and self.probe is not None:
            reads: EntryReads | None = self.probe
            if self.probe.record is not None:
                return None
        else:
            reads = self._reads.get(event.entry_id)
        if reads is None or event.bookie not in reads.asked:
            return None
        reads.asked.discard(event.bookie)
        if event.outcome is ReadOutcome.MISSING:
            reads.missing.add(event.bookie)
            return []
        if event.outcome is ReadOutcome.FOUND:
            if record_usable(event.record, self.fenced, event.entry_id, self._key):
                if reads.record is None:
                    reads.record = event.record
                return []
            # A replica whose digest does not verify is never used, and it is no evidence
            # of absence either (the bookie does hold some copy): treated as a read error.
        count = reads.errors.get(event.bookie, 0) + 1
        reads.errors[event.bookie] = count
        if count < self._attempts_max:
            reads.asked.add(event.bookie)
            return [ReadEntries(self.ledger_id, event.bookie, (event.entry_id,))]
        return []

    def decide(self) -> tuple[list[Record], str | None]:
        """Decide entries in id order: the records found (to write back), and a reason to
        fail when an entry is neither found nor provably absent."""
        md = self.fenced
        found: list[Record] = []
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
            elif not reads.asked:
                return found, (
                    f"entry {entry_id} is neither found nor provably absent: missing from "
                    f"{sorted(reads.missing)}, errors from {sorted(reads.errors)}; absence needs "
                    f"{quorum.fence_threshold(md.write_quorum, md.ack_quorum)} fenced bookies"
                )
            else:
                break
        return found, None
