"""The end of an auditor's check (auditor/service.py ``_audit``): the decommission states
it decided are written before the check shows as ended, and a ZooKeeper error writing
them has the check retried, never the work loop ended."""

from __future__ import annotations

import asyncio
from typing import Any
from unittest import mock

import pytest

from auditor import service as service_module
from auditor.audit import FULL, AuditReport
from auditor.metrics import AuditorMetrics
from auditor.service import Auditor
from services.errors import Unavailable
from services.settings import AuditorSettings, load_settings
from services.zk.underreplication import DECOMMISSIONING

BOOKIE = "127.0.0.1:3181"


class FinishedAudit:
    """An ``Audit`` whose walk found no fragment naming ``BOOKIE``."""

    def __init__(self, kind: str, *_args: Any, **_kwargs: Any) -> None:
        self.kind = kind

    async def run(self) -> AuditReport:
        return AuditReport(self.kind, started_at_ms=1, finished_at_ms=2, complete=True)


def auditor(set_decommissioned: mock.AsyncMock) -> Auditor:
    """An elected auditor over a store that answers nothing it is not asked here."""
    settings = load_settings(AuditorSettings, [])
    a = Auditor(settings, mock.MagicMock(), AuditorMetrics())
    a.underreplication = mock.MagicMock()
    a.underreplication.decommissions = mock.AsyncMock(return_value={BOOKIE: DECOMMISSIONING})
    a.underreplication.set_placement_report = mock.AsyncMock()
    a.underreplication.set_decommissioned = set_decommissioned
    a.election.confirm = mock.AsyncMock(return_value=True)  # type: ignore[method-assign]
    return a


@pytest.fixture(autouse=True)
def finished_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "Audit", FinishedAudit)


def test_a_check_shows_as_ended_once_its_decommissions_are_written() -> None:
    seen: list[object] = []
    a: Auditor

    async def set_decommissioned(bookie: str) -> None:
        seen.append(a.last_audit)  # what a status request would answer meanwhile

    written = mock.AsyncMock(side_effect=set_decommissioned)
    a = auditor(written)
    assert asyncio.run(a._audit(FULL)) is True
    assert seen == [None]
    assert a.last_audit is not None and a.last_audit.kind == FULL
    written.assert_awaited_once_with(BOOKIE)


def test_a_zookeeper_error_writing_a_decommission_retries_the_check() -> None:
    a = auditor(mock.AsyncMock(side_effect=Unavailable("ZooKeeper connection lost")))
    assert asyncio.run(a._audit(FULL)) is False  # retried by the work loop
    assert a.last_audit is None


def test_the_work_loop_outlives_the_error_and_the_retry_writes_the_state() -> None:
    """The loop retries the failed check (after FAILED_AUDIT_RETRY_S) and its retry
    writes the state: the loop did not end with the error."""
    written = asyncio.Event()
    calls: list[str] = []

    async def flaky(bookie: str) -> None:
        calls.append(bookie)
        if len(calls) == 1:
            raise Unavailable("ZooKeeper connection lost")
        written.set()

    async def scenario() -> Auditor:
        a = auditor(mock.AsyncMock(side_effect=flaky))
        with mock.patch.object(service_module, "FAILED_AUDIT_RETRY_S", 0.01):
            a.request(FULL)
            work = asyncio.create_task(a._run_work())
            try:
                await asyncio.wait_for(written.wait(), 10)
            finally:
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
        return a

    a = asyncio.run(scenario())
    assert calls == [BOOKIE, BOOKIE]
    assert a.last_audit is not None
