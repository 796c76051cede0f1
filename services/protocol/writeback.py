"""Recovery write-backs, and the ensemble changes they may need (part of LedgerRecoveryOp).

Every entry a recovery finds past the floor is written back, with the recovery
flag, to its whole write set, and counts once Qa bookies of that write set
stored it. A bookie that fails write-backs ``attempts_max`` times (each failure
re-sends what it lacks) is out for the rest of the recovery.
When an entry can no longer reach Qa because of failed bookies, the failed
bookies of the last ensemble are replaced, in a new fragment starting at the
first entry not yet written back (every lower one already is), and the entries
from there on are written to the new write sets.

Ordering rule: the new fragments stay LOCAL to the recovery. They are written to
the metadata only in the CAS that closes the ledger, once every entry reached Qa
under them (as BookKeeper does since "Recovery uses immutable metadata"). Writing
them earlier would be unsafe: if this recovery then died, the next one would fence
and read a replacement bookie that lacks the entries, and its "missing" answers
could declare an acknowledged entry absent.

Memory: the records found past the floor are kept until the close (they may have
to be re-sent); there are at most as many as the old writer had in flight. At
most ``in_flight_max`` entries have a write-back outstanding at a time; the others
wait, in entry-id order, and go out as answers come back (``send`` again).

One add request per bookie is outstanding at a time: what becomes ready for a bookie
while its request is out waits and goes in the next request, as one batch. Recovery
finds entries one by one (read forward), and a request per entry and bookie would
queue up on a slow bookie until its requests time out one after the other, each
counted as a failure, so a bookie that is merely slow would be taken out and, with
no spare bookie, the recovery could never finish (simulator seed 35049: E=Qw=Qa=4 on
four bookies, one of them committing one request at a time).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from services.protocol import quorum
from services.protocol.ensemble import plan_ensemble_change
from services.protocol.messages import SendAdds
from services.protocol.metadata import LedgerMetadata
from services.protocol.placement import NO_RACKS, Racks
from services.wire.framing import FramedRecord


@dataclass(slots=True)
class _WriteBack:
    record: FramedRecord  # recovery flag set
    stored_on: set[str] = field(default_factory=set)
    sent_to: set[str] = field(default_factory=set)


class WriteBacks:
    def __init__(
        self, metadata: LedgerMetadata, attempts_max: int = 3, in_flight_max: int = 64
    ) -> None:
        self.metadata = metadata  # the fenced metadata plus this recovery's new fragments
        self.attempts_max = attempts_max
        self.in_flight_max = in_flight_max
        self.failed: set[str] = set()
        self.spread = True  # every ensemble change met the rack policy (placement.py)
        self._failures: dict[str, int] = {}
        self.changes = 0
        self._entries: dict[int, _WriteBack] = {}
        self._busy: set[str] = set()  # bookies with an add request outstanding

    def add(self, record: FramedRecord) -> None:
        self._entries[record.entry_id] = _WriteBack(record._replace(recovery=True))

    def done(self, entry_id: int) -> bool:
        wb = self._entries[entry_id]
        write_set = self.metadata.write_set_bookies(entry_id)
        stored = sum(1 for b in write_set if b in wb.stored_on)
        return quorum.ack_quorum_reached(self.metadata.ack_quorum, stored)

    def pending(self) -> list[int]:
        """The entries not yet on Qa bookies of their write set, in id order."""
        return [e for e in sorted(self._entries) if not self.done(e)]

    def blocked(self) -> bool:
        """Whether some entry cannot reach Qa any more without replacing failed bookies."""
        for entry_id in self.pending():
            wb = self._entries[entry_id]
            write_set = self.metadata.write_set_bookies(entry_id)
            usable = sum(1 for b in write_set if b not in self.failed or b in wb.stored_on)
            if usable < self.metadata.ack_quorum:
                return True
        return False

    @staticmethod
    def _outstanding(wb: _WriteBack) -> bool:
        return not wb.sent_to <= wb.stored_on

    def in_flight(self) -> int:
        """Entries with a write-back sent and not yet answered, and not yet on Qa bookies
        (an entry that reached Qa no longer holds room: a hanging bookie's unanswered
        write-backs must not stop the others)."""
        return sum(
            1
            for entry_id, wb in self._entries.items()
            if self._outstanding(wb) and not self.done(entry_id)
        )

    def send(self) -> list[SendAdds]:
        """Send pending entries, lowest id first, to the bookies of their write set that
        were not sent them and did not fail, keeping at most ``in_flight_max`` entries
        outstanding (an entry already outstanding may always be re-sent to another
        bookie); one ``SendAdds`` per bookie."""
        in_flight = self.in_flight()
        batches: dict[str, list[FramedRecord]] = {}
        for entry_id in self.pending():
            wb = self._entries[entry_id]
            outstanding = self._outstanding(wb)
            if not outstanding and in_flight >= self.in_flight_max:
                continue
            sent = False
            for bookie in self.metadata.write_set_bookies(entry_id):
                if bookie in self.failed or bookie in wb.sent_to or bookie in wb.stored_on:
                    continue
                if bookie in self._busy and bookie not in batches:
                    continue
                wb.sent_to.add(bookie)
                batches.setdefault(bookie, []).append(wb.record)
                sent = True
            if sent and not outstanding:
                in_flight += 1
        self._busy.update(batches)
        return [SendAdds(bookie, tuple(records)) for bookie, records in batches.items()]

    def answered(self, bookie: str) -> None:
        """``bookie`` answered its add request (stored or rejected): it may get the next."""
        self._busy.discard(bookie)

    def stored(self, bookie: str, entry_id: int) -> None:
        wb = self._entries.get(entry_id)
        if wb is not None:
            wb.stored_on.add(bookie)

    def failed_on(self, bookie: str) -> list[SendAdds]:
        """``bookie`` failed a write-back: send it again what it lacks, or, after
        ``attempts_max`` failures, take it out for the rest of the recovery."""
        self._busy.discard(bookie)
        for wb in self._entries.values():
            wb.sent_to.discard(bookie)
        if bookie in self.failed:
            return []
        self._failures[bookie] = self._failures.get(bookie, 0) + 1
        if self._failures[bookie] >= self.attempts_max:
            self.failed.add(bookie)
            return []
        return self.send()

    def change_ensemble(
        self,
        writable: Iterable[str],
        rng: random.Random,
        instances: Mapping[str, str | None] | None = None,
        racks: Racks = NO_RACKS,
    ) -> None:
        """Replace the failed bookies of the last ensemble from the first pending entry on
        (``NotEnoughBookies`` when there are not enough writable bookies); the new
        fragment records the replacements' registered ``instances``, and spreads over
        ``racks`` when it can (else ``spread`` turns false)."""
        first = self.pending()[0]
        self.metadata, spread = plan_ensemble_change(
            self.metadata, self.failed, writable, first - 1, rng, instances, racks
        )
        self.spread = self.spread and spread
        self.changes += 1

    def merged_into(self, fresh: LedgerMetadata, fenced: LedgerMetadata) -> LedgerMetadata | None:
        """``fresh`` (the znode now) with this recovery's new fragments, or None when the
        fragment that was fenced is no longer the last one of ``fresh``. Earlier
        fragments are taken from ``fresh`` (a replicator may have changed them)."""
        count = len(fenced.fragments)
        if len(fresh.fragments) != count or fresh.last_fragment != fenced.last_fragment:
            return None
        ours = self.metadata.fragments[count - 1 :]
        return replace(fresh, fragments=(*fresh.fragments[:-1], *ours))
