"""The event loop's view of the ledgers: committed LAC, last entry and fenced flag.

It changes only when the writer thread hands over the states of a committed
batch, so every answer built from it describes durable data. Long-polls on
a ledger's LAC wait on one ``asyncio.Event`` per ledger, set (and dropped)
when that ledger changes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from bookie.limits import LAC_WAITERS_MAX
from services.limits import LAC_WAIT_MAX_MS


@dataclass(slots=True, frozen=True)
class LedgerView:
    ledger_id: int
    lac: int
    last_entry_id: int
    fenced: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.ledger_id,
            "lac": self.lac,
            "last_entry_id": self.last_entry_id,
            "fenced": self.fenced,
        }


class _Changed(asyncio.Event):
    """Set when a ledger's state changes; ``deleted`` when the change was its delete (a
    waiter then answers at once, whatever a later commit re-created)."""

    deleted = False


class LedgerIndex:
    def __init__(self, states: dict[int, tuple[int, int, bool]] | None = None) -> None:
        self._states: dict[int, tuple[int, int, bool]] = dict(states or {})
        self._events: dict[int, _Changed] = {}
        self._waiters = 0
        self._waiting: dict[int, int] = {}
        self._closing = asyncio.Event()

    def __len__(self) -> int:
        return len(self._states)

    @property
    def polls_waiting(self) -> int:
        """LAC long polls waiting now (``wait_past``)."""
        return self._waiters

    def __contains__(self, ledger_id: int) -> bool:
        return ledger_id in self._states

    def states(self) -> dict[int, tuple[int, int, bool]]:
        """Every ledger's committed state, by id (a copy)."""
        return dict(self._states)

    def get(self, ledger_id: int) -> LedgerView | None:
        st = self._states.get(ledger_id)
        return None if st is None else LedgerView(ledger_id, *st)

    def last_entry_id(self, ledger_id: int) -> int:
        st = self._states.get(ledger_id)
        return -1 if st is None else st[1]

    def apply(self, changes: dict[int, tuple[int, int, bool] | None]) -> None:
        """Publish committed states (``None``: the ledger was deleted); wake its waiters."""
        states, events = self._states, self._events
        for lid, st in changes.items():
            if st is None:
                states.pop(lid, None)
            else:
                states[lid] = st
            if events:
                ev = events.pop(lid, None)
                if ev is not None:
                    ev.deleted = st is None
                    ev.set()

    def close(self) -> None:
        """Shutting down: every long-poll answers now with what it has."""
        self._closing.set()
        for ev in self._events.values():
            ev.set()
        self._events.clear()

    async def wait_past(self, ledger_id: int, after: int, wait_s: float) -> LedgerView | None:
        """Wait up to ``wait_s`` until the ledger's LAC or last entry id passes ``after``.

        Answers at once when it already has, when the wait is zero, while shutting
        down, or when ``LAC_WAITERS_MAX`` long-polls are already waiting; None at once
        when the ledger is deleted while it waits (a ledger not known yet is waited for:
        its first entry may be on its way).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(wait_s, LAC_WAIT_MAX_MS / 1000)
        while True:
            view = self.get(ledger_id)
            if view is not None and (view.lac > after or view.last_entry_id > after):
                return view
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closing.is_set() or self._waiters >= LAC_WAITERS_MAX:
                return view
            ev = self._events.get(ledger_id)
            if ev is None:
                ev = self._events[ledger_id] = _Changed()
            self._waiters += 1
            self._waiting[ledger_id] = self._waiting.get(ledger_id, 0) + 1
            try:
                async with asyncio.timeout(remaining):
                    await ev.wait()
            except TimeoutError:
                pass
            finally:
                self._waiters -= 1
                left = self._waiting[ledger_id] - 1
                if left:
                    self._waiting[ledger_id] = left
                else:
                    # The last waiter of this ledger drops its event, so events of
                    # ledgers nobody waits on do not pile up.
                    del self._waiting[ledger_id]
                    if self._events.get(ledger_id) is ev:
                        del self._events[ledger_id]
            if ev.deleted:
                return None  # deleted while it waited
