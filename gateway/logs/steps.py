"""Carry out the effects of the log operations (``services/protocol/log_writer.py``):
read and CAS the log's znode, fence and recover ledgers, create and delete ledgers.

The operation decides; this module only does the I/O and feeds the answer back
(docs/style.md §1), one effect at a time, until the operation ends with ``Acquired``,
``Rolled`` or ``Failed`` (raised as its error).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from gateway import operations as ops
from gateway.limits import SETTLE_POLL_FIRST_S, SETTLE_POLL_MAX_S
from services.errors import (
    LedgerNotFound,
    LogNotFound,
    MetadataConflict,
    MetadataUnavailable,
    QuireError,
    present,
)
from services.protocol import log_writer as lw
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key
from services.zk.log_store import LogStore

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway

log = logging.getLogger(__name__)

# Ledgers of a log carry its name in their custom metadata (operators see whose it is).
LOG_METADATA_KEY = "quire.log"
# The ledgers a log writer makes for itself (taking the role, rolling) also carry this
# key (the gateway that made it): their entries are appends the gateway stamped as it
# made them, after the ledger joined the log, so the idempotency window's rebuild trusts
# their time stamps (``rebuild.tail_kind``). A ledger attached to a log (written
# elsewhere, e.g. by a Spark task) does not carry it.
WRITER_METADATA_KEY = "quire.log.writer"
# ``closed_end`` of a ledger that no longer exists (truncated away or deleted with its
# log): whatever it held can no longer be told.
LEDGER_GONE = -2

Operation = lw.AcquireWriter | lw.RollLog


async def run(
    gw: Gateway, logs: LogStore, op: Operation, effects: list[lw.Effect]
) -> lw.Acquired | lw.Rolled | lw.Attached:
    """Run ``op`` from its first ``effects`` to its end."""
    pending = list(effects)
    while pending:
        effect = pending.pop(0)
        if isinstance(effect, lw.Acquired | lw.Rolled | lw.Attached):
            return effect
        if isinstance(effect, lw.Failed):
            raise effect.exception()
        if isinstance(effect, lw.DeleteLedger):
            _spawn_delete(gw, effect.ledger_id)
            continue
        event = await _carry_out(gw, logs, op, effect)
        pending.extend(op.handle(event))
    raise QuireError(f"log operation on {op.name} ended without an answer")


async def _carry_out(gw: Gateway, logs: LogStore, op: Operation, effect: lw.Effect) -> lw.Event:
    try:
        if isinstance(effect, lw.ReadLog):
            try:
                current = await logs.get(effect.name)
            except LogNotFound:
                return lw.LogRead(None, -1)
            return lw.LogRead(current.log, current.version)
        if isinstance(effect, lw.RecoverLedgers):
            await asyncio.gather(*(close_for_good(gw, lid) for lid in effect.ledger_ids))
            return lw.LedgersRecovered()
        if isinstance(effect, lw.CreateLedger):
            runner = await ops.create_ledger(
                gw,
                effect.ensemble_size,
                effect.write_quorum,
                effect.ack_quorum,
                "crc32c",
                None,
                {LOG_METADATA_KEY: op.name, WRITER_METADATA_KEY: gw.settings.address},
            )
            return lw.LedgerCreated(runner.ledger_id)
        if isinstance(effect, lw.WriteLog):
            try:
                written = await logs.compare_and_set(effect.log, effect.version)
            except MetadataConflict:
                return lw.LogConflict()
            except LogNotFound:
                return lw.LogRead(None, -1)
            except MetadataUnavailable:
                return lw.LogWriteUnknown()
            return lw.LogWritten(written.version)
        if isinstance(effect, lw.Wait):
            await asyncio.sleep(effect.ms / 1000)
            return lw.Waited()
    except QuireError as exc:
        return lw.StepFailed(type(exc), exc.message)
    raise QuireError(f"unexpected log effect {effect!r}")


async def close_for_good(gw: Gateway, ledger_id: int) -> LedgerMetadata | None:
    """Make ledger ``ledger_id`` CLOSED: closed by its writer when that is this gateway
    (its pending adds finish first), else fenced and recovered. Its CLOSED metadata, or
    None when it was deleted (nothing left to fence)."""
    runner = gw.handles.live(ledger_id)
    if runner is not None:
        try:
            metadata, _ = await runner.close()
            return metadata
        except QuireError as exc:
            log.info(
                "closing a log ledger failed; recovering it",
                extra={"fields": {"ledger_id": ledger_id, "error": exc.code}},
            )
    try:
        current = await gw.ctx.ledgers.get(ledger_id)
    except LedgerNotFound:
        return None
    if current.metadata.state is LedgerState.CLOSED:
        return current.metadata
    metadata, _ = await gw.recoveries.recover(
        current.metadata, current.version, digest_key(current.metadata, None)
    )
    return metadata


async def closed_end(gw: Gateway, ledger_id: int) -> int | None:
    """The last entry of the ledger once CLOSED (-1: closed empty), waiting up to
    ``log_settle_timeout_ms`` (polling with back-off); None when it is not closed by
    then, ``LEDGER_GONE`` when the ledger no longer exists. Gone is not "empty": a ledger
    truncated away may have held the entries asked about, so an append whose outcome
    hangs on it stays unknown for good (never "not in the log", never appended again)."""
    deadline = time.monotonic() + gw.settings.log_settle_timeout_ms / 1000
    delay = SETTLE_POLL_FIRST_S
    while True:
        try:
            metadata = (await gw.ctx.ledgers.get(ledger_id)).metadata
        except LedgerNotFound:
            return LEDGER_GONE
        except QuireError:
            metadata = None
        if metadata is not None and metadata.state is LedgerState.CLOSED:
            return present(metadata.last_entry_id, "a CLOSED ledger has a last entry")
        if time.monotonic() + delay > deadline:
            return None
        await asyncio.sleep(delay)
        delay = min(delay * 2, SETTLE_POLL_MAX_S)


def _spawn_delete(gw: Gateway, ledger_id: int) -> None:
    async def delete() -> None:
        try:
            await ops.delete(gw, ledger_id, None)
        except QuireError as exc:
            log.warning(
                "could not delete an unused log ledger",
                extra={"fields": {"ledger_id": ledger_id, "error": exc.code}},
            )

    task = asyncio.get_running_loop().create_task(delete())
    _background.add(task)
    task.add_done_callback(_background.discard)


_background: set[asyncio.Task[None]] = set()
