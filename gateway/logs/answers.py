"""The answers to ``POST /v1/logs/{name}/records`` once its body is read and to ``GET
/v1/logs/{name}/records`` once its start is known, shared by the routes
(gateway/logs/routes.py) and the fast path (gateway/fastpath.py), so that both answer
an append and a read with the same code.

The append is served by this gateway's writer of the log when it has one; else it is
forwarded to the gateway writing the log, or the role is taken here when the log has
no live writer (gateway/logs/owners.py). A role lost in the middle of an append that
appended nothing (``not_writer``) routes the append again; so does a forward its target
refused. With ``--no-log-forwarding`` a gateway that does not write the log answers
``not_writer``, as before."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.http.batches import decode_batch
from gateway.http.json_input import parse_json
from gateway.limits import FORWARD_HOPS_MAX
from gateway.logs import operations as log_ops
from gateway.logs import reads as log_reads
from gateway.logs.owners import NO_CALLER, Caller
from gateway.logs.schemas import position_json
from gateway.logs.writer import AppendResult, LogWriter
from gateway.service import Gateway
from services.errors import NotWriter, PayloadTooLarge, Unavailable
from services.limits import ENTRY_SIZE_MAX_BYTES, LAC_WAIT_MAX_MS, LIST_LIMIT_MAX
from services.protocol.logs import ExpectedLast, Position


async def append_answer(
    gw: Gateway,
    name: str,
    key: str | None,
    raw: bytes,
    batch: bool,
    expected: str | None = None,
    caller: Caller = NO_CALLER,
) -> dict[str, Any]:
    """The append itself, once the request is read and its name and key checked: one
    record (a raw body) or a batch (JSON), with its ``Expected-Last-Position``."""
    # A batch is decoded only to be appended here: one forwarded goes as it came (the
    # writer's gateway checks it and answers what is wrong with it).
    payloads: Sequence[bytes] | None = None
    if not batch:
        if len(raw) > ENTRY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(f"record of {len(raw)} bytes over {ENTRY_SIZE_MAX_BYTES}")
        payloads = (raw,)
    condition = ExpectedLast.parse(expected) if expected is not None else None
    writers = gw.logs
    owners = writers.owners
    owners.check_caller(caller)
    forwarded = caller.forwarded_by is not None
    for hop in range(FORWARD_HOPS_MAX):
        writer = writers.get(name)
        if writer is None:
            if not gw.settings.log_forwarding:
                raise await log_ops.not_writer(
                    gw, name, NotWriter(f"this gateway is not the writer of log {name}")
                )
            target = await owners.target(name, fresh=hop > 0, forwarded=forwarded)
            if target is not None:
                if batch or key is not None or expected is not None:
                    gw.metrics.log_forwarded_records.inc()
                    answer = await owners.forward(target, name, raw, batch, key, expected, caller)
                else:  # an independent single record: forwarded with others (grouping.py)
                    answer = await owners.groups.forward(target, name, raw, caller.authorization)
                if answer is not None:
                    return answer
                continue
            if payloads is None:  # a bad batch is refused before the role is taken
                payloads = decode_batch(parse_json(raw))
            try:
                writer = await writers.acquire(name, owners.vacant)
            except NotWriter:
                continue  # another gateway took the log meanwhile: forward to it
        if payloads is None:
            payloads = decode_batch(parse_json(raw))
        try:
            result = await writer.append(payloads, key, condition=condition)
        except NotWriter as exc:
            if not gw.settings.log_forwarding:
                raise await log_ops.not_writer(gw, name, exc) from None
            continue  # nothing of it was appended: route it again
        return _answer(result, batch)
    raise Unavailable(
        f"log {name}: its writer role kept moving ({FORWARD_HOPS_MAX} routes); nothing was "
        "appended, try again"
    )


async def records_answer(
    gw: Gateway, name: str, start: Position | None, limit: int, wait_ms: int
) -> dict[str, Any]:
    """A read of the log from ``start`` (None: its first record), once the start is
    known: ``limit`` clamped to 1,000 records and ``wait_ms`` to 30,000 (docs/api.md)."""
    page = await log_reads.read(
        gw, name, start, min(limit, LIST_LIMIT_MAX), min(wait_ms, LAC_WAIT_MAX_MS)
    )
    return page.to_api()


async def writer_for_stream(gw: Gateway, name: str) -> LogWriter:
    """This gateway's writer of ``name`` for a streaming append (a WebSocket is not
    forwarded): the role is taken here when the log has no live writer; a log another
    live gateway writes is 409 ``not_writer`` naming that gateway, to stream to."""
    writer = gw.logs.get(name)
    if writer is not None or not gw.settings.log_forwarding:
        return await log_ops.writer_of(gw, name)
    owners = gw.logs.owners
    target = await owners.target(name, fresh=True, forwarded=False)
    if target is None:
        try:
            return await gw.logs.acquire(name, owners.vacant)
        except NotWriter as exc:
            raise await log_ops.not_writer(gw, name, exc) from None
    raise NotWriter(f"log {name} is written by gateway {target}: stream to it")


def _answer(result: AppendResult, batch: bool) -> dict[str, Any]:
    first = position_json(result.first.ledger_id, result.first.entry_id)
    last = position_json(result.last.ledger_id, result.last.entry_id)
    if batch:
        return {"first_position": first, "last_position": last}
    return {"position": last}
