"""OPEN ledgers whose LAST fragment names a missing bookie (docs/protocol.md, "Auto-recovery").

Only the writer, or a recovery that fences it, may settle an open-ended fragment: a
copy swapped in under a live writer could miss the entries it adds next. So the
worker postpones such a ledger until ``--open-ledger-grace`` after the last
fragment's missing bookie was first seen missing (``MissingSince``); then, if the
last fragment still names a missing bookie (a writer that keeps writing replaces the
bookie itself by an ensemble change), it recovers the ledger (fences and closes it)
with the ledger client's recovery, the one the gateway runs (``Recoveries`` of
services/ledger_client/handles.py, over a ``LedgerClientContext`` built here), and the
ledger is copied as a CLOSED one. The client runs with its default bounds, but asks
another replica after at most the worker's bookie time-out; its metrics are exposed
nowhere: the worker counts the recoveries it runs (``quire_replicator_recoveries_total``,
replicator/repair.py).

The grace never runs from the mark's ``marked_at``: a mark keeps its first time when
bookies are merged into it, and a fragment bookie that is merely unregistered this
instant (restarting) is missing to the worker without being in the mark at all, so
an hour-old mark for an earlier fragment would leave a healthy writer no grace.

The digest key. A crc32c or none ledger needs none. An hmac ledger's metadata keeps
its MAC key sealed with the cluster secret (``services.wire.digest.seal_mac_key``);
the password is never stored. A recovery with a wrong key would take every entry for
corrupt and could close the ledger short, so the key is first checked against a
stored entry (``key_fits``); an hmac ledger without a sealed key (written before
keys were sealed) is never recovered here: its writer or a user must recover it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection

from replicator.limits import KEY_CHECK_ENTRIES_MAX, LEGACY_LOGGED_MAX, MISSING_TRACKED_MAX
from services.bookie_client import BookieClientPool
from services.errors import QuireError, Unavailable
from services.ledger_client.context import LedgerClientContext
from services.ledger_client.handles import Recoveries
from services.ledger_client.metrics import LedgerClientMetrics
from services.ledger_client.settings import LedgerClientSettings
from services.protocol.metadata import LedgerMetadata
from services.settings import ReplicatorSettings
from services.wire.digest import record_ok, unseal_mac_key
from services.zk.ledger_store import LedgerStore
from services.zk.registry import BookieRegistry

log = logging.getLogger(__name__)

_legacy_logged: set[int] = set()


def digest_key(metadata: LedgerMetadata, cluster_secret: str | None) -> bytes | None:
    """The key that verifies the ledger's digests: b"" unless hmac; for hmac the unsealed
    MAC key, or None when the metadata has no sealed key (logged once per ledger)."""
    if metadata.digest_type != "hmac-sha256":
        return b""
    if metadata.mac_key_sealed is None:
        if metadata.ledger_id not in _legacy_logged:
            if len(_legacy_logged) >= LEGACY_LOGGED_MAX:
                _legacy_logged.clear()
            _legacy_logged.add(metadata.ledger_id)
            log.warning(
                "ledger %d is hmac-sha256 without a sealed MAC key (written before keys were "
                "sealed): its entries are copied checking only the record checksum",
                metadata.ledger_id,
            )
        return None
    try:
        return unseal_mac_key(metadata.mac_key_sealed, cluster_secret, metadata.ledger_id)
    except ValueError:
        log.warning("ledger %d: the sealed MAC key does not unseal", metadata.ledger_id)
        return None


class MissingSince:
    """When this worker first saw each bookie missing (wall-clock ms), since it last saw
    it available.

    Two sources feed it: the bookie registry (``observe``, on every change: a bookie
    that stops being registered and not decommissioning is missing from then on, one
    that becomes so again is not), and the repair rounds (``missing`` for a bookie a
    round finds unavailable, which records now unless known earlier; ``back`` for one
    that answers), for a killed bookie stays registered until its session expires and
    one gone before the worker started was never seen leaving. A worker that starts,
    or forgets, only ever waits longer: the grace is a least wait, never a deadline.
    """

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.now_ms = now_ms
        self._since: dict[str, int] = {}
        self._available: set[str] = set()

    def observe(self, available: Collection[str]) -> None:
        """The registry changed; ``available``: registered and not decommissioning."""
        current = set(available)
        now = self.now_ms()
        for bookie in self._available - current:
            self._since.setdefault(bookie, now)
        for bookie in current - self._available:
            self._since.pop(bookie, None)
        self._available = current
        self._bound()

    def missing(self, bookie: str) -> int:
        """``bookie`` is unavailable now: since when it has been (recorded now if new)."""
        since = self._since.setdefault(bookie, self.now_ms())
        self._bound()
        return since

    def back(self, bookie: str) -> None:
        """``bookie`` answers: a later absence starts a new grace."""
        self._since.pop(bookie, None)

    def _bound(self) -> None:
        """Forget the oldest beyond ``MISSING_TRACKED_MAX`` (forgetting only delays)."""
        while len(self._since) > MISSING_TRACKED_MAX:
            del self._since[min(self._since, key=self._since.__getitem__)]


class OpenLedgers:
    """Recovers (fences and closes) open ledgers with the ledger client's recovery."""

    def __init__(
        self,
        settings: ReplicatorSettings,
        ledgers: LedgerStore,
        registry: BookieRegistry,
        bookies: BookieClientPool,
        rng: random.Random,
    ) -> None:
        self.cluster_secret = settings.cluster_secret
        speculative_read_ms = min(
            LedgerClientSettings().speculative_read_ms, settings.bookie_request_timeout_ms
        )
        self.ctx = LedgerClientContext(
            settings=LedgerClientSettings(speculative_read_ms=speculative_read_ms),
            ledgers=ledgers,
            registry=registry,
            bookies=bookies,
            metrics=LedgerClientMetrics(None, "replicator"),
            rng=rng,
        )
        self.recoveries = Recoveries(self.ctx)

    async def recover(self, metadata: LedgerMetadata, version: int) -> LedgerMetadata:
        """Fence and close the ledger; its CLOSED metadata."""
        key = digest_key(metadata, self.cluster_secret)
        if key is None:
            raise Unavailable(
                f"ledger {metadata.ledger_id} is hmac-sha256 without a sealed MAC key: "
                "the worker cannot recover it (recover it through the gateway)"
            )
        if key and not await self.key_fits(metadata, key):
            raise Unavailable(
                f"ledger {metadata.ledger_id}: the unsealed MAC key verifies no stored entry "
                "(is --cluster-secret the gateway's?); not recovering it"
            )
        log.info("recovering open ledger %d (its last fragment lost a bookie)", metadata.ledger_id)
        closed, _ = await self.recoveries.recover(metadata, version, key)
        return closed

    async def key_fits(self, metadata: LedgerMetadata, key: bytes) -> bool:
        """True when some stored entry of the first fragment verifies with ``key``, or
        when no replica answers with an intact entry (nothing to contradict it)."""
        seen_intact = False
        for bookie in metadata.fragments[0].bookies:
            try:
                answer = await self.ctx.bookie(bookie).read_range(
                    metadata.ledger_id, 0, KEY_CHECK_ENTRIES_MAX - 1, KEY_CHECK_ENTRIES_MAX
                )
            except QuireError:
                continue
            for record in answer.records:
                if not record.transit_ok or record.ledger_id != metadata.ledger_id:
                    continue
                if record_ok(record, key):
                    return True
                seen_intact = True
        return not seen_intact
