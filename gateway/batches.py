"""A JSON batch body, ``{"entries": ["<base64>", ...]}``, as the payloads it holds (ledger
adds and log appends alike, API.md's 400 and 413)."""

from __future__ import annotations

import binascii
from typing import Any

from services.errors import InvalidArgument, PayloadTooLarge
from services.limits import BATCH_ENTRIES_MAX, ENTRY_SIZE_MAX_BYTES


def decode_batch(doc: Any) -> tuple[bytes, ...]:
    """``{"entries": [base64, ...]}`` → payloads; 400 / 413 per API.md."""
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise InvalidArgument('a JSON add needs {"entries": ["<base64>", ...]}')
    items = doc["entries"]
    if not items:
        raise InvalidArgument("empty batch")
    if len(items) > BATCH_ENTRIES_MAX:
        raise PayloadTooLarge(f"batch of {len(items)} entries over {BATCH_ENTRIES_MAX}")
    payloads = []
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidArgument(f"entries[{index}] is not a base64 string")
        try:
            payload = binascii.a2b_base64(item, strict_mode=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidArgument(f"entries[{index}] is not valid base64") from exc
        if len(payload) > ENTRY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(
                f"entries[{index}] of {len(payload)} bytes over {ENTRY_SIZE_MAX_BYTES}"
            )
        payloads.append(payload)
    return tuple(payloads)
