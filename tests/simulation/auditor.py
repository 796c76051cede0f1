"""The simulated auditor (docs/protocol.md, "Auto-recovery"; issue 8 "Auditor"): marks the
ledgers a lost bookie leaves under-replicated, and audits every ledger periodically.

- Bookie registry: the world tells it when a bookie goes down and comes back
  (``down_since``). A bookie still down ``lost_bookie_delay_ms`` after it went
  (and not back meanwhile) makes it mark every ledger with a fragment on that bookie
  (the open last fragment included), naming the bookie. A bookie back in time
  causes nothing.
- Periodic audit, every ``audit_interval_ms``: for each ledger, the bookies of its
  fragments gone for the delay, and the bookies that lack an entry of their share
  in a fragment whose entries are settled (every fragment of a CLOSED ledger, the
  non-last ones of another), asked in bulk over the simulated network (one request
  per bookie and ledger: which entries it stores, as the bookie's ranges endpoint
  answers). Those are marked (merged into the mark). A ledger found whole, whose
  every answer came and whose metadata is still the version checked, has its mark
  cleared if every bookie the mark names is up now and was found whole: under the
  ledger's lock, as only a lock holder deletes marks
  (``marks``: ZooKeeper versions restart at 0, so a delete guarded by a version read
  before another party's delete and re-create could remove a newer mark).
- The clean-up, as auditor/audit.py does it: take the lock (its session's), read the
  mark and the metadata again (a round trip), delete the mark only while the session
  still holds the lock, and release the lock only while the session owns it, at the
  version read. Its session may end during the round trip (``auditor_session_end_p``):
  the lock goes with it, a worker may take the ledger meanwhile, and the auditor, with
  a new session, must touch neither that worker's lock nor the mark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.replication import entries_on, spans
from tests.simulation.calls import bookie_call

if TYPE_CHECKING:
    from tests.simulation.scenario import LedgerSim, Simulation

AUDITOR = "auditor"
# The fix of issue 35 item 10, switched off by the tests that show the checker catches
# its absence: the clean-up deletes the mark only while its session holds the lock, and
# releases only its session's lock (not whatever lock is there, as it did).
CLEAR_CHECKS_OWNER = True
RELEASE_CHECKS_OWNER = True


def settled_shares(md: LedgerMetadata) -> dict[str, set[int]]:
    """Every bookie's share of the settled fragments (all of a CLOSED ledger, the
    non-last ones of another): the entries it must store."""
    out: dict[str, set[int]] = {}
    closed = md.state is LedgerState.CLOSED
    e, w = md.ensemble_size, md.write_quorum
    for span in spans(md):
        if span.last is None and not closed:
            continue  # the open last fragment: it may still grow
        last = span.last if span.last is not None else span.first - 1
        for index, bookie in enumerate(span.bookies):
            out.setdefault(bookie, set()).update(entries_on(span.first, last, index, e, w))
    return out


class Auditor:
    def __init__(self, world: Simulation) -> None:
        self.world = world
        self.plan = world.config.autorecovery
        self.stopped = False
        self.session = world.marks.new_session()
        # ledger id -> (metadata version, bookie events) when an audit last found it whole:
        # in the simulation nothing else removes a replica (the real auditor has no such
        # shortcut; here it saves steps)
        self._whole: dict[int, tuple[int, int]] = {}

    @property
    def delay_ms(self) -> int:
        return self.plan.lost_bookie_delay_ms

    def start(self) -> None:
        self.world.scheduler.after(self.plan.audit_interval_ms, self._audit_all)

    def gone(self, bookie: str) -> bool:
        """Whether the registry has missed ``bookie`` for the lost-bookie delay."""
        since = self.world.down_since.get(bookie)
        return since is not None and since <= self.world.scheduler.now - self.delay_ms

    # ------------------------------------------------------------------ registry events

    def on_bookie_down(self, bookie: str) -> None:
        since = self.world.down_since[bookie]
        self.world.scheduler.after(self.delay_ms, lambda: self._still_down(bookie, since))

    def _still_down(self, bookie: str, since: int) -> None:
        if self.stopped or self.world.down_since.get(bookie) != since:
            return  # back within the delay (or down again since: that event decides)
        sched, net = self.world.scheduler, self.world.network
        sched.after(net.delay(), lambda: self._mark_ledgers_on(bookie))

    def _mark_ledgers_on(self, bookie: str) -> None:
        marked = False
        for ledger in self.world.ledgers:
            md = ledger.cell.read(AUDITOR)[0]
            if any(bookie in f.bookies for f in md.fragments):
                self._mark(ledger, frozenset([bookie]), "bookie gone")
                marked = True
        if marked:
            self.world.wake_workers()

    def _mark(self, ledger: LedgerSim, missing: frozenset[str], why: str) -> None:
        world = self.world
        world.marks.mark(ledger.ledger_id, missing, world.scheduler.now)
        world.stats[f"ledger marked: {why}"] += 1

    # ------------------------------------------------------------------ periodic audit

    def _audit_all(self) -> None:
        if self.stopped:
            return
        for ledger in self.world.ledgers:
            self._audit(ledger)
        self.world.scheduler.after(self.plan.audit_interval_ms, self._audit_all)

    def _audit(self, ledger: LedgerSim) -> None:
        world = self.world
        md, version = ledger.cell.read(AUDITOR)
        events = world.bookie_events
        state = (version, events)
        if self._whole.get(ledger.ledger_id) == state and world.marks.get(ledger.ledger_id) is None:
            return  # found whole, and neither its metadata nor any bookie changed since
        gone = frozenset(b for b in md.bookies() if self.gone(b))
        shares = settled_shares(md)
        asked = sorted(b for b in shares if b not in gone)
        answers: dict[str, set[int] | None] = {}
        lid = ledger.ledger_id

        def answered(bookie: str, result: Any) -> None:
            answers[bookie] = set(result) if isinstance(result, list) else None
            if len(answers) == len(asked):
                self._judge(ledger, version, events, gone, shares, answers)

        if not asked:
            self._judge(ledger, version, events, gone, shares, answers)
        for bookie in asked:
            bookie_call(world, AUDITOR, bookie,
                        lambda b, reply: reply(b.stored_ids(lid)),
                        lambda result, b=bookie: answered(b, result))  # fmt: skip

    def _judge(
        self,
        ledger: LedgerSim,
        version: int,
        checked_events: int,
        gone: frozenset[str],
        shares: dict[str, set[int]],
        answers: dict[str, set[int] | None],
    ) -> None:
        if self.stopped:
            return
        world, lid = self.world, ledger.ledger_id
        lacking = frozenset(
            b for b, held in answers.items() if held is not None and not shares[b] <= held
        )
        if lacking:
            ledger.checker.found_lacking |= lacking
            self._mark(ledger, lacking, "replica missing")
        if gone:
            self._mark(ledger, gone, "audit found a bookie gone")
        if lacking or gone:
            world.wake_workers()
            return
        mark = world.marks.get(lid)
        if any(held is None for held in answers.values()):
            return
        if mark is None:
            self._whole[lid] = (version, checked_events)
            return
        if ledger.cell.version != version:
            return  # the metadata changed since it was checked: the next audit decides
        whole = {b for b, held in answers.items() if held is not None}
        if any(b in world.down_since or (b in shares and b not in whole) for b in mark.missing):
            return  # not proven whole now
        owner = self.session
        if not world.marks.create_lock(lid, AUDITOR, owner):
            return  # a worker has it: it clears the mark itself
        sched, net, plan = world.scheduler, world.network, self.plan
        ends_p = plan.auditor_session_end_p
        if ends_p and sched.now < world.config.phase1_ms and world.rng.random() < ends_p:
            sched.after(net.delay(), self._session_ends)
            wait = world.rng.randint(1, 4 * world.faults.delay_max_ms + 20)
            sched.after(
                net.delay() + wait, lambda: self._clear(ledger, owner, version, shares, whole)
            )
        else:
            sched.after(net.delay(), lambda: self._clear(ledger, owner, version, shares, whole))

    def _session_ends(self) -> None:
        """The auditor's session ends (its locks go); it carries on with a new one. The
        workers' periodic walk of the marks may find a ledger it had locked free now."""
        world = self.world
        world.stats["auditor's session ended while it held a lock"] += 1
        world.marks.expire(self.session)
        self.session = world.marks.new_session()
        world.wake_workers()

    def _clear(
        self,
        ledger: LedgerSim,
        owner: int,
        version: int,
        shares: dict[str, set[int]],
        whole: set[str],
    ) -> None:
        """The clean-up's second step, holding the lock (if ``owner`` still does)."""
        world, lid = self.world, ledger.ledger_id
        try:
            mark = world.marks.get(lid)
            if mark is None or any(b in world.down_since for b in mark.missing):
                return
            if ledger.cell.version != version:
                # Changed since it was judged: the next audit decides, as in auditor/audit.py
                # (seed 31983: judged OPEN, then closed before the delete, its now settled
                # fragment naming a wiped bookie that lacks an entry).
                world.stats["auditor's clean-up found the metadata changed"] += 1
                return
            if any(b in shares and b not in whole for b in mark.missing):
                return
            if CLEAR_CHECKS_OWNER and not world.marks.holds(lid, owner):
                world.stats["auditor's clean-up found its lock gone"] += 1
                if world.marks.lock(lid) is not None:
                    world.stats["a worker took the lock the auditor's session lost"] += 1
                return
            if world.marks.clear(lid, mark.version, owner):
                ledger.checker.on_mark_cleared(mark.missing, AUDITOR)
                world.stats["stale mark cleared by the auditor"] += 1
        finally:
            lock = world.marks.lock(lid)
            if lock is not None and (lock.session == owner or not RELEASE_CHECKS_OWNER):
                if lock.session != owner:
                    world.stats["auditor deleted a lock it did not hold"] += 1
                world.marks.delete_lock(lid, lock.version)
