"""The metadata compare-and-set sub-machine shared by the writer and the recovery."""

from __future__ import annotations

import pytest

from services.errors import InvariantViolation, LedgerNotFound, MetadataUnavailable
from services.protocol.cas import CasFailed, CasFresh, CasWritten, MetadataCas
from services.protocol.limits import CasLimits
from services.protocol.messages import (
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    ReadMetadata,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata

MD = LedgerMetadata.new(9, ["a:1", "b:2", "c:3"], 2, 2)


def test_a_write_at_the_planned_version_and_its_success() -> None:
    """The CAS writes the target at the version it was planned on; success ends it."""
    cas = MetadataCas(9, CasLimits())
    cas.begin(3)
    assert cas.write(MD, 4) == WriteMetadata(MD, 4)
    assert cas.busy
    assert cas.take(MetadataWritten(MD, 5), now=0) == CasWritten(MD, 5)
    assert not cas.busy


def test_a_conflict_hands_the_fresh_metadata_to_the_owner_and_attempts_are_bounded() -> None:
    """On a conflict the owner gets the fresh metadata and decides; it may write again
    at most attempts_max times per operation, then write() says no (None)."""
    cas = MetadataCas(9, CasLimits())
    cas.begin(2)
    cas.write(MD, 0)
    assert cas.take(MetadataConflicted(MD.in_recovery(), 1), now=0) == CasFresh(MD.in_recovery(), 1)
    assert cas.write(MD, 1) == WriteMetadata(MD, 1)
    assert cas.take(MetadataConflicted(MD, 2), now=0) == CasFresh(MD, 2)
    assert cas.write(MD, 2) is None
    cas.begin(1)  # a new operation counts afresh
    assert cas.write(MD, 2) is not None


def test_a_store_failure_backs_off_then_re_reads_and_failures_are_bounded() -> None:
    """An unknown outcome is a deadline (retry_ms), then ReadMetadata; the answer comes
    back like a conflict; more than failures_max failures in a row give up."""
    cas = MetadataCas(9, CasLimits(failures_max=1, retry_ms=100))
    cas.begin(5)
    cas.write(MD, 0)
    assert cas.take(MetadataFailed("metadata_unavailable", now=10), now=10) is None
    assert cas.next_deadline() == 110 and cas.busy
    assert cas.take(MetadataRead(MD, 1), now=50) is None  # not asked for yet: ignored
    assert cas.tick(109) == []
    assert cas.tick(110) == [ReadMetadata(9)]
    assert cas.next_deadline() is None
    failed = cas.take(MetadataFailed("metadata_unavailable", "down"), now=120)
    assert isinstance(failed, CasFailed) and failed.error is MetadataUnavailable
    assert not cas.busy


def test_a_deleted_ledger_ends_the_operation_at_once() -> None:
    """ledger_not_found is final: no back-off, no re-read."""
    cas = MetadataCas(9, CasLimits())
    cas.begin(5)
    cas.write(MD, 0)
    failed = cas.take(MetadataFailed(LedgerNotFound.code), now=0)
    assert isinstance(failed, CasFailed) and failed.error is LedgerNotFound
    assert cas.next_deadline() is None


def test_one_write_in_flight_at_a_time() -> None:
    """Starting a second write (or operation) while one is in flight is our bug."""
    cas = MetadataCas(9, CasLimits())
    cas.begin(5)
    cas.write(MD, 0)
    with pytest.raises(InvariantViolation):
        cas.write(MD, 0)
    with pytest.raises(InvariantViolation):
        cas.begin(5)
    cas.cancel()
    assert cas.take(MetadataWritten(MD, 1), now=0) is None  # a cancelled write's answer
