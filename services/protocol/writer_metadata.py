"""The metadata half of the write handle: ensemble changes and every CAS result.

``writer.WriteHandle`` derives from ``HandleMetadata``; this module holds the
parts of it that change the ledger's metadata (see the writer's docstring,
"Bookie failure" and "Close"), so each module stays readable on its own:

- replacing failed bookies: a change starts when a bookie of the current
  ensemble fails an add, asks for the writable bookies, plans the new fragment
  at ``lac + 1`` (``ensemble.plan_ensemble_change``) and writes it through the
  CAS sub-machine (``cas.MetadataCas``, at most ``ensemble_change_attempts_max``
  writes before waiting ``ensemble_change_retry_ms`` and starting again);
- the results of the CAS, for a change and for a close: written, fresh metadata
  after a conflict or an unknown outcome (the fresh metadata decides), failed.

The handle's limits and states live here too, as both halves use them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from services.errors import LedgerFenced, LedgerNotFound, NotEnoughBookies, QuireError, present
from services.limits import BATCH_ENTRIES_MAX
from services.protocol.adds import PendingAdds, PendingEntry
from services.protocol.cas import CasFailed, CasFresh, CasWritten, MetadataCas
from services.protocol.ensemble import CloseOutcome, close_outcome, plan_ensemble_change
from services.protocol.messages import (
    Effect,
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    ReadWritableBookies,
    SendLac,
    WritableBookies,
)
from services.protocol.metadata import LedgerMetadata, LedgerState


@dataclass(frozen=True)
class WriterLimits:
    """Every bound of a write handle (docs/style.md §5)."""

    adds_in_flight_max: int = 2 * BATCH_ENTRIES_MAX  # entries accepted, not acknowledged
    add_bytes_in_flight_max: int = 128 * 1024 * 1024  # their payload bytes
    add_timeout_ms: int = 20_000
    explicit_lac_delay_ms: int = 20
    ensemble_change_retry_ms: int = 500
    ensemble_change_attempts_max: int = 10  # CAS conflicts before waiting a retry period
    metadata_retry_ms: int = 500
    metadata_failures_max: int = 10  # store failures in a row before giving up an operation
    close_attempts_max: int = 10  # close CAS conflicts (ledger still OPEN) before giving up
    send_batch_entries_max: int = 1_000
    send_batch_bytes_max: int = 16 * 1024 * 1024


class HandleState(StrEnum):
    OPEN = "open"  # accepting adds
    CLOSING = "closing"  # no more adds; pending adds finish, then CAS to CLOSED
    CLOSED = "closed"  # closed by this handle
    FENCED = "fenced"  # recovered, closed or deleted by someone else


@dataclass(slots=True)
class _Change:
    """An ensemble change in progress."""

    retry_at: int
    waiting_for_bookies: bool = False
    cas_begun: bool = False  # its metadata operation (bounded attempts) has started
    written: bool = False  # a CAS of it was sent: it may land, whatever we heard back


class HandleMetadata:
    """The metadata half of ``WriteHandle`` (set up by its ``__init__``)."""

    metadata: LedgerMetadata
    version: int
    limits: WriterLimits
    ensemble_changes: int
    _state: HandleState
    _now: int
    _rng: random.Random
    _pending: PendingAdds
    _failed: set[str]
    _writable: tuple[str, ...]
    _writable_instances: dict[str, str | None]
    _change: _Change | None
    _cas: MetadataCas
    _meta_kind: Literal["change", "close"] | None

    # The other half's steps this one calls (defined by ``WriteHandle``).
    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def lac(self) -> int:
        """The last entry acknowledged to a client."""
        return self._pending.lac

    def _send(self, entries: list[PendingEntry]) -> list[Effect]:
        raise NotImplementedError

    def _advance(self) -> list[Effect]:
        raise NotImplementedError

    def _maybe_start_close(self) -> list[Effect]:
        raise NotImplementedError

    def _write_close(self, *, retry: bool = False) -> list[Effect]:
        raise NotImplementedError

    def _closed_ok(self) -> list[Effect]:
        raise NotImplementedError

    def _fail_close_waiters(self, error: type[QuireError], message: str) -> list[Effect]:
        raise NotImplementedError

    def _become_fenced(self, error: type[QuireError]) -> list[Effect]:
        raise NotImplementedError

    # ------------------------------------------------------------------ ensemble change

    def _bookie_failed(self, bookie: str) -> list[Effect]:
        if bookie not in self.metadata.ensemble or bookie in self._failed:
            return []
        self._failed.add(bookie)
        self._pending.forget_sends(bookie)
        if self._change is not None:
            return []  # planned together with the change in progress (or right after it)
        self._change = _Change(retry_at=self._now + self.limits.ensemble_change_retry_ms)
        return [ReadWritableBookies()]

    def _on_writable(self, event: WritableBookies) -> list[Effect]:
        self._writable = tuple(event.bookies)
        self._writable_instances = event.instance_map()
        if self._change is not None and not self._cas.busy:
            return self._plan_change()
        return []

    def _plan_change(self) -> list[Effect]:
        change = self._change
        if change is None or self._state in (HandleState.CLOSED, HandleState.FENCED):
            self._change = None
            return self._maybe_start_close()
        if not any(b in self._failed for b in self.metadata.ensemble):
            self._change = None
            return self._advance()
        if self._state is HandleState.CLOSING and not self._pending.entries:
            self._change = None  # nothing left to re-send: closing needs no bookies
            return self._maybe_start_close()
        try:
            target = plan_ensemble_change(
                self.metadata,
                self._failed,
                self._writable,
                self._pending.lac,
                self._rng,
                self._writable_instances,
            )
        except NotEnoughBookies:
            return self._wait_for_bookies()
        if not change.cas_begun:
            change.cas_begun = True
            self._cas.begin(self.limits.ensemble_change_attempts_max)
        write = self._cas.write(target, self.version)
        change.written = write is not None or change.written
        if write is None:  # it kept losing the CAS: wait a retry period, then start again
            return self._wait_for_bookies()
        change.waiting_for_bookies = False
        self._meta_kind = "change"
        return [write]

    def _wait_for_bookies(self) -> list[Effect]:
        change = present(self._change, "waiting for bookies without a change")
        change.waiting_for_bookies = True
        change.cas_begun = False
        change.retry_at = self._now + self.limits.ensemble_change_retry_ms
        return []

    def _adopt(self, metadata: LedgerMetadata, version: int) -> list[Effect]:
        """Take fresh OPEN metadata: recompute write sets and send pending entries to the
        bookies that do not have them yet; tell replacement bookies the LAC."""
        old_ensemble = set(self.metadata.ensemble)
        self.metadata, self.version = metadata, version
        self._failed &= set(metadata.ensemble)
        self._pending.refresh_write_sets(metadata.write_set_bookies)
        effects = self._send(list(self._pending.entries))
        joined = tuple(b for b in metadata.ensemble if b not in old_ensemble)
        if joined and self.lac >= 0:
            effects.append(SendLac(self.ledger_id, joined, self.lac))
        return effects

    # ------------------------------------------------------------------ metadata results

    def _on_metadata(
        self, event: MetadataWritten | MetadataConflicted | MetadataRead | MetadataFailed
    ) -> list[Effect]:
        result = self._cas.take(event, self._now)
        if result is None:
            return []
        kind = present(self._meta_kind, "a metadata result without an operation")
        self._meta_kind = None
        if isinstance(result, CasWritten):
            return self._on_metadata_written(kind, result)
        if isinstance(result, CasFresh):
            return self._on_fresh_metadata(kind, result)
        return self._on_metadata_failed(kind, result)

    def _on_metadata_written(self, kind: str, result: CasWritten) -> list[Effect]:
        if kind == "close":
            self.metadata, self.version = result.metadata, result.version
            return self._closed_ok()
        self.ensemble_changes += 1
        if self._state is HandleState.FENCED:
            self.metadata, self.version = result.metadata, result.version
            return self._maybe_start_close()
        return self._adopt(result.metadata, result.version) + self._plan_change()

    def _on_fresh_metadata(self, kind: str, result: CasFresh) -> list[Effect]:
        """The CAS lost (or its outcome was unknown and we re-read): the fresh metadata
        decides (docs/protocol.md, "Failure while writing" and "Closing as writer")."""
        fresh, version = result.metadata, result.version
        if kind == "change":
            if fresh.state is not LedgerState.OPEN:
                self.metadata, self.version = fresh, version
                return self._become_fenced(LedgerFenced)
            if self._state is HandleState.FENCED:
                self.metadata, self.version = fresh, version
                return self._maybe_start_close()
            return self._adopt(fresh, version) + self._plan_change()
        self.metadata, self.version = fresh, version
        outcome = close_outcome(fresh, self.lac)
        if outcome is CloseOutcome.DONE:
            return self._closed_ok()
        if outcome is CloseOutcome.RETRY:
            return self._write_close(retry=True)
        return self._become_fenced(LedgerFenced)

    def _on_metadata_failed(self, kind: str, result: CasFailed) -> list[Effect]:
        if result.error is LedgerNotFound:
            return self._become_fenced(LedgerNotFound)
        if kind == "change":
            return self._wait_for_bookies() if self._change is not None else []
        return self._fail_close_waiters(result.error, result.message)
