"""The auditor: election, the bookie watch, and the audits the elected one runs.

Every auditor (elected or not) watches the bookie registry, the cookies and the
decommission nodes, so a standby that takes over knows since when each bookie has
been gone. Only the elected one acts: its work task runs the checks one at a time —

- a *placement* check when a bookie has been gone for the lost-bookie delay, is
  registered again as a new instance (formatted), or a decommission was requested
  (fragments naming such bookies, or the old instance, are marked);
- a *full* check (placement and replicas, stale marks cleared) when elected, every
  ``--audit-interval``, and on demand (``/auditor/audit-request`` bumped by the
  gateway's ``POST /v1/admin/audit`` or this auditor's ``POST /v1/audit``).

Requests that arrive during a check coalesce into one more check after it. Losing
the election (SUSPENDED included) cancels the work task at once, the running check
with it; the check also re-confirms the election before each batch of writes.

The elected one also runs retention passes (auditor/retention.py) in a task of their
own, every ``--retention-interval`` and on demand (``retention_now``), so that a long
full check does not hold back expiry, nor expiry a check; it stops with the election.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Any

from kazoo.protocol.states import KazooState

from auditor.audit import FULL, PLACEMENT, Audit, AuditReport, AuditView, NotElected
from auditor.decisions import BookieWatch, InstanceWatch, bookie_counts, decommission_done
from auditor.election import Election
from auditor.limits import (
    COUNT_TIMEOUT_S,
    DECOMMISSION_RECHECK_S,
    FAILED_AUDIT_RETRY_S,
    RETENTION_RETRY_S,
)
from auditor.metrics import AuditorMetrics
from auditor.replicas import ReplicaChecker
from auditor.retention import Retention, RetentionReport
from services.bookie_client import BookieClientPool
from services.clock import wall_ms
from services.errors import QuireError, Unavailable
from services.protocol.placement import rack_counts
from services.settings import AuditorSettings
from services.zk import paths as zkpaths
from services.zk.cursor_store import CursorStore
from services.zk.ledger_store import LedgerStore
from services.zk.log_store import LogStore
from services.zk.registry import BookieRegistry
from services.zk.store import MetadataStore
from services.zk.underreplication import (
    DECOMMISSIONED,
    DECOMMISSIONING,
    UnderReplicationStore,
)

log = logging.getLogger(__name__)


class Auditor:
    def __init__(
        self,
        settings: AuditorSettings,
        store: MetadataStore,
        metrics: AuditorMetrics,
        ssl_context: ssl.SSLContext | None = None,
    ):
        self.settings = settings
        self.id = settings.address
        self.store = store
        self.metrics = metrics
        self.ledgers = LedgerStore(store)
        self.underreplication = UnderReplicationStore(store)
        self.registry = BookieRegistry(store)
        self.pool = BookieClientPool(
            settings.cluster_secret,
            request_timeout_s=settings.bookie_request_timeout_ms / 1000,
            connect_timeout_s=min(2.0, settings.bookie_request_timeout_ms / 1000),
            ssl_context=ssl_context,
        )
        self.watch = BookieWatch(int(settings.lost_bookie_delay * 1000))
        self.cookies: set[str] = set()
        self.decommissions: dict[str, str] = {}
        self.named: set[str] = set()  # bookies the last complete walk saw in fragments
        self.racks_seen: frozenset[str] = frozenset()  # the racks of the registered bookies
        self.instances = InstanceWatch()  # bookies registered again as new instances
        self.election = Election(store, self.underreplication, self.id, self._on_elected)
        self.retention = Retention(
            self.ledgers,
            LogStore(store),
            CursorStore(store),
            self.pool,
            self.registry,
            metrics,
            self.election.confirm,
            settings.retention_deletes_per_s,
        )
        self.last_retention: RetentionReport | None = None
        self._retention_kick = asyncio.Event()
        self._retention_done: asyncio.Future[RetentionReport] | None = None
        self._retention_work: asyncio.Task[None] | None = None
        self.last_audit: AuditReport | None = None
        self.audit_running = False
        self._pending: set[str] = set()
        self._kick = asyncio.Event()
        self._bookies_changed = asyncio.Event()
        self._work: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Once connected: watches, the bookie watch, the election."""
        await self.underreplication.ensure_paths()
        await self.store.ensure_path(zkpaths.COOKIES)
        await self.registry.start()
        self.registry.add_listener(self._bookies_changed.set)
        self.store.watch_children(zkpaths.COOKIES, self._on_cookies)
        self.underreplication.watch_decommissions(lambda _ids: self._refresh_decommissions())
        self.underreplication.watch_audit_requests(lambda: self.request(FULL))
        self.store.add_state_listener(self._on_state)
        self._tasks = [
            asyncio.create_task(self._track_bookies(), name="auditor-bookies"),
            asyncio.create_task(self.election.run(), name="auditor-election"),
        ]

    async def aclose(self) -> None:
        self._stop_work()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for work in (self._work, self._retention_work):
            if work is not None:
                await asyncio.gather(work, return_exceptions=True)
        await self.election.resign()
        await self.pool.aclose()

    # ------------------------------------------------------------------ status

    @property
    def elected(self) -> bool:
        return self.election.elected

    def status(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "elected": self.elected,
            "last_audit": None if self.last_audit is None else self.last_audit.to_api(),
            "audit_running": self.audit_running,
            "last_retention": None if self.last_retention is None else self.last_retention.to_api(),
        }

    async def refresh_gauges(self) -> None:
        """Count the marks now (the under-replicated gauge is never a stale counter), and
        the bookies by state from the watches."""
        self.metrics.elected.set(1 if self.elected else 0)
        decommissioned = [b for b, s in self.decommissions.items() if s == DECOMMISSIONED]
        counts = bookie_counts(
            self.registry.bookies.keys(), self.registry.writable, self.cookies, decommissioned
        )
        for state, count in counts.items():
            self.metrics.bookies.labels(state).set(count)
        if self.store.state == KazooState.CONNECTED:
            try:
                async with asyncio.timeout(COUNT_TIMEOUT_S):
                    count = await self.underreplication.count()
            except (QuireError, TimeoutError) as exc:
                log.debug("cannot count the marks: %r", exc)
            else:
                self.metrics.underreplicated.set(count)

    # ------------------------------------------------------------------ events

    def request(self, kind: str) -> None:
        """Ask for a check (done by the elected auditor only)."""
        self._pending.add(kind)
        self._kick.set()

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._bookies_changed.set()

    def _on_elected(self, elected: bool) -> None:
        self.metrics.elected.set(1 if elected else 0)
        if elected:
            self._pending.add(FULL)  # catch up on whatever happened without a leader
            self._kick.set()
            if self._work is None or self._work.done():
                self._work = asyncio.create_task(self._run_work(), name="auditor-work")
            if self._retention_work is None or self._retention_work.done():
                self._retention_work = asyncio.create_task(
                    self._run_retention(), name="auditor-retention"
                )
        else:
            self._stop_work()

    def _stop_work(self) -> None:
        if self._work is not None and not self._work.done():
            self._work.cancel()
        if self._retention_work is not None and not self._retention_work.done():
            self._retention_work.cancel()
        self.audit_running = False

    # ------------------------------------------------------------------ retention

    async def retention_now(self) -> RetentionReport:
        """Run a retention pass now (after the one running, if any) and answer its
        report; ``Unavailable`` when this auditor is not the elected one."""
        if not self.elected or self._retention_work is None or self._retention_work.done():
            raise Unavailable(f"auditor {self.id} is not the elected auditor")
        if self._retention_done is None or self._retention_done.done():
            self._retention_done = asyncio.get_running_loop().create_future()
        done = self._retention_done
        self._retention_kick.set()
        return await asyncio.shield(done)

    async def _run_retention(self) -> None:
        """Retention passes while elected: one at once, then every interval or request."""
        interval_s = self.settings.retention_interval
        try:
            while True:
                self._retention_kick.clear()
                waiting, self._retention_done = self._retention_done, None
                try:
                    report = await self.retention.run_pass()
                except NotElected:
                    self.metrics.retention_passes.labels("not_elected").inc()
                    log.info("retention pass stopped: no longer elected")
                    if waiting is not None and not waiting.done():
                        waiting.set_exception(Unavailable("no longer the elected auditor"))
                    return
                except QuireError as exc:
                    self.metrics.retention_passes.labels("failed").inc()
                    log.warning("retention pass failed: %s", exc)
                    if waiting is not None and not waiting.done():
                        waiting.set_exception(exc)
                    await asyncio.sleep(RETENTION_RETRY_S)
                    continue
                except Exception as exc:
                    # Our bug: logged whole, tried again (retention must not stop silently).
                    self.metrics.retention_passes.labels("failed").inc()
                    log.exception("retention pass failed")
                    if waiting is not None and not waiting.done():
                        waiting.set_exception(Unavailable(f"the retention pass failed: {exc!r}"))
                    await asyncio.sleep(RETENTION_RETRY_S)
                    continue
                self.last_retention = report
                self.metrics.retention_passes.labels("done").inc()
                self.metrics.retention_pass_duration.observe(report.duration_s)
                if waiting is not None and not waiting.done():
                    waiting.set_result(report)
                try:
                    async with asyncio.timeout(interval_s):
                        await self._retention_kick.wait()
                except TimeoutError:
                    pass
        finally:
            if self._retention_done is not None and not self._retention_done.done():
                self._retention_done.set_exception(Unavailable("no longer the elected auditor"))

    def _on_cookies(self, children: list[str]) -> None:
        self.cookies = set(children)
        self._bookies_changed.set()

    def _decommissioning(self) -> bool:
        return any(state == DECOMMISSIONING for state in self.decommissions.values())

    def _refresh_decommissions(self) -> None:
        async def refresh() -> None:
            try:
                self.decommissions = await self.underreplication.decommissions()
            except QuireError as exc:
                log.warning("cannot read the decommission nodes: %s", exc)
                return
            if any(s == DECOMMISSIONING for s in self.decommissions.values()):
                self.request(PLACEMENT)

        self._tasks.append(asyncio.create_task(refresh(), name="auditor-decommissions"))
        self._tasks = [t for t in self._tasks if not t.done()]

    # ------------------------------------------------------------------ bookie watch

    async def _track_bookies(self) -> None:
        """Feed the registry into the watch; ask for a placement check when a bookie
        has been gone for the delay (and is still gone), or is registered again as a new
        instance (formatted)."""
        while True:
            self._bookies_changed.clear()
            now = wall_ms()
            if self.store.state == KazooState.CONNECTED:
                known = self.cookies | self.named
                self.watch.observe(self.registry.bookies.keys(), known, now)
                fresh = self.watch.newly_lost(now)
                racks = frozenset(rack_counts(self.registry.racks))
                if racks - self.racks_seen and self.racks_seen:
                    # A rack is back (or new): placement moves may help now.
                    log.info("racks registered: %s", sorted(racks - self.racks_seen))
                    self.request(PLACEMENT)
                self.racks_seen = racks
                renewed = self.instances.renewed(self.registry.instances)
                if renewed:
                    log.info("bookies registered as new instances (formatted): %s", renewed)
                    self.request(PLACEMENT)
                if fresh:
                    log.info("bookies lost (gone for %.1f s): %s", self.settings.lost_bookie_delay,
                             sorted(fresh))  # fmt: skip
                    if self.elected:
                        self.metrics.bookies_lost.inc(len(fresh))
                    self.request(PLACEMENT)
            deadline = self.watch.next_deadline_ms(now)
            wait_s = None if deadline is None else max(0.0, (deadline - now) / 1000) + 0.01
            try:
                async with asyncio.timeout(wait_s):
                    await self._bookies_changed.wait()
            except TimeoutError:
                pass

    # ------------------------------------------------------------------ the work

    async def _run_work(self) -> None:
        interval_s = self.settings.audit_interval
        next_full = time.monotonic() + interval_s
        next_recheck = time.monotonic() + DECOMMISSION_RECHECK_S
        try:
            while True:
                self._kick.clear()
                now = time.monotonic()
                if now >= next_full:
                    self._pending.add(FULL)
                # While a bookie is being decommissioned, re-check placement now and
                # then, so that it turns "decommissioned" soon after the workers moved
                # its last fragment (nothing else would wake the auditor then).
                if self._decommissioning() and now >= next_recheck:
                    self._pending.add(PLACEMENT)
                if not self._pending:
                    wake = next_full
                    if self._decommissioning():
                        wake = min(wake, next_recheck)
                    try:
                        async with asyncio.timeout(max(0.0, wake - now)):
                            await self._kick.wait()
                    except TimeoutError:
                        pass
                    continue
                kind = FULL if FULL in self._pending else PLACEMENT
                self._pending.clear()  # a full check covers a placement one
                ok = await self._audit(kind)
                took = self.last_audit.duration_s if self.last_audit is not None else 0.0
                next_recheck = time.monotonic() + max(DECOMMISSION_RECHECK_S, 2 * took)
                if kind == FULL and ok:
                    next_full = time.monotonic() + interval_s
                if not ok:
                    self._pending.add(kind)
                    await asyncio.sleep(FAILED_AUDIT_RETRY_S)
        finally:
            self.audit_running = False

    async def _audit(self, kind: str) -> bool:
        """Run one check; False when it failed (it is retried)."""
        now = wall_ms()
        self.watch.observe(self.registry.bookies.keys(), self.cookies | self.named, now)
        try:
            self.decommissions = await self.underreplication.decommissions()
        except QuireError as exc:
            log.warning("audit postponed: %s", exc)
            return False
        decommissioning = frozenset(
            b for b, s in self.decommissions.items() if s == DECOMMISSIONING
        )
        # Placement treats a decommissioned bookie as one being decommissioned: a gateway
        # that chose it before it saw the request, and wrote its metadata after the walk
        # that completed the decommission, gets its fragment moved off (see
        # ``_finish_decommissions``).
        view = AuditView(
            registered=frozenset(self.registry.bookies),
            lost=frozenset(self.watch.lost(now)),
            decommissioning=frozenset(self.decommissions),
            racks=self.registry.racks,
            writable=frozenset(self.registry.writable),
            instances=self.registry.instances,
        )
        checker = None
        if kind == FULL:
            checker = ReplicaChecker(
                self.pool,
                self.registry.address_of,
                self.settings.audit_verify,
                self.settings.audit_concurrency,
            )
        audit = Audit(
            kind,
            self.ledgers,
            self.underreplication,
            view,
            self.election.confirm,
            checker,
            self.settings.audit_concurrency,
            on_marked=self.metrics.ledgers_marked.inc,
        )
        self.audit_running = True
        try:
            report = await audit.run()
        except NotElected:
            self.metrics.audits.labels(kind, "not_elected").inc()
            log.info("%s check stopped: no longer elected", kind)
            return True
        except QuireError as exc:
            self.metrics.audits.labels(kind, "failed").inc()
            log.warning("%s check failed: %s", kind, exc)
            return False
        except Exception:
            # Our bug, not the world's: logged whole, and the check is retried (the
            # auditor must never stop auditing silently).
            self.metrics.audits.labels(kind, "failed").inc()
            log.exception("%s check failed", kind)
            return False
        finally:
            self.audit_running = False
        self.metrics.audits.labels(kind, "completed").inc()
        self.metrics.audit_duration.labels(kind).observe(report.duration_s)
        self.metrics.bookies_skipped.inc(len(report.bookies_skipped))
        self.metrics.marks_cleared.inc(report.cleared)
        self.named = report.named
        self.metrics.placement_violations.set(report.placement.violations)
        try:
            await self.underreplication.set_placement_report(
                report.placement.to_api(report.finished_at_ms)
            )
        except QuireError as exc:
            log.warning("cannot write the placement report: %s", exc)
        self._bookies_changed.set()
        log.info("%s check: %s", kind, report.to_api())
        try:
            await self._finish_decommissions(decommissioning, report)
        except QuireError as exc:
            # The states are written again by the retried check; the work loop must
            # outlive a ZooKeeper error here as it does one in the walk.
            log.warning("cannot write the decommission states of the %s check: %s", kind, exc)
            return False
        # Published last, so that a check the status shows as ended has had its
        # consequences (decommission states included) written.
        self.last_audit = report
        return True

    async def _finish_decommissions(
        self, decommissioning: frozenset[str], report: AuditReport
    ) -> None:
        """Decommissioning bookies no fragment names are decommissioned; decommissioned
        ones a fragment names again are decommissioning again.

        Ordering. The walk that completes a decommission reads the ledgers after it read
        the request, so it sees every fragment written before the request; but a gateway
        whose registry had not yet seen the request may have chosen the bookie and write
        its metadata after that walk. A later check sees such a fragment (placement
        treats decommissioned bookies as decommissioning ones): the bookie is
        decommissioning again, and its ledgers are marked and moved off it (read from it
        while it runs) before it is decommissioned again."""
        done = decommission_done(decommissioning, report.named)
        again = {
            b for b, s in self.decommissions.items() if s == DECOMMISSIONED and b in report.named
        }
        if not (done or again):
            return
        if not await self.election.confirm():
            return
        for bookie in sorted(done):
            await self.underreplication.set_decommissioned(bookie)
            log.info("bookie %s decommissioned: no fragment names it", bookie)
        for bookie in sorted(again):
            await self.underreplication.set_decommission_state(bookie, DECOMMISSIONING)
            self.decommissions[bookie] = DECOMMISSIONING  # re-checked until moved off
            log.warning(
                "bookie %s is decommissioning again: a fragment written after it was "
                "decommissioned names it (a gateway had not seen the request)",
                bookie,
            )
