"""A third party swapping a bookie inside a fragment of a CLOSED ledger: what the
replication worker will do (docs/protocol.md, "Auto-recovery").

It reads the metadata, picks a fragment and one of its bookies (one that is gone
for good if there is one), and a healthy bookie outside that fragment's ensemble;
copies every entry of the fragment whose write set holds the old bookie to the new
one (read from another replica whose digest verifies, written with the recovery
flag through the new bookie's write path), and once every copy is stored CASes the
metadata with the bookie swapped in that fragment. If a copy cannot be made or the
CAS loses, it gives up (another worker would try again): nothing changed but some
extra replicas on the new bookie. Readers keep reading meanwhile.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from services.bookie_client import BookieAddResult
from services.protocol.metadata import Fragment, LedgerMetadata, LedgerState
from services.protocol.reads import record_usable
from services.wire.framing import FramedRecord
from tests.simulation.calls import bookie_call

if TYPE_CHECKING:
    from tests.simulation.scenario import LedgerSim

ATTEMPTS_MAX = 60  # tries to find the ledger CLOSED, RETRY_MS apart
RETRY_MS = 50


class Replicator:
    def __init__(self, sim: LedgerSim, name: str) -> None:
        self.sim = sim
        self.name = name
        self.attempts = 0
        self.swapped: tuple[int, str, str] | None = None  # (fragment first id, old, new)

    def start(self) -> None:
        sim = self.sim
        self.attempts += 1
        md, version = sim.cell.read(self.name)
        if md.state is not LedgerState.CLOSED:
            if self.attempts < ATTEMPTS_MAX:
                sim.scheduler.after(RETRY_MS, self.start)
            return
        plan = self._plan(md)
        if plan is None:
            return
        index, old, new = plan
        copies = self._copies(md, index, old)
        if copies is None:
            return  # some entry has no readable replica left: give up
        fragments = list(md.fragments)
        bookies = tuple(new if b == old else b for b in fragments[index].bookies)
        fragments[index] = Fragment(fragments[index].first_entry_id, bookies)
        target = replace(md, fragments=tuple(fragments))
        swap = (fragments[index].first_entry_id, old, new)
        if not copies:
            sim.scheduler.after(sim.network.delay(), lambda: self._cas(target, version, swap))
            return
        records = tuple(r._replace(recovery=True) for r in copies)

        def done(result: Any) -> None:
            if isinstance(result, BookieAddResult) and not result.rejected:
                self._cas(target, version, swap)

        bookie_call(
            sim.world, self.name, new, lambda b, reply: b.submit_add(records, reply), done,
            duplicable=True,
        )  # fmt: skip

    def _plan(self, md: LedgerMetadata) -> tuple[int, str, str] | None:
        sim, rng = self.sim, self.sim.rng
        index = rng.randrange(len(md.fragments))
        ensemble = md.fragments[index].bookies
        gone = [b for b in ensemble if b in sim.lost]
        old = gone[0] if gone else rng.choice(ensemble)
        spares = [
            b.bookie_id
            for b in sim.bookie_list
            if b.up
            and not b.readonly
            and b.bookie_id not in ensemble
            and b.bookie_id not in sim.lost
        ]
        if not spares:
            return None
        return index, old, rng.choice(spares)

    def _copies(self, md: LedgerMetadata, index: int, old: str) -> list[FramedRecord] | None:
        """The fragment's entries whose write set holds ``old``, each read from another
        replica that verifies (None if one has none)."""
        sim = self.sim
        first = md.fragments[index].first_entry_id
        last = md.last_entry_id if md.last_entry_id is not None else -1
        if index + 1 < len(md.fragments):
            last = min(last, md.fragments[index + 1].first_entry_id - 1)
        out: list[FramedRecord] = []
        for entry_id in range(first, last + 1):
            write_set = md.write_set_bookies(entry_id)
            if old not in write_set:
                continue
            found = None
            for bookie in write_set:
                holder = sim.bookies[bookie]
                if bookie == old or bookie in sim.lost or not holder.up:
                    continue
                record = holder.read(md.ledger_id, entry_id)
                if record_usable(record, md, entry_id, sim.key):
                    found = record
                    break
            if found is None:
                return None
            out.append(found)
        return out

    def _cas(self, target: LedgerMetadata, version: int, swap: tuple[int, str, str]) -> None:
        cell = self.sim.cell
        if cell.compare_and_set(target, version):
            self.swapped = swap
            stats = self.sim.world.stats
            stats["bookie swapped in a CLOSED ledger"] += 1
            if (
                target.last_entry_id is not None
                and len(self.sim.reader.entries) <= target.last_entry_id
            ):
                stats["bookie swapped while a reader reads"] += 1
        self.sim.checker.after_metadata_write(self.name)
