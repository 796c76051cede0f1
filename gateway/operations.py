"""Ledger operations behind the routes: create, add, close, recover, read, delete.

Routes parse and answer; this module holds what the operations do with the
context (metadata store, write handles, recoveries, bookies).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from gateway.passwords import check_password, new_password_hash
from gateway.service import Gateway
from services.clock import wall_ms
from services.errors import (
    LedgerNotFound,
    NotWriter,
    QuireError,
)
from services.ledger_client.runners import read as reads
from services.ledger_client.runners.write import AddOutcome, HandleRunner
from services.protocol import placement, quorum
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key, readable_end
from services.wire.digest import mac_key, seal_mac_key

log = logging.getLogger(__name__)


async def create_ledger(
    gw: Gateway,
    ensemble_size: int,
    write_quorum: int,
    ack_quorum: int,
    digest_type: str,
    password: str | None,
    custom: Mapping[str, Any],
) -> HandleRunner:
    """Choose an ensemble, write the metadata, and hold the new ledger's write handle."""
    # Validate before touching ZooKeeper: a bad request creates nothing.
    quorum.check_sizes(ensemble_size, write_quorum, ack_quorum)
    writable = gw.ctx.writable_event()
    racks = writable.rack_map()
    placed = placement.choose_ensemble(
        writable.bookies, ensemble_size, write_quorum, gw.ctx.rng, racks
    )
    ensemble = placed.bookies
    password_hash = await new_password_hash(password) if password is not None else None
    ledger_id = await gw.ctx.ledgers.new_ledger_id()
    metadata = LedgerMetadata.new(
        ledger_id,
        ensemble,
        write_quorum,
        ack_quorum,
        digest_type=digest_type,
        password_hash=password_hash,
        custom=custom,
        created_at=wall_ms(),
        # Which instance of each bookie the fragment is written to (recovery.py).
        instances=writable.instance_map(),
        # Replication workers verify the entries they copy with it (``metadata.py``).
        mac_key_sealed=(
            seal_mac_key(mac_key(password.encode()), gw.settings.cluster_secret, ledger_id)
            if digest_type == "hmac-sha256" and password is not None
            else None
        ),
    )
    created = await gw.ctx.ledgers.create(metadata)
    if not placed.spread:
        gw.ctx.warn_unspread(created.metadata)
    return gw.handles.open(created.metadata, created.version, digest_key(metadata, password))


async def metadata_for(
    gw: Gateway, ledger_id: int, password: str | None, check: bool = True
) -> LedgerMetadata:
    """The ledger's metadata for a read, after checking the password (401) when
    ``check``: this gateway's write handle's, else the kept or current copy
    (``MetadataCache.ledger``)."""
    runner = gw.handles.get(ledger_id)
    if runner is not None and runner.live:
        metadata = runner.metadata
    else:
        metadata = await gw.metadata.ledger(ledger_id)
    if check:
        await check_password(password, metadata.password_hash)
    return metadata


def api_object(gw: Gateway, metadata: LedgerMetadata) -> dict[str, Any]:
    """The docs/api.md ledger object; an open ledger's length is exact on its writer."""
    out = metadata.to_api()
    runner = gw.handles.get(metadata.ledger_id)
    if runner is not None and runner.live and metadata.state is LedgerState.OPEN:
        out["length"] = runner.length
    return out


async def writer_for(gw: Gateway, ledger_id: int, password: str | None) -> HandleRunner:
    """This gateway's write handle of the ledger (after the password check), or 409/404."""
    runner = gw.handles.get(ledger_id)
    if runner is None:
        metadata = (await gw.ctx.ledgers.get(ledger_id)).metadata
        await check_password(password, metadata.password_hash)
        raise NotWriter(f"this gateway does not hold the write handle of ledger {ledger_id}")
    await check_password(password, runner.metadata.password_hash)
    return runner


async def add(
    gw: Gateway, ledger_id: int, password: str | None, payloads: tuple[bytes, ...]
) -> AddOutcome:
    runner = await writer_for(gw, ledger_id, password)
    return await (await submit_add(gw, runner, payloads))


async def submit_add(
    gw: Gateway, runner: HandleRunner, payloads: tuple[bytes, ...]
) -> asyncio.Future[AddOutcome]:
    """Submit an add to ``runner`` (``HandleRunner.submit``: admitted and fed, its
    outcome's future not awaited), counted: ``GatewayMetrics.add_began`` now and
    ``add_ended`` once its outcome is known, a refusal at admission included. Every add
    (REST, fast path, stream) goes through here, so each is counted once, the same way."""
    metrics = gw.metrics
    started = metrics.add_began(len(payloads))
    try:
        added = await runner.submit(payloads)
    except QuireError as exc:
        metrics.add_ended(len(payloads), started, exc)
        raise

    def ended(future: asyncio.Future[AddOutcome]) -> None:
        if not future.cancelled():
            metrics.add_ended(len(payloads), started, future.exception())

    added.add_done_callback(ended)
    return added


async def close(gw: Gateway, ledger_id: int, password: str | None) -> dict[str, Any]:
    runner = await writer_for(gw, ledger_id, password)
    if not runner.live and runner.closed_metadata is not None:
        return runner.closed_metadata.to_api()
    metadata, _ = await runner.close()
    return metadata.to_api()


async def recover(gw: Gateway, ledger_id: int, password: str | None) -> dict[str, Any]:
    current = await gw.ctx.ledgers.get(ledger_id)
    await check_password(password, current.metadata.password_hash)
    if current.metadata.state is LedgerState.CLOSED:
        metadata = current.metadata
    else:
        metadata, _ = await gw.recoveries.recover(
            current.metadata, current.version, digest_key(current.metadata, password)
        )
    # A write handle of a closed ledger is stale, however it got closed (here, or by a
    # recovery elsewhere while the handle hung): fence it, so reads here see the close.
    gw.handles.recovered(ledger_id)
    return metadata.to_api()


async def delete(
    gw: Gateway,
    ledger_id: int,
    password: str | None,
    unless_changed: tuple[str, int] | None = None,
) -> None:
    """Delete the metadata first (no new reader finds the ledger), then the entries on
    every bookie that stores a fragment. A bookie that is down keeps its copy until its
    garbage collection finds the metadata gone (bookie/collector.py); that is logged,
    not an error. With ``unless_changed`` (a znode and
    its version: the ledger's log, checked not to list it) the metadata is deleted only
    while that znode is unchanged (``MetadataConflict`` otherwise, nothing deleted).
    Once the metadata is deleted this gateway serves the ledger no more
    (``MetadataCache.forget``)."""
    metadata = (await gw.ctx.ledgers.get(ledger_id)).metadata
    await check_password(password, metadata.password_hash)
    await gw.ctx.ledgers.delete(ledger_id, unless_changed)
    gw.metadata.forget(ledger_id)
    runner = gw.handles.get(ledger_id)
    gw.handles.forget(ledger_id)
    if runner is not None:
        # Its adds and long polls (a tailing reader's LAC wait) answer 404 now, not at
        # their time-outs.
        await runner.aclose(LedgerNotFound(f"ledger {ledger_id} was deleted"))

    async def delete_on(bookie: str) -> None:
        try:
            await gw.ctx.bookie(bookie).delete_ledger(ledger_id)
        except LedgerNotFound:
            pass
        except QuireError as exc:
            log.warning(
                "could not delete a ledger's entries on a bookie",
                extra={"fields": {"ledger_id": ledger_id, "bookie": bookie, "error": exc.code}},
            )

    await asyncio.gather(*(delete_on(b) for b in metadata.bookies()))


async def lac(gw: Gateway, metadata: LedgerMetadata, after: int | None, wait_ms: int) -> int:
    """The ledger's LAC: a CLOSED ledger's end; this gateway's write handle's; else the
    bookies'. With ``after``, waits up to ``wait_ms`` for one past it, unless the
    gateway's shutdown began, then answers what it has at once (gateway/stopping.py)."""
    closed_end = readable_end(metadata, None)
    if closed_end is not None:
        return closed_end
    runner = gw.handles.live(metadata.ledger_id)
    if after is None or wait_ms <= 0:
        return runner.lac if runner is not None else await reads.bookies_lac(gw.ctx, metadata)
    stopping = gw.stopping
    if runner is not None:
        if runner.lac > after:
            return runner.lac
        with stopping:  # a long poll waiting
            return await runner.wait_lac(after, wait_ms / 1000, until=lambda: stopping.began)
    with stopping:
        waited = await stopping.unless_stopping(
            reads.wait_bookies_lac(gw.ctx, metadata, after, wait_ms)
        )
    if waited is None:
        return await reads.bookies_lac(gw.ctx, metadata)
    if waited.known_nowhere:
        # No bookie knows the ledger: nothing written to it yet, or deleted while the poll
        # waited (its bookies end their polls then); ZooKeeper tells which (404, and the
        # kept copy is dropped). Any other failure to ask leaves the answer as it was.
        try:
            await gw.metadata.current(metadata.ledger_id)
        except LedgerNotFound:
            raise
        except QuireError:
            pass
    return waited.lac
