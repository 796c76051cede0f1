"""Pending adds: entries sent and not yet acknowledged to the client (BookKeeper's
PendingAddOp, for all of a handle's entries at once).

Rule (docs/protocol.md, "Ledgers"): an entry is acknowledged to the client when Qa
bookies of its write set stored it AND every lower entry is acknowledged, so
acknowledgements are in entry-id order, always. A request (one entry or a
batch) is acknowledged as a whole, once its last entry is.

The pending entries are exactly ``lac + 1 .. next_entry_id - 1``, kept in a
deque in id order. For each entry we remember which bookies of its CURRENT
write set stored it (``acked_by``) and to which we sent it (``sent_to``).
After an ensemble change the write sets are recomputed: acks and sends of a
bookie that left an entry's write set are forgotten, so a replaced bookie's
acks never count for entries of the new fragment, and the new bookie gets
every pending entry of its write sets re-sent.

An entry is sealed once, when it is first sent, and every later send of it
(to a replacement bookie) carries that very record, as BookKeeper re-sends a
PendingAddOp's buffer: a bookie that already stores the entry then sees the
same bytes (an idempotent re-add), never other ones (``entry_exists``). The
piggybacked LAC is the one at the first send, which is never wrong, only older.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from services.errors import invariant
from services.protocol import quorum
from services.protocol.messages import SendAdds
from services.wire.digest import sealed
from services.wire.framing import FramedRecord

WriteSetOf = Callable[[int], tuple[str, ...]]


@dataclass(slots=True)
class PendingEntry:
    entry_id: int
    payload: bytes
    length: int  # the ledger's total payload bytes up to and including this entry
    write_set: tuple[str, ...]
    acked_by: set[str] = field(default_factory=set)
    sent_to: set[str] = field(default_factory=set)
    record: FramedRecord | None = None  # sealed at the first send, re-sent unchanged


@dataclass(slots=True)
class PendingRequest:
    request_id: Hashable
    first_entry_id: int
    last_entry_id: int
    deadline: int  # ms, when it fails with a time-out if not acknowledged


# The queues of a handle with nothing pending, shared by every such handle and never
# changed: ``add`` gives a handle queues of its own before it appends, ``advance`` and
# ``fail_all`` hand the shared ones back once the handle's are empty. An empty deque holds
# a block of 64 slots (about 600 bytes), and a gateway holds tens of thousands of idle
# handles (benchmarks/README.md, "Many open things").
_NO_ENTRIES: deque[PendingEntry] = deque()
_NO_REQUESTS: deque[PendingRequest] = deque()


class PendingAdds:
    """The in-order ack tracker of one write handle."""

    def __init__(self, ack_quorum: int, lac: int = -1, acked_length: int = 0) -> None:
        """Nothing pending, entries up to ``lac`` (``acked_length`` bytes) acknowledged:
        a new ledger's tracker, or a parked handle's (``writer.ParkedWriter``) resumed."""
        self.ack_quorum = ack_quorum
        self.entries: deque[PendingEntry] = _NO_ENTRIES
        self.requests: deque[PendingRequest] = _NO_REQUESTS
        self.lac = lac  # the last entry acknowledged to the client
        self.acked_length = acked_length  # total payload bytes of entries 0..lac
        self.next_entry_id = lac + 1
        self.length = acked_length  # total payload bytes of every entry handed out
        self.bytes = 0  # payload bytes pending

    def __len__(self) -> int:
        return len(self.entries)

    def add(
        self,
        request_id: Hashable,
        payloads: Sequence[bytes],
        deadline: int,
        write_set_of: WriteSetOf,
    ) -> list[PendingEntry]:
        """Hand out the next entry ids to ``payloads``, in order."""
        first = self.next_entry_id
        out: list[PendingEntry] = []
        for payload in payloads:
            self.length += len(payload)
            self.bytes += len(payload)
            entry_id = self.next_entry_id
            self.next_entry_id += 1
            out.append(PendingEntry(entry_id, payload, self.length, write_set_of(entry_id)))
        if self.entries is _NO_ENTRIES:
            self.entries = deque()
        if self.requests is _NO_REQUESTS:
            self.requests = deque()
        self.entries.extend(out)
        self.requests.append(PendingRequest(request_id, first, self.next_entry_id - 1, deadline))
        return out

    def get(self, entry_id: int) -> PendingEntry | None:
        index = entry_id - (self.lac + 1)
        if 0 <= index < len(self.entries):
            entry = self.entries[index]
            invariant(entry.entry_id == entry_id, f"pending entry {entry.entry_id} at {entry_id}")
            return entry
        return None

    def record_ack(self, bookie: str, entry_id: int) -> None:
        """``bookie`` stored ``entry_id``; counted only if it is in the entry's write set."""
        entry = self.get(entry_id)
        if entry is not None and bookie in entry.write_set:
            entry.acked_by.add(bookie)

    def discard_ack(self, bookie: str, entry_id: int) -> None:
        """``bookie`` says it does not store our bytes for ``entry_id``: never count it."""
        entry = self.get(entry_id)
        if entry is not None:
            entry.acked_by.discard(bookie)

    def advance(self, excluding: Collection[str] = ()) -> tuple[int, list[PendingRequest]]:
        """Acknowledge the quorum-acked prefix: how many entries, and the requests now done.
        Acks of the bookies in ``excluding`` do not count."""
        popped = 0
        while self.entries and quorum.ack_quorum_reached(
            self.ack_quorum, len(self.entries[0].acked_by.difference(excluding))
        ):
            entry = self.entries.popleft()
            invariant(entry.entry_id == self.lac + 1, f"entry {entry.entry_id} acked out of order")
            self.lac = entry.entry_id
            self.acked_length = entry.length
            self.bytes -= len(entry.payload)
            popped += 1
        done: list[PendingRequest] = []
        while self.requests and self.requests[0].last_entry_id <= self.lac:
            done.append(self.requests.popleft())
        if not self.entries:
            self.entries = _NO_ENTRIES
        if not self.requests:
            self.requests = _NO_REQUESTS
        invariant(not _NO_ENTRIES and not _NO_REQUESTS, "the shared empty queues were changed")
        return popped, done

    def fail_all(self) -> list[PendingRequest]:
        """Drop every pending entry and return the requests that can no longer succeed.
        Their ids stay used: the handle must not hand out ids again (it closes)."""
        failed = list(self.requests)
        self.requests = _NO_REQUESTS
        self.entries = _NO_ENTRIES
        self.bytes = 0
        return failed

    def refresh_write_sets(self, write_set_of: WriteSetOf) -> None:
        """Recompute write sets after a metadata change; forget acks and sends of bookies
        that left an entry's write set."""
        for entry in self.entries:
            entry.write_set = write_set_of(entry.entry_id)
            members = set(entry.write_set)
            entry.acked_by &= members
            entry.sent_to &= members

    def forget_sends(self, bookie: str) -> None:
        """``bookie`` failed: adds in flight to it are lost (its acks so far still count)."""
        for entry in self.entries:
            entry.sent_to.discard(bookie)


def build_sends(
    entries: Iterable[PendingEntry],
    failed: Collection[str],
    template: FramedRecord,
    digest_key: bytes,
    batch_entries_max: int,
    batch_bytes_max: int,
) -> list[SendAdds]:
    """``SendAdds`` effects that send each entry to the bookies of its write set that
    have not been sent it and did not fail, one batch per bookie (split at the bounds).

    Each record is ``template`` (ledger id, the LAC at send time, digest type) with the
    entry's id, payload and cumulative length, sealed at the entry's first send and kept
    in ``entry.record``: later sends of the entry carry the same bytes."""
    batches: dict[str, list[FramedRecord]] = {}
    for entry in entries:
        targets = [b for b in entry.write_set if b not in failed and b not in entry.sent_to]
        if not targets:
            continue
        record = entry.record
        if record is None:
            record = entry.record = sealed(
                template, entry.entry_id, entry.payload, entry.length, digest_key
            )
        for bookie in targets:
            batches.setdefault(bookie, []).append(record)
            entry.sent_to.add(bookie)
    effects: list[SendAdds] = []
    for bookie, records in batches.items():
        chunk: list[FramedRecord] = []
        size = 0
        for record in records:
            full = len(chunk) >= batch_entries_max or size + len(record.payload) > batch_bytes_max
            if chunk and full:
                effects.append(SendAdds(bookie, tuple(chunk)))
                chunk, size = [], 0
            chunk.append(record)
            size += len(record.payload)
        effects.append(SendAdds(bookie, tuple(chunk)))
    return effects
