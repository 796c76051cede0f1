"""The invariants of docs/protocol.md, checked while the simulation runs.

- Persistence: an entry acknowledged to a client is on Qa bookies of its write
  quorum when it is acknowledged; once the ledger is CLOSED every acknowledged
  entry is <= its last entry, every entry up to the last one is on Qa bookies
  with its exact bytes, and the length is exact; at the end every entry reads
  back byte-exact.
- Agreement: an entry id has one payload everywhere (every replica any bookie
  stores, every entry a reader returns); readers never read past the LAC or the
  last entry (their own, and the writer's LAC or the closed ledger's last entry
  at the time); every reader's sequence is a prefix of the final ledger, the
  final read-back through ``ReadOp`` returns all of it, and concurrent
  recoveries end on the same metadata.
- Fencing: once a recovery's fence step completed, the old writer acknowledges
  no entry that was not already on a bookie that recovery fenced, or in an
  earlier fragment on Qa bookies (so the recovery keeps every entry the writer
  will ever acknowledge). Acknowledgements already in flight are fine; a new
  entry reaching an ack quorum is not.
- Single writer: after another party closed the ledger the writer
  acknowledges nothing beyond its last entry, and a writer told ledger_fenced
  acknowledges nothing more; a closed ledger changes only by a bookie swap inside
  a fragment (the replicator: same state, last entry, length and fragment starts,
  and every entry still on Qa bookies of its write set); the writer's ensemble
  changes never move an acknowledged entry (a recovery's may, as it re-replicates
  them, and the close check above covers that). The writer is told
  ledger_fenced only when the ledger is no longer OPEN or some bookie fenced it.
- No silent overwrite: a bookie never replaces a stored entry with other bytes
  (docs/api.md "Bookie").
- Re-replication (issue 8): once a ledger's mark is cleared, no settled fragment
  names a bookie the mark named, or one lost for good longer than the lost-bookie
  delay ago, that lacks an entry of its share; a worker's swap puts in a bookie
  holding the whole share, and never repairs around a bookie that is whole and was
  never gone for the delay; after healing every mark is cleared and every settled
  fragment whole (shares computed from the metadata's write sets, not by the core).

A wiped bookie (``quire bookie format``, back as a new instance) loses every copy it
held, as a disk lost for good does: the persistence counts at acknowledgement and at
close still count those copies (they were durable when the bookie acknowledged them;
the plan wipes at most one bookie and only where Qa >= 2, so a copy survives, and the
final read-back checks it). The fencing check skips the entries that lost a copy in a
wipe (``wiped_copies``): it relies on a fenced bookie of the write set holding every
entry that reached its ack quorum, and a fence of the new instance keeps nothing the
old one stored; for those entries the recovery must wait for a bookie that holds them
(the new instance's "missing" proves nothing), which the checks of the closed end
cover. A worker's swap may put in a bookie wiped since its copy (as one lost since):
the auditor then finds the replicas missing.

A bookie started without journal sync may lose its last unsynced adds in a crash
(the operator's choice, docs/protocol.md): from the first entry such a loss touched
on, persistence is not promised (``lossy_from``), and the fencing check skips the
entries that lost a copy; agreement, and fencing for every other entry, still hold.

Checks run in callbacks (acks, stores, reads, metadata writes) and after every
scheduler step (``after_step``); a violation raises ``Violation``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from services.errors import LedgerFenced
from services.protocol.messages import (
    AckAdds,
    CloseDone,
    CloseFailed,
    FailAdds,
    RecoveryDone,
    SendAdds,
)
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import readable_end
from services.protocol.recovery import LedgerRecovery
from services.protocol.replication import Repair
from services.wire.framing import FramedRecord

if TYPE_CHECKING:
    from tests.simulation.readers import FinalReader
    from tests.simulation.scenario import LedgerSim


# Found by this simulator (seeds 102, 159, 193, 511, 1067, 1115, 1290 before the fix): the
# writer sealed an entry again on every re-send, with the LAC of the moment, so a bookie
# holding the entry refused the new bytes (entry_exists), which was read as a fence (the
# writer failed its adds with ledger_fenced and closed), and replicas of one entry could
# differ so that no recovery could write back (IN_RECOVERY for ever). Fixed: entries are
# sealed once (services/protocol/adds.py) and entry_exists is not a fence. Both checks
# stay on: a writer told ledger_fenced while the ledger is OPEN and no bookie fenced it
# is a violation, and so is a ledger no recovery can close once everything healed.
STRICT_FENCED_ERRORS = True
# How long after a bookie's lost-bookie delay the auditor's mark may take to land.
MARK_LATENCY_MS = 100
CHECK_RECOVERY_WITH_DIVERGENT_REPLICAS = True


class Violation(AssertionError):
    """An invariant of docs/protocol.md does not hold."""


class Checker:
    def __init__(self, sim: LedgerSim, ack_quorum: int) -> None:
        self.sim = sim
        self.ack_quorum = ack_quorum
        self.written: dict[int, bytes] = {}  # the one payload of each entry id
        self.copies: dict[int, set[str]] = {}  # bookies holding a good copy
        self.wiped: dict[str, set[int]] = {}  # bookie -> the entries a wipe took from it
        self.wiped_copies: set[int] = set()  # the entries a wipe took a copy of
        self.acked: dict[int, bytes] = {}
        self.last_acked = -1
        self.writer_fenced = False
        self.closed: LedgerMetadata | None = None
        self.closed_by_writer = False
        self.recovery_results: dict[str, LedgerMetadata] = {}
        self._metadata = sim.cell.metadata
        self._version = sim.cell.version
        self._fence_snapshots: list[tuple[LedgerRecovery, set[int]]] = []
        self.lossy_from: int | None = None  # the lowest entry a crash lost a copy of
        self.lost_copies: set[int] = set()  # the entries a crash lost a copy of
        self._stored: dict[tuple[str, int], FramedRecord] = {}
        self._watch: list[LedgerRecovery] = []  # recoveries not yet fenced
        self._watched = 0  # how many of the ledger's recoveries are (or were) watched
        self.found_lacking: set[str] = set()  # bookies an audit found lacking entries

    def fail(self, message: str) -> None:
        raise Violation(f"t={self.sim.scheduler.now}ms, ledger {self.sim.ledger_id}: {message}")

    # ------------------------------------------------------------------ data path

    def on_send(self, gateway: str, effect: SendAdds) -> None:
        for record in effect.records:
            known = self.written.setdefault(record.entry_id, record.payload)
            if known != record.payload:
                self.fail(f"agreement: {gateway} sends entry {record.entry_id} with other bytes")

    def on_store(self, bookie: str, record: FramedRecord) -> None:
        known = self.written.get(record.entry_id)
        if known is None or known != record.payload:
            self.fail(f"agreement: {bookie} stores entry {record.entry_id} with a foreign payload")
        before = self._stored.get((bookie, record.entry_id))
        if before is not None and (before.lac, before.digest) != (record.lac, record.digest):
            self.fail(f"no silent overwrite: {bookie} replaced entry {record.entry_id}")
        self._stored[(bookie, record.entry_id)] = record
        self.copies.setdefault(record.entry_id, set()).add(bookie)

    def on_lose(self, bookie: str, entry_id: int) -> None:
        """A bookie without journal sync lost an unsynced copy in a crash."""
        self._stored.pop((bookie, entry_id), None)
        self.copies.get(entry_id, set()).discard(bookie)
        self.lost_copies.add(entry_id)
        if self.lossy_from is None or entry_id < self.lossy_from:
            self.lossy_from = entry_id

    def on_wipe(self, bookie: str, entry_ids: list[int]) -> None:
        """``bookie`` was wiped: it holds none of ``entry_ids`` any more (see the module
        docstring for what still counts them)."""
        self.wiped.setdefault(bookie, set()).update(entry_ids)
        self.wiped_copies.update(entry_ids)
        for entry_id in entry_ids:
            self._stored.pop((bookie, entry_id), None)

    def divergent_replicas(self) -> list[int]:
        """Entries whose replicas on two bookies differ in their bytes (LAC field, digest)."""
        seen: dict[int, tuple[int, bytes]] = {}
        out: set[int] = set()
        for (_, entry_id), record in self._stored.items():
            key = (record.lac, record.digest)
            if seen.setdefault(entry_id, key) != key:
                out.add(entry_id)
        return sorted(out)

    def promised(self, entry_id: int) -> bool:
        """Whether persistence is promised for the entry (no unsynced loss at or below it)."""
        return self.lossy_from is None or entry_id < self.lossy_from

    def _copies_in_write_set(self, md: LedgerMetadata, entry_id: int) -> int:
        holders = self.copies.get(entry_id, set())
        return sum(1 for b in md.write_set_bookies(entry_id) if b in holders)

    def on_ack(self, ack: AckAdds, payloads: tuple[bytes, ...]) -> None:
        first, last = ack.first_entry_id, ack.last_entry_id
        if first != self.last_acked + 1 or last - first + 1 != len(payloads):
            self.fail(f"acks out of order: {first}..{last} after {self.last_acked}")
        if ack.lac < last:
            self.fail(f"ack of {first}..{last} reports LAC {ack.lac}")
        if self.writer_fenced:
            self.fail(f"single writer: a fenced writer acknowledged {first}..{last}")
        md = self.sim.cell.metadata
        for entry_id, payload in zip(range(first, last + 1), payloads, strict=True):
            if self.written.get(entry_id) != payload:
                self.fail(f"entry {entry_id} acknowledged with bytes the client did not send")
            copies = self._copies_in_write_set(md, entry_id)
            if copies < self.ack_quorum and self.promised(entry_id):
                self.fail(
                    f"persistence: entry {entry_id} acknowledged with {copies} copies in its "
                    f"write quorum {md.write_set_bookies(entry_id)}, Qa={self.ack_quorum}"
                )
            if self.closed is not None and not self.closed_by_writer:
                if entry_id > self.closed.last_entry_id and self.promised(entry_id):
                    self.fail(
                        f"single writer: entry {entry_id} acknowledged after the ledger was "
                        f"closed by a recovery at {self.closed.last_entry_id}"
                    )
            lost_a_copy = entry_id in self.lost_copies or entry_id in self.wiped_copies
            for recovery, visible in self._fence_snapshots:
                if entry_id not in visible and not lost_a_copy:
                    self.fail(
                        f"fencing: entry {entry_id} acknowledged after a recovery fenced "
                        f"{sorted(recovery.fenced_at_completion)}, none of which held it then"
                    )
            self.acked[entry_id] = payload
        self.last_acked = last

    def on_add_failed(self, effect: FailAdds) -> None:
        if effect.error is LedgerFenced:
            self.writer_fenced = True
            sim = self.sim
            fenced = any(b.fenced(sim.ledger_id) for b in sim.bookie_list)
            if STRICT_FENCED_ERRORS and sim.cell.metadata.state is LedgerState.OPEN and not fenced:
                self.fail(
                    "the writer was told ledger_fenced, but the ledger is OPEN and no bookie "
                    "fenced it"
                )

    def on_close_result(self, effect: CloseDone | CloseFailed) -> None:
        if isinstance(effect, CloseDone):
            # The LAC is per entry: a batch may be acknowledged entry by entry and then
            # fail as a whole (time-out); entries up to the LAC are in the ledger.
            lac = self.sim.handle.lac
            if effect.metadata.last_entry_id != lac or lac < self.last_acked:
                self.fail(
                    f"writer close at {effect.metadata.last_entry_id}, but its LAC is {lac} "
                    f"and the last entry acknowledged is {self.last_acked}"
                )
            if _end(self.sim.cell.metadata) != _end(effect.metadata):
                self.fail("writer close answered metadata that is not the stored one")

    def on_read(
        self, reader: str, entry_id: int, payload: bytes, md: LedgerMetadata, lac: int
    ) -> None:
        if entry_id > readable_end(md, lac):
            self.fail(f"{reader} read entry {entry_id} past its readable end")
        closed_at = self.closed.last_entry_id if self.closed is not None else None
        committed = max(self.sim.handle.lac, closed_at if closed_at is not None else -1)
        if entry_id > committed:
            self.fail(
                f"{reader} read entry {entry_id} past the writer's LAC {self.sim.handle.lac} "
                f"and any closed end ({closed_at})"
            )
        if self.written.get(entry_id) != payload:
            self.fail(f"agreement: {reader} read entry {entry_id} with other bytes")

    def on_recovery_done(self, name: str, done: RecoveryDone) -> None:
        if done.metadata.state is not LedgerState.CLOSED:
            self.fail(f"{name} finished on a ledger that is not CLOSED")
        for other, md in self.recovery_results.items():
            if _end(md) != _end(done.metadata):
                self.fail(
                    f"recoveries disagree: {other} ended at {md.last_entry_id}, {name} at "
                    f"{done.metadata.last_entry_id}"
                )
        self.recovery_results[name] = done.metadata

    # ------------------------------------------------------------------ metadata, steps

    def after_metadata_write(self, gateway: str) -> None:
        cell = self.sim.cell
        if cell.version == self._version:
            return
        md = cell.metadata
        prev, self._metadata, self._version = self._metadata, md, cell.version
        if self.closed is not None:
            if not _is_swap(self.closed, md):
                self.fail(f"single writer: {gateway} changed the CLOSED ledger")
            self.closed = md
            self._check_closed(md)
            return
        lac = max(self.last_acked, self.sim.handle.lac)
        kept = [f for f in prev.fragments if f.first_entry_id <= lac]
        moved = len(md.fragments) > len(kept) and md.fragments[len(kept)].first_entry_id <= lac
        if gateway == "writer" and (list(md.fragments[: len(kept)]) != kept or moved):
            self.fail(f"{gateway}'s ensemble change moved acknowledged entries: {md.fragments}")
        if md.state is LedgerState.CLOSED:
            self.closed = md
            self.closed_by_writer = gateway == "writer"
            self._check_closed(md)

    def _check_closed(self, md: LedgerMetadata) -> None:
        last = md.last_entry_id if md.last_entry_id is not None else -1
        lac = max(self.last_acked, self.sim.handle.lac)
        if lac > last and self.promised(last + 1):
            self.fail(f"persistence: closed at {last} but entry {lac} was acknowledged")
        for entry_id in range(last + 1):
            if entry_id not in self.written:
                self.fail(f"closed at {last} but entry {entry_id} was never written")
            copies = self._copies_in_write_set(md, entry_id)
            if copies < self.ack_quorum and self.promised(entry_id):
                self.fail(f"closed at {last} but entry {entry_id} has only {copies} copies")
        length = sum(len(self.written[e]) for e in range(last + 1))
        if md.length != length:
            self.fail(f"closed with length {md.length}, the entries add up to {length}")

    def after_step(self) -> None:
        closed = self.closed
        if (
            closed is not None
            and self.sim.handle.lac > closed.last_entry_id
            and self.promised(closed.last_entry_id + 1)
        ):
            self.fail(
                f"persistence: the writer's LAC {self.sim.handle.lac} passed the last entry "
                f"{closed.last_entry_id} of the closed ledger"
            )
        recoveries = self.sim.recoveries
        if len(recoveries) > self._watched:
            self._watch += recoveries[self._watched :]
            self._watched = len(recoveries)
        if not self._watch:
            return
        for recovery in self._watch:
            if recovery.fence_complete:
                self._fence_snapshots.append((recovery, self._visible_to(recovery)))
        self._watch = [r for r in self._watch if not r.fence_complete and not r.finished]

    def _visible_to(self, recovery: LedgerRecovery) -> set[int]:
        """Entries the recovery is bound to keep, as of its fence completing: those held by
        a bookie it fenced, and those of earlier fragments already on Qa bookies (every
        entry below the last fragment is in the ledger by construction: the writer starts
        a fragment after its LAC). A batch may be acknowledged after the fence although
        its first entries were replicated, and counted in the LAC, long before."""
        md, fenced = recovery.metadata, recovery.fenced_at_completion
        first = md.last_fragment.first_entry_id
        visible = set()
        for entry_id, holders in self.copies.items():
            write_set = md.write_set_bookies(entry_id)
            if any(b in fenced and b in holders for b in write_set):
                visible.add(entry_id)
            elif entry_id < first and self._copies_in_write_set(md, entry_id) >= self.ack_quorum:
                visible.add(entry_id)
        return visible

    # ------------------------------------------------------------------ re-replication

    def _lacking(self, bookie: str, share: set[int], lost_empty: bool = True) -> list[int]:
        """The entries of ``share`` that ``bookie`` does not store (a bookie lost for good
        stores nothing, unless not ``lost_empty``), but for copies a crash lost."""
        world, lid = self.sim.world, self.sim.ledger_id
        st = None if lost_empty and bookie in world.lost else world.bookies[bookie].ledgers.get(lid)
        held = st.entries if st is not None else {}
        return sorted(e for e in share if e not in held and e not in self.lost_copies)

    def on_mark_cleared(self, missing: frozenset[str], who: str) -> None:
        """Once a ledger's mark is cleared, no settled fragment (all of a CLOSED ledger,
        the non-last ones of another) names a bookie the mark named, or one lost for good
        for longer than the lost-bookie delay (and the auditor's marking), that lacks an
        entry of its share."""
        world, now = self.sim.world, self.sim.scheduler.now
        horizon = now - world.config.autorecovery.lost_bookie_delay_ms - MARK_LATENCY_MS
        for bookie, share in settled_shares(self.sim.cell.metadata).items():
            lost = bookie in world.lost
            if lost and world.lost_at[bookie] > horizon or not lost and bookie not in missing:
                continue
            lacking = self._lacking(bookie, share)
            if lacking:
                self.fail(
                    f"re-replication: {who} cleared the mark {sorted(missing)} but a fragment "
                    f"names {bookie}{' (lost)' if lost else ''}, which lacks entries {lacking}"
                )

    def on_swap(self, before: LedgerMetadata, repair: Repair, new: str, who: str) -> None:
        """A worker swapped ``repair.bookie`` for ``new``: ``new`` holds the whole share,
        and the old bookie was not repaired around while whole and never gone for the
        lost-bookie delay (a bookie back in time causes nothing)."""
        world = self.sim.world
        if repair.last is None:
            self.fail(f"re-replication: {who} swapped a bookie of an open fragment: {repair}")
        share = settled_shares(before).get(repair.bookie, set())
        share = {e for e in share if before.fragment_for(e).first_entry_id == repair.first}
        # It may be lost, or wiped, since the copy (a disk lost after the copy: the auditor
        # finds the replicas missing and has them copied again). One lost for good is judged
        # by what it held when it was lost: without journal sync its loss takes the copies
        # it had acknowledged but not yet synced, as a loss just after the swap would.
        lacking = set(self._lacking(new, share, lost_empty=False)) - self.wiped.get(new, set())
        if new in world.lost:
            lacking = {e for e in lacking if (new, e) not in self._stored}
        if lacking:
            gone = " (lost since)" if new in world.lost else ""
            self.fail(f"re-replication: {who} swapped in {new}{gone} without the share of {repair}")
        old, delay = repair.bookie, world.config.autorecovery.lost_bookie_delay_ms
        if new == old:
            return  # a formatted bookie given its share again: nothing repaired around
        st = world.bookies[old].ledgers.get(self.sim.ledger_id)
        whole = old not in world.lost and st is not None and share <= set(st.entries)
        if whole and not world.was_gone(old, delay) and old not in self.found_lacking:
            self.fail(f"re-replication: {who} repaired around {old}, whole and never gone")

    def final_replication(self) -> None:
        """After healing and settling: no mark left, and no settled fragment names a bookie
        lacking an entry of its share (liveness; not promised for a ledger that lost
        unsynced copies, which may exist nowhere)."""
        if self.lossy_from is not None or self.sim.cell.metadata.state is not LedgerState.CLOSED:
            return
        world = self.sim.world
        if world.marks.get(self.sim.ledger_id) is not None:
            self.fail(f"liveness: still marked {world.marks.get(self.sim.ledger_id)}")
        lock = world.marks.lock(self.sim.ledger_id)
        if lock is not None:  # every repair lock is released in the end
            self.fail(f"liveness: its repair lock is still held {lock}")
        for bookie, share in settled_shares(self.sim.cell.metadata).items():
            lacking = self._lacking(bookie, share)
            if lacking:
                self.fail(f"liveness: a fragment names {bookie}, which lacks entries {lacking}")

    # ------------------------------------------------------------------ the end

    def final(
        self,
        entries: list[bytes | None],
        readers: dict[str, list[bytes]],
        final_reader: FinalReader | None = None,
    ) -> None:
        md = self.sim.cell.metadata
        if md.state is not LedgerState.CLOSED:
            if self.lossy_from is not None:
                return  # unsynced losses may leave nothing to recover from (docs/protocol.md)
            if not CHECK_RECOVERY_WITH_DIVERGENT_REPLICAS and self.divergent_replicas():
                self.sim.world.stats["known bug: recovery blocked by divergent replicas"] += 1
                return
            self.fail("liveness: the ledger is not CLOSED after healing and recovering")
        last = md.last_entry_id if md.last_entry_id is not None else -1
        if len(entries) != last + 1:
            self.fail("final read did not cover the ledger")
        for entry_id, payload in enumerate(entries):
            if payload is None:
                if self.promised(entry_id):
                    self.fail(f"persistence: entry {entry_id} <= last {last} cannot be read back")
            elif payload != self.written.get(entry_id):
                self.fail(f"agreement: entry {entry_id} reads back with other bytes")
        for entry_id, payload in self.acked.items():
            if not self.promised(entry_id):
                continue
            if entry_id > last or entries[entry_id] != payload:
                self.fail(f"persistence: acknowledged entry {entry_id} lost or changed")
        if final_reader is not None:
            if final_reader.failure is not None and self.lossy_from is None:
                self.fail(f"persistence: the final ReadOp failed: {final_reader.failure.message}")
            got = final_reader.entries
            if any(p != self.written.get(e) for e, p in enumerate(got)):
                self.fail("agreement: the final ReadOp read back other bytes than written")
            if self.lossy_from is None and got != entries:
                self.fail("agreement: the final ReadOp read back other entries than stored")
        for name, seq in readers.items():
            if self.lossy_from is not None:
                seq = seq[: min(self.lossy_from, last + 1)]
            if seq != entries[: len(seq)]:
                self.fail(f"agreement: {name} saw a sequence that is not a prefix of the ledger")
        for name, result in self.recovery_results.items():
            if _end(result) != _end(md):
                self.fail(f"{name} reported metadata other than the final one")


def settled_shares(md: LedgerMetadata) -> dict[str, set[int]]:
    """Every bookie's share of the settled fragments (all of a CLOSED ledger, the non-last
    ones of another), from the metadata's write sets: computed here, not with the
    re-replication core under test."""
    out: dict[str, set[int]] = {}
    fragments = md.fragments
    for i, fragment in enumerate(fragments):
        if i + 1 < len(fragments):
            last = fragments[i + 1].first_entry_id - 1
            if md.last_entry_id is not None:
                last = min(last, md.last_entry_id)
        elif md.state is LedgerState.CLOSED and md.last_entry_id is not None:
            last = md.last_entry_id
        else:
            continue
        for bookie in fragment.bookies:
            out.setdefault(bookie, set())
        for entry_id in range(fragment.first_entry_id, last + 1):
            for bookie in md.write_set_bookies(entry_id):
                out[bookie].add(entry_id)
    return out


def _end(md: LedgerMetadata) -> tuple:
    """What every party must agree on about a closed ledger (the replicator may swap
    bookies in its fragments afterwards)."""
    return (md.state, md.last_entry_id, md.length, tuple(f.first_entry_id for f in md.fragments))


def _is_swap(before: LedgerMetadata, after: LedgerMetadata) -> bool:
    """Whether ``after`` is ``before`` with bookies swapped inside fragments, and nothing
    else changed."""
    if _end(before) != _end(after):
        return False
    return replace(after, fragments=before.fragments) == before
