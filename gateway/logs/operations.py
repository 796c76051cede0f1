"""Log operations behind the routes that are not appends or reads: create, show,
list, truncate, delete (the writer role and appends are in ``writer``, reads in
``reads``)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from gateway import operations as ledger_ops
from gateway.limits import (
    ATTACH_LEDGERS_MAX,
    DELETES_IN_FLIGHT_MAX,
    LOG_CAS_ATTEMPTS_MAX,
)
from gateway.logs.steps import LOG_METADATA_KEY, WRITER_METADATA_KEY, close_for_good, run
from services.clock import wall_ms
from services.errors import (
    InvalidArgument,
    InvariantViolation,
    LedgerInLog,
    LedgerNotFound,
    LogNotFound,
    MetadataConflict,
    NotWriter,
    QuireError,
)
from services.protocol import log_writer as lw
from services.protocol import retention
from services.protocol.logs import (
    COMMIT_ID,
    LogMetadata,
    Position,
    check_log_name,
    truncation,
)
from services.protocol.metadata import LedgerState
from services.zk import paths as zkpaths
from services.zk.log_store import LogStore, VersionedLog

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.logs.writer import LogWriter
    from gateway.service import Gateway

log = logging.getLogger(__name__)


async def create(
    gw: Gateway,
    name: str,
    ensemble_size: int,
    write_quorum: int,
    ack_quorum: int,
    policy: retention.RetentionPolicy | None = None,
) -> tuple[LogMetadata, bool]:
    """Create log ``name`` unless it exists: (the log, whether it was created). An
    existing log is answered as it is (its ensemble settings and retention policy are
    not changed: ``set_retention`` changes a policy)."""
    check_log_name(name)
    new = LogMetadata(
        name,
        ensemble_size=ensemble_size,
        write_quorum=write_quorum,
        ack_quorum=ack_quorum,
        created_at=wall_ms(),
    )
    stored, created = await gw.logs.logs.create(retention.with_policy(new, policy))
    return stored.log, created


async def set_retention(gw: Gateway, name: str, patch: Any) -> LogMetadata:
    """PATCH /v1/logs/{name}'s ``retention``: the policy changed as a JSON merge patch
    (null: no policy), by compare-and-set (a writer's roll meanwhile is read again)."""
    check_log_name(name)
    for _ in range(LOG_CAS_ATTEMPTS_MAX):
        current = await get(gw, name)
        before = retention.policy_of(current.log)
        if patch is None:
            policy = None
        else:
            policy = (before or retention.RetentionPolicy()).patched(patch)
        if policy == before:
            return current.log
        try:
            stored = await gw.logs.logs.compare_and_set(
                retention.with_policy(current.log, policy), current.version
            )
        except MetadataConflict:
            continue
        log.info(
            "retention policy changed",
            extra={"fields": {"log": name, "policy": policy.to_api() if policy else None}},
        )
        return stored.log
    raise MetadataConflict(f"log {name}: the log kept changing; set its retention again")


async def get(gw: Gateway, name: str) -> VersionedLog:
    check_log_name(name)
    return await gw.logs.logs.get(name)


async def get_for_read(
    gw: Gateway, name: str, tailing: bool = False, current: bool = False
) -> LogMetadata:
    """The log's metadata for a read: ZooKeeper's, or the list this gateway read last
    while ZooKeeper cannot answer (``MetadataCache.log``).

    For a long poll (``tailing``), this gateway's writer's copy when it writes the log
    and its watch says the copy is current (``LogWriter.listed``): 10,000 tailing
    readers asked ZooKeeper twice a poll. Only for them: the copy learns a change
    another gateway made (an attach, a truncation, a new writer) when the watch fires,
    milliseconds later, so a client acknowledged by that gateway could read here without
    its change; a long poll that found nothing is woken then (the writer loses its role,
    or reads the list again), and any other read asks ZooKeeper, as it did.

    With ``current``, ZooKeeper's answer only (``MetadataUnavailable`` when it cannot
    answer): a position another gateway handed out may be in a ledger the list kept
    here does not have yet (``reads.read``)."""
    check_log_name(name)
    writer = gw.logs.get(name) if tailing and not current else None
    listed = writer.listed if writer is not None else None
    return await gw.metadata.log(name, gw.logs.logs.get, listed, kept_allowed=not current)


async def not_writer(gw: Gateway, name: str, exc: NotWriter) -> NotWriter:
    """``exc`` (409 ``not_writer``), unless the log does not exist (any more): then 404
    ``log_not_found`` is raised (docs/api.md: an unknown log is 404 on every route)."""
    await get(gw, name)
    return exc


async def writer_of(gw: Gateway, name: str) -> LogWriter:
    """This gateway's writer of log ``name``: 409 ``not_writer`` when it is not (or no
    longer) the writer, 404 when the log does not exist."""
    try:
        return gw.logs.writer_or_409(name)
    except NotWriter as exc:
        raise await not_writer(gw, name, exc) from None


async def list_names(
    gw: Gateway, after: str | None, limit: int, prefix: str = ""
) -> tuple[list[str], str | None]:
    return await gw.logs.logs.list(after, limit, prefix)


async def ledger_ends(gw: Gateway, ledger_ids: tuple[int, ...]) -> dict[int, int | None]:
    """Each ledger's last entry id when CLOSED, None while open (deleted: -1)."""
    found = await gw.ctx.ledgers.get_many(list(ledger_ids))
    ends: dict[int, int | None] = {}
    for ledger_id, item in zip(ledger_ids, found, strict=True):
        if item is None:
            ends[ledger_id] = -1
        elif isinstance(item, QuireError):
            raise item
        elif item.metadata.state is LedgerState.CLOSED:
            ends[ledger_id] = item.metadata.last_entry_id
        else:
            ends[ledger_id] = None
    return ends


async def truncate(gw: Gateway, name: str, before: Position) -> LogMetadata:
    """Remove the whole ledgers that end before ``before``: the list first (CAS), then
    the ledgers. A position outside the log is 400."""
    for _ in range(LOG_CAS_ATTEMPTS_MAX):
        current = await get(gw, name)
        index = current.log.index_of(before.ledger_id)
        ends = await ledger_ends(gw, current.log.ledgers[: (index or 0) + 1])
        removed = truncation(current.log, before, ends)
        if not removed:
            return current.log
        try:
            stored = await gw.logs.logs.compare_and_set(
                current.log.without_ledgers(removed), current.version
            )
        except MetadataConflict:
            continue
        await delete_ledgers(gw, removed)
        return stored.log
    raise MetadataConflict(f"log {name}: the list kept changing; truncate again")


async def delete(gw: Gateway, name: str) -> None:
    """Delete the log: fence its last two ledgers (a writer anywhere stops), remove its
    znode (CAS), then delete every ledger it listed (and those a retention pass removed
    from the list and had not deleted yet)."""
    for _ in range(LOG_CAS_ATTEMPTS_MAX):
        current = await get(gw, name)
        await asyncio.gather(*(close_for_good(gw, lid) for lid in current.log.to_fence()))
        try:
            await gw.logs.logs.delete(name, current.version)
        except MetadataConflict:
            continue
        gw.logs.forget(name)
        gw.metadata.forget_log(name)
        await delete_ledgers(gw, (*current.log.ledgers, *retention.deleting_of(current.log)))
        return
    raise MetadataConflict(f"log {name}: it kept changing; delete again")


async def delete_ledgers(gw: Gateway, ledger_ids: tuple[int, ...]) -> None:
    """Delete ledgers a log no longer lists (best effort: one that cannot be deleted now
    is logged and left; it is in no log)."""
    limit = asyncio.Semaphore(DELETES_IN_FLIGHT_MAX)

    async def one(ledger_id: int) -> None:
        async with limit:
            try:
                await ledger_ops.delete(gw, ledger_id, None)
            except LedgerNotFound:
                pass
            except QuireError as exc:
                log.warning(
                    "could not delete a ledger removed from a log",
                    extra={"fields": {"ledger_id": ledger_id, "error": exc.code}},
                )

    await asyncio.gather(*(one(lid) for lid in ledger_ids))


async def attach(
    gw: Gateway, name: str, ledger_ids: list[int], commit: tuple[str, int] | None
) -> tuple[LogMetadata, bool]:
    """Append ``ledger_ids`` to the log in one CAS, taking the writer role the way a new
    writer does and leaving it free (``log_writer.AttachLedgers``): the log after, and
    whether it changed (False: ``commit`` was recorded already). Every ledger must be
    CLOSED, without a password, not in the log yet, made for this log (custom metadata
    ``quire.log``) and not by a log writer (``quire.log.writer``: the window's rebuild
    trusts the record times of those ledgers alone, ``gateway/logs/rebuild.py``); else
    400 and nothing changes.

    The same attach again (the log lists exactly these ledgers, in this order, one after
    the other: an earlier attempt landed and its answer was lost) answers True with the
    log as it is, before the commit is looked at: the caller must never take its own
    ledgers for a batch committed by someone else and delete them. The CAS lists the
    ledgers only while they all exist (``_Listing``): checked once up front is not
    enough, a delete may land while the last ledgers are fenced."""
    current = await get(gw, name)
    if not ledger_ids or len(ledger_ids) > ATTACH_LEDGERS_MAX:
        raise InvalidArgument(f"ledgers: 1 to {ATTACH_LEDGERS_MAX} ledger ids")
    if len(set(ledger_ids)) != len(ledger_ids):
        raise InvalidArgument("ledgers: an id is listed twice")
    if commit is not None and (COMMIT_ID.fullmatch(commit[0]) is None or commit[1] < 0):
        raise InvalidArgument("commit: id of 1-200 characters of A-Za-z0-9._:- and a sequence >= 0")
    if _listed_together(current.log, ledger_ids):
        return current.log, True  # this attach landed before (a retry; its answer was lost)
    if commit is not None:
        done = current.log.committed(commit[0])
        if done is not None and done >= commit[1]:
            return current.log, False
    found = await gw.ctx.ledgers.get_many(list(ledger_ids))
    for ledger_id, item in zip(ledger_ids, found, strict=True):
        if item is None:
            raise InvalidArgument(f"ledger {ledger_id} does not exist")
        if isinstance(item, QuireError):
            raise item
        metadata = item.metadata
        problem = (
            "is not CLOSED" if metadata.state is not LedgerState.CLOSED
            else "has a password" if metadata.password_hash is not None
            else "is in the log already" if ledger_id in current.log.ledgers
            else f"was not made for log {name} (custom metadata {LOG_METADATA_KEY})"
            if metadata.custom.get(LOG_METADATA_KEY) != name
            else f"carries {WRITER_METADATA_KEY}: only a log writer's own ledgers do"
            if WRITER_METADATA_KEY in metadata.custom
            else None
        )  # fmt: skip
        if problem is not None:
            raise InvalidArgument(f"ledger {ledger_id} {problem}")
    held = gw.logs.get(name)
    if held is not None:
        held._lose("the log's ledgers were attached by a commit (POST /ledgers)")
    op = lw.AttachLedgers(name, gw.settings.address, ledger_ids, commit, gw.ctx.rng)
    result = await run(gw, _Listing(gw.logs.logs, ledger_ids), op, op.start())
    if not isinstance(result, lw.Attached):
        raise InvariantViolation(f"attaching ledgers answered {result!r}")
    return result.log, result.committed


def _listed_together(log: LogMetadata, ledger_ids: list[int]) -> bool:
    """Whether ``log`` lists ``ledger_ids`` in this order, one after the other."""
    start = log.index_of(ledger_ids[0]) if ledger_ids else None
    if start is None:
        return False
    return log.ledgers[start : start + len(ledger_ids)] == tuple(ledger_ids)


class _Listing(LogStore):
    """The log store of one attach: its CAS writes the log only while every attached
    ledger exists (one ZooKeeper transaction, ``LogStore.compare_and_set_listing``), so
    a ledger deleted after the attach's checks is never listed. A ledger deleted
    meanwhile is 400, like one that did not exist at the start."""

    def __init__(self, logs: LogStore, ledger_ids: list[int]) -> None:
        super().__init__(logs.store)
        self.on_written = logs.on_written
        self.ledger_ids = tuple(ledger_ids)

    async def compare_and_set(self, log: LogMetadata, version: int) -> VersionedLog:
        try:
            return await self.compare_and_set_listing(log, version, self.ledger_ids)
        except LedgerNotFound as exc:
            raise InvalidArgument(f"{exc.message} before the attach could list it") from exc


async def delete_ledger(gw: Gateway, ledger_id: int, password: str | None) -> None:
    """DELETE /v1/ledgers/{id}: delete the ledger unless a log lists it (409
    ``ledger_in_log``: truncate the log or delete it instead).

    A ledger made for a log names it (custom metadata ``quire.log``); that log is read,
    and the ledger's znode is deleted in one transaction with a check that the log's
    znode is still at the version read, so an attach listing the ledger meanwhile makes
    the delete read again (and refuse) rather than land after it (the attach, in turn,
    lists only ledgers that exist: ``_Listing``)."""
    for _ in range(LOG_CAS_ATTEMPTS_MAX):
        metadata = (await gw.ctx.ledgers.get(ledger_id)).metadata
        # A ledger with a password is in no log (neither a writer's nor an attached one
        # has one); ``ledger_ops.delete`` checks the password before anything is said.
        name = metadata.custom.get(LOG_METADATA_KEY) if metadata.password_hash is None else None
        guard: tuple[str, int] | None = None
        if isinstance(name, str):
            try:
                current = await gw.logs.logs.get(name)
            except (LogNotFound, InvalidArgument):
                # No such log (or a name no log can have): nothing lists the ledger. (A
                # log made under that name meanwhile and given this ledger before the
                # delete lands is the one case the version check cannot cover.)
                current = None
            if current is not None:
                if ledger_id in current.log.ledgers:
                    raise LedgerInLog(
                        f"ledger {ledger_id} is in log {name}: truncate the log past it "
                        "(or delete the log) to delete it"
                    )
                guard = (zkpaths.log(name), current.version)
        try:
            await ledger_ops.delete(gw, ledger_id, password, unless_changed=guard)
        except MetadataConflict:
            continue  # the log changed since it was read: read it again
        return
    raise MetadataConflict(f"ledger {ledger_id}: its log kept changing; delete again")
