"""A real bookie against the cases of issue 7: entries are never silently overwritten,
one bad record does not fail a whole request, one stalled request does not stall every
add, answers carry the bookie's instance and the ledger's length."""

from __future__ import annotations

from tests.integration.bookie_support import Bookie, sealed


def test_readd_same_bytes_is_idempotent_different_bytes_are_refused(cluster):
    """Re-adding an entry with its bytes answers stored; different bytes for a stored entry
    (a normal add, or a recovery add on a fenced ledger) are refused per record with
    entry_exists, the rest of the request is stored, and the entry keeps its bytes."""
    bookie = Bookie(cluster.start_bookie())
    try:
        assert bookie.add([sealed(3, 0, b"zero"), sealed(3, 1, b"one")])["stored"] == 2
        assert bookie.add([sealed(3, 1, b"one")]) == {"stored": 1, "rejected": []}
        answer = bookie.add([sealed(3, 1, b"ONE"), sealed(3, 2, b"two"), sealed(4, 0)])
        assert answer == {
            "stored": 2,
            "rejected": [{"ledger_id": 3, "entry_id": 1, "error": "entry_exists"}],
        }
        bookie.fence(3)
        answer = bookie.add([sealed(3, 0, b"other", recovery=True), sealed(3, 2, b"two", True)])
        assert answer == {
            "stored": 1,
            "rejected": [{"ledger_id": 3, "entry_id": 0, "error": "entry_exists"}],
        }
        assert bookie.read(3, 0).payload == b"zero"
        assert bookie.read(3, 1).payload == b"one"
        assert bookie.metric("quire_bookie_rejected_adds_total", 'reason="entry_exists"') == 2
    finally:
        bookie.close()
