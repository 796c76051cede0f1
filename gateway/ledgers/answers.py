"""The answer to ``POST /v1/ledgers/{id}/entries`` once its body is read, shared by the
route (gateway/ledgers/routes.py) and the fast path (gateway/fastpath.py), so that both
answer an add with the same code."""

from __future__ import annotations

from gateway import operations as ops
from gateway.http.batches import decode_batch
from gateway.http.json_input import parse_json
from gateway.service import Gateway
from services.errors import PayloadTooLarge
from services.limits import ENTRY_SIZE_MAX_BYTES


async def add_answer(
    gw: Gateway, ledger_id: int, password: str | None, raw: bytes, batch: bool
) -> dict[str, int]:
    """The add itself, once the request is read: one entry (a raw body) or a batch (JSON)."""
    if not batch:
        if len(raw) > ENTRY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(f"entry of {len(raw)} bytes over {ENTRY_SIZE_MAX_BYTES}")
        outcome = await ops.add(gw, ledger_id, password, (raw,))
        return {"entry_id": outcome.last_entry_id, "last_add_confirmed": outcome.lac}
    payloads = decode_batch(parse_json(raw))
    outcome = await ops.add(gw, ledger_id, password, payloads)
    return {
        "first_entry_id": outcome.first_entry_id,
        "last_entry_id": outcome.last_entry_id,
        "last_add_confirmed": outcome.lac,
    }
