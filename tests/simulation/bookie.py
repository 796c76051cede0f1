"""The simulated bookie: the real bookie's write path (bookie/writer.py, docs/api.md "Bookie"),
in memory, for many ledgers.

Group commit. Adds, fences and LAC updates are queued; one commit at a time takes
what is queued (a bounded batch: what arrived while the previous commit ran) and
applies it in queue order, then answers every operation of the batch at once when
the commit completes (``commit_ms`` later).
Nothing is answered, and no reader sees anything, before its commit. A fence never
shares a commit with other operations (a batch ends before the first fence that
follows other operations and after the last fence of a run of fences), so adds
queued before a fence are committed (and stored) before the fence, and adds
queued after it are refused.

Commit failure: with ``commit_fail_p`` a commit fails as a whole: nothing of the
batch is stored, and every operation answers ``bookie_unavailable``. As in
bookie/writer.py (``_reload`` keeps the more restrictive state), a fence whose commit
failed still fences the ledger in memory until the next crash.

Entries are written once: the same bytes again count as stored and change nothing;
other bytes for a stored entry are refused (``entry_exists``), recovery adds too.

Durability. With journal sync every commit is durable. A bookie started without it
(``journal_sync=False``) keeps a list of its commits since the last sync; a commit
holding a fence is always synced (``FENCE_ALWAYS_SYNCED``), and syncing makes
every earlier commit durable too (one write-ahead log). A crash loses a suffix of
the unsynced commits (their entries and their LAC changes), never a fence. A crash
also drops the queue (those requests are never answered) and the commit in
progress, which landed or not (drawn; either way it is not answered).

Instances. A bookie answers adds, fences and reads under its instance id (the real
bookie's cookie, sent in every answer's instance header). ``wipe`` is ``quire bookie
format`` on a crashed bookie: everything stored is gone, fences included, and it comes
back (``restart``) as a new instance, which the protocol must treat as a new, unfenced
bookie that knows nothing of what the old one stored.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.bookie_client import BookieAddResult
from services.errors import BookieUnavailable, EntryExists, LedgerFenced, invariant
from services.wire.digest import record_ok
from services.wire.framing import FramedRecord
from tests.simulation.world import Scheduler

# The bookie's rule since issue 7: a commit holding a fence is synced even without
# journal sync. A test turns it off to show that the simulator catches the old bookie.
FENCE_ALWAYS_SYNCED = True
# bookie/writer.py refuses other bytes for a stored entry; a test turns this off to show
# that the checker catches a bookie that overwrites silently.
REFUSE_OVERWRITE = True

Reply = Callable[[Any], None]


class BookieDown(Exception):
    """Connection refused: the bookie is crashed."""


class BookieReadOnlyError(Exception):
    pass


@dataclass
class LedgerOnBookie:
    fenced: bool = False
    lac: int = -1
    entries: dict[int, FramedRecord] = field(default_factory=dict)

    @property
    def last_entry_id(self) -> int:
        return max(self.entries, default=-1)


@dataclass
class _Op:
    kind: str  # "add" | "fence" | "lac"
    reply: Reply
    records: tuple[FramedRecord, ...] = ()
    ledger_id: int = -1
    lac: int = -1


@dataclass
class _Commit:
    """What one unsynced commit changed: entries stored, each ledger's LAC before it,
    and (only with ``FENCE_ALWAYS_SYNCED`` off) the ledgers it fenced."""

    stored: list[tuple[int, int]] = field(default_factory=list)
    lacs_before: dict[int, int] = field(default_factory=dict)
    fenced: list[int] = field(default_factory=list)


@dataclass
class BookieModel:
    """How one bookie behaves (drawn per seed)."""

    journal_sync: bool = True
    commit_fail_p: float = 0.0
    commit_ms_max: int = 3
    batch_ops_max: int = 16


class SimBookie:
    def __init__(
        self,
        bookie_id: str,
        scheduler: Scheduler,
        rng: random.Random,
        on_store: Callable[[str, FramedRecord], None],
        on_lose: Callable[[str, int, int], None],
        model: BookieModel | None = None,
    ) -> None:
        self.bookie_id = bookie_id
        self.scheduler = scheduler
        self.rng = rng
        self.on_store = on_store
        self.on_lose = on_lose
        self.model = model or BookieModel()
        self.up = True
        self.readonly = False
        self.ledgers: dict[int, LedgerOnBookie] = {}
        self.queue: list[_Op] = []
        self.committing: list[_Op] | None = None
        self.unsynced: list[_Commit] = []
        self.volatile_fences: set[int] = set()  # fenced in memory only (a failed commit)
        self.epoch = 0  # a crash starts a new one: work of an older epoch is dropped
        self.generation = 1  # a wipe starts a new instance
        self.instance_id = f"{bookie_id}#1"
        self.stats: Counter[str] = Counter()  # what happened, for the reach test
        # LAC long polls waiting here: each is called after every commit
        self.watchers: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ state

    def ledger(self, ledger_id: int) -> LedgerOnBookie:
        st = self.ledgers.get(ledger_id)
        if st is None:
            st = self.ledgers[ledger_id] = LedgerOnBookie()
        return st

    def fenced(self, ledger_id: int) -> bool:
        st = self.ledgers.get(ledger_id)
        return st is not None and st.fenced

    def _check_up(self) -> None:
        if not self.up:
            raise BookieDown(self.bookie_id)

    # ------------------------------------------------------------------ writes (queued)

    def submit_add(self, records: tuple[FramedRecord, ...], reply: Reply) -> None:
        self._check_up()
        if self.readonly and any(not r.recovery for r in records):
            raise BookieReadOnlyError(self.bookie_id)
        for r in records:
            if r.digest_type == "crc32c":  # a bookie has no HMAC key (bookie/fastpath.py)
                invariant(record_ok(r), f"bookie {self.bookie_id} got a record with a bad crc32c")
        self._enqueue(_Op("add", reply, records=records))

    def submit_fence(self, ledger_id: int, reply: Reply) -> None:
        self._check_up()
        self._enqueue(_Op("fence", reply, ledger_id=ledger_id))

    def submit_lac(self, ledger_id: int, lac: int, reply: Reply) -> None:
        self._check_up()
        self._enqueue(_Op("lac", reply, ledger_id=ledger_id, lac=lac))

    def _enqueue(self, op: _Op) -> None:
        self.queue.append(op)
        if self.committing is None:
            self._start_commit(self.epoch)  # the writer thread was waiting for work

    def _take_batch(self) -> list[_Op]:
        first = self.queue[0]
        fences = first.kind == "fence"
        count = 0
        for op in self.queue:
            if (op.kind == "fence") != fences:
                self.stats["fence and adds queued together"] += 1
                break
            if count >= self.model.batch_ops_max:
                break
            count += 1
        batch, self.queue = self.queue[:count], self.queue[count:]
        return batch

    def _start_commit(self, epoch: int) -> None:
        if epoch != self.epoch or self.committing is not None or not self.queue:
            return
        self.committing = self._take_batch()
        delay = self.rng.randint(1, self.model.commit_ms_max)
        self.scheduler.after(delay, lambda: self._finish_commit(epoch))

    def _finish_commit(self, epoch: int) -> None:
        if epoch != self.epoch:
            return
        batch, self.committing = self.committing, None
        invariant(batch is not None, "a commit finished without a batch")
        if self.model.commit_fail_p and self.rng.random() < self.model.commit_fail_p:
            self.stats["commit failed"] += 1
            error = BookieUnavailable(f"{self.bookie_id}: storage failure (simulated)")
            results: list[Any] = [error] * len(batch)
            for op in batch:
                if op.kind == "fence" and not self.fenced(op.ledger_id):
                    self.ledger(op.ledger_id).fenced = True
                    self.volatile_fences.add(op.ledger_id)
        else:
            results = self._apply(batch)
        for op, result in zip(batch, results, strict=True):
            op.reply(result)
        self._wake()
        self._start_commit(epoch)  # what queued up meanwhile is the next batch

    def _apply(self, batch: list[_Op]) -> list[Any]:
        """Apply a batch in queue order (one transaction) and return each op's result."""
        commit = _Commit()
        results: list[Any] = []
        has_fence = False
        for op in batch:
            if op.kind == "add":
                results.append(self._apply_add(op.records, commit))
                continue
            st = self.ledger(op.ledger_id)
            commit.lacs_before.setdefault(op.ledger_id, st.lac)
            if op.kind == "fence":
                has_fence = True
                if not st.fenced or op.ledger_id in self.volatile_fences:
                    commit.fenced.append(op.ledger_id)
                self.volatile_fences.discard(op.ledger_id)
                st.fenced = True
                results.append((st.lac, st.last_entry_id, self.instance_id))
            else:
                st.lac = max(st.lac, op.lac)
                results.append(None)
        synced = self.model.journal_sync or (has_fence and FENCE_ALWAYS_SYNCED)
        if synced:
            self.unsynced.clear()  # one log: syncing it makes every earlier commit durable
        else:
            self.unsynced.append(commit)
        return results

    def _apply_add(self, records: tuple[FramedRecord, ...], commit: _Commit) -> BookieAddResult:
        stored_count = 0
        rejected: list[tuple[int, int, str]] = []
        for r in records:
            st = self.ledger(r.ledger_id)
            if st.fenced and not r.recovery:
                rejected.append((r.ledger_id, r.entry_id, LedgerFenced.code))
                continue
            stored = st.entries.get(r.entry_id)
            if stored is not None and REFUSE_OVERWRITE:
                if _same_bytes(stored, r):
                    stored_count += 1
                else:
                    self.stats["entry_exists"] += 1
                    rejected.append((r.ledger_id, r.entry_id, EntryExists.code))
                continue
            commit.lacs_before.setdefault(r.ledger_id, st.lac)
            st.entries[r.entry_id] = r
            st.lac = max(st.lac, r.lac)
            commit.stored.append((r.ledger_id, r.entry_id))
            stored_count += 1
            self.on_store(self.bookie_id, r)
        return BookieAddResult(stored_count, rejected, self.instance_id)

    # ------------------------------------------------------------------ crash, restart

    def crash(self) -> None:
        """kill -9 (and, for a bookie without journal sync, the loss of the page cache)."""
        if not self.up:
            return
        self.up = False
        self.epoch += 1
        self.queue = []
        batch, self.committing = self.committing, None
        if batch is not None and self.rng.random() < 0.5:
            self._apply(batch)  # it landed, but nobody hears about it
        if self.unsynced:
            keep = self.rng.randint(0, len(self.unsynced))
            lost, self.unsynced = self.unsynced[keep:], []
            for commit in reversed(lost):
                self._undo(commit)
        for ledger_id in self.volatile_fences:
            self.ledgers[ledger_id].fenced = False
        self.volatile_fences.clear()
        self.watchers = []  # long polls die with the connection

    def _undo(self, commit: _Commit) -> None:
        for ledger_id, entry_id in commit.stored:
            st = self.ledgers[ledger_id]
            if st.entries.pop(entry_id, None) is not None:
                self.stats["unsynced entry lost"] += 1
                self.on_lose(self.bookie_id, ledger_id, entry_id)
        for ledger_id in commit.fenced:
            self.ledgers[ledger_id].fenced = False
        for ledger_id, lac in commit.lacs_before.items():
            self.ledgers[ledger_id].lac = lac

    def wipe(self) -> None:
        """``quire bookie format`` on the crashed bookie: nothing stored is left (entries,
        LACs, fences), and it will answer as a new instance once restarted."""
        invariant(not self.up, f"bookie {self.bookie_id} wiped while up")
        self.ledgers = {}
        self.unsynced = []
        self.volatile_fences.clear()
        self.generation += 1
        self.instance_id = f"{self.bookie_id}#{self.generation}"

    def restart(self) -> None:
        self.up = True

    # ------------------------------------------------------------------ reads (immediate)

    def _wake(self) -> None:
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            watcher()

    def read(self, ledger_id: int, entry_id: int) -> FramedRecord | None:
        self._check_up()
        st = self.ledgers.get(ledger_id)
        return None if st is None else st.entries.get(entry_id)

    def read_range(
        self,
        ledger_id: int,
        first: int,
        last: int,
        entries_max: int,
        bytes_max: int,
        stride: int = 0,
        residues: tuple[int, ...] = (),
    ) -> list[FramedRecord]:
        """Stored entries in [first, last], ascending: at most ``entries_max`` and, but
        for the first, ``bytes_max`` payload bytes; with a ``stride``, only those whose id
        mod stride is in ``residues`` (docs/api.md "Bookie")."""
        self._check_up()
        st = self.ledgers.get(ledger_id)
        found: list[FramedRecord] = []
        if st is None:
            return found
        size = 0
        for entry_id in range(first, last + 1):
            record = st.entries.get(entry_id)
            if record is None or (stride and entry_id % stride not in residues):
                continue
            if len(found) >= entries_max or found and size + len(record.payload) > bytes_max:
                break
            found.append(record)
            size += len(record.payload)
        return found

    def stored_ids(self, ledger_id: int) -> list[int]:
        """The ids of the ledger's entries stored here, ascending (what the bookie's
        ranges endpoint answers, as ranges)."""
        self._check_up()
        st = self.ledgers.get(ledger_id)
        return [] if st is None else sorted(st.entries)

    def read_lac(self, ledger_id: int) -> int:
        self._check_up()
        st = self.ledgers.get(ledger_id)
        return -1 if st is None else st.lac


def _same_bytes(a: FramedRecord, b: FramedRecord) -> bool:
    """The stored fields of bookie/storage.py (the recovery flag is not stored)."""
    return (a.lac, a.length, a.digest_type, a.digest, bytes(a.payload)) == (
        b.lac,
        b.length,
        b.digest_type,
        b.digest,
        bytes(b.payload),
    )
