"""What each operation does inside a group commit's transaction (bookie/writer.py: its
rules, "Entries are written once" and "Fences", are in that module's docstring): the
rows it writes and the change to the writer's copy of the ledger states, which the
writer publishes to the event loop after the commit.

A delete removes the ledger's row and puts its id in ``purging`` (bookie/storage.py);
the writer purges its entries later (bookie/writer.py, "The purge"). A ledger id written
again while it is still purging (an add, a fence or a LAC update: Quire's clients never
reuse a ledger id, but the API allows it) first has the rest of its old entries deleted
in the same transaction, so it starts afresh exactly as a ledger whose purge had ended:
no old entry can show through, and the answers do not depend on the purge's progress.

Each ledger's state carries the payload bytes of its entry rows (bookie/storage.py, "Kept
byte counts"): an add counts the rows it inserts (never an entry it finds stored), the
writer upserts the count with the ledger's row, a delete moves it to the ledger's
``purging`` row, and a rewrite of a purging id drops the old rows with their count."""

from __future__ import annotations

from typing import Any

from bookie.operations import AddOp, AddOpResult, DeleteOp, FenceOp, SetLacOp
from bookie.storage import (
    DELETE_ENTRIES_SQL,
    DELETE_LEDGER_SQL,
    DELETE_PURGING_SQL,
    INSERT_PURGING_SQL,
    SELECT_ENTRY_SQL,
)
from services.errors import EntryExists, LedgerFenced, LedgerNotFound
from services.wire.framing import DIGEST_CODES

# A ledger's state: [lac, last_entry_id, fenced, bytes] (bytes: the payload bytes of its
# entry rows). Lists, for cheap in-place updates.
LedgerState = list[int]
# A row of the entries table: (ledger_id, entry_id, lac, length, digest_type, digest, payload).
Row = tuple[Any, ...]


def new_ledger(
    db: Any, ledgers: dict[int, LedgerState], purging: set[int], lid: int
) -> LedgerState:
    """The state of a ledger written for the first time (or again after its delete): a
    ledger still purging loses the rest of its old entries first (module docstring)."""
    if lid in purging:
        db.execute(DELETE_ENTRIES_SQL, (lid,))
        db.execute(DELETE_PURGING_SQL, (lid,))
        purging.discard(lid)
    st = ledgers[lid] = [-1, -1, False, 0]
    return st


def apply_add(
    db: Any,
    ledgers: dict[int, LedgerState],
    purging: set[int],
    op: AddOp,
    rows: list[Row],
    written: dict[tuple[int, int], Row],
    touched: set[int],
) -> AddOpResult:
    """Apply one add's records to the ledger states; the rows to insert go on ``rows``
    (``written`` holds this transaction's rows by key, ``touched`` the ledgers changed;
    ``purging`` the deleted ledgers whose entries are not all gone yet)."""
    codes = DIGEST_CODES
    result = AddOpResult(0)
    for r in op.records:
        lid = r.ledger_id
        st = ledgers.get(lid)
        if st is None:
            st = new_ledger(db, ledgers, purging, lid)
        elif st[2] and not r.recovery:
            result.rejected.append((lid, r.entry_id, LedgerFenced.code))
            continue
        row = (lid, r.entry_id, r.lac, r.length, codes[r.digest_type], r.digest, r.payload)
        if r.entry_id <= st[1]:
            # It may exist already (bookie/writer.py, "Entries are written once"):
            # same bytes is a no-op.
            key = (lid, r.entry_id)
            stored = written.get(key)
            if stored is None:
                found = db.execute(SELECT_ENTRY_SQL, key).fetchone()
                stored = None if found is None else (*key, *found)
            if stored is not None:
                if stored[2:] == row[2:]:
                    result.stored += 1
                else:
                    result.rejected.append((lid, r.entry_id, EntryExists.code))
                continue
        written[(lid, r.entry_id)] = row
        rows.append(row)
        st[3] += len(r.payload)
        if r.lac > st[0]:
            st[0] = r.lac
        if r.entry_id > st[1]:
            st[1] = r.entry_id
        touched.add(lid)
        result.stored += 1
    return result


def apply_other(
    db: Any,
    ledgers: dict[int, LedgerState],
    purging: set[int],
    op: FenceOp | SetLacOp | DeleteOp,
    touched: set[int],
    deleted: set[int],
) -> Any:
    """Apply a fence, LAC update or delete (its statements run at once, in order). A
    delete removes the ledger's row and marks it purging; its entries stay for the
    writer's paced purge (module docstring)."""
    lid = op.ledger_id
    if isinstance(op, DeleteOp):
        st = ledgers.get(lid)
        if st is None:
            return LedgerNotFound(f"ledger {lid} is not stored on this bookie")
        if op.if_state is not None and (st[0], st[1], bool(st[2])) != op.if_state:
            return False
        db.execute(DELETE_LEDGER_SQL, (lid,))
        db.execute(INSERT_PURGING_SQL, (lid, st[3]))
        purging.add(lid)
        del ledgers[lid]
        touched.discard(lid)
        deleted.add(lid)
        return True
    st = ledgers.get(lid)
    if st is None:
        st = new_ledger(db, ledgers, purging, lid)
    if isinstance(op, FenceOp):
        st[2] = True
    elif op.lac > st[0]:
        st[0] = op.lac
    touched.add(lid)
    deleted.discard(lid)
    return (st[0], st[1], st[2])
