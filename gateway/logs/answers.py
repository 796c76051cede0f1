"""The answer to ``POST /v1/logs/{name}/records`` once its body is read, shared by the
route (gateway/logs/routes.py) and the fast path (gateway/fastpath.py), so that both
answer an append with the same code."""

from __future__ import annotations

from typing import Any

from gateway.http.batches import decode_batch
from gateway.http.json_input import parse_json
from gateway.logs import operations as log_ops
from gateway.logs.schemas import position_json
from gateway.service import Gateway
from services.errors import NotWriter, PayloadTooLarge
from services.limits import ENTRY_SIZE_MAX_BYTES


async def append_answer(
    gw: Gateway, name: str, key: str | None, raw: bytes, batch: bool
) -> dict[str, Any]:
    """The append itself, once the request is read and its name and key checked: one
    record (a raw body) or a batch (JSON)."""
    if batch:
        payloads = decode_batch(parse_json(raw))
    else:
        if len(raw) > ENTRY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(f"record of {len(raw)} bytes over {ENTRY_SIZE_MAX_BYTES}")
        payloads = (raw,)
    writer = await log_ops.writer_of(gw, name)
    try:
        result = await writer.append(payloads, key)
    except NotWriter as exc:
        raise await log_ops.not_writer(gw, name, exc) from None
    first = position_json(result.first.ledger_id, result.first.entry_id)
    last = position_json(result.last.ledger_id, result.last.entry_id)
    if batch:
        return {"first_position": first, "last_position": last}
    return {"position": last}
