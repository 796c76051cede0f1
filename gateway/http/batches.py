"""A JSON batch body, ``{"entries": ["<base64>", ...]}``, as the payloads it holds (ledger
adds and log appends alike, docs/api.md's 400 and 413).

Base64 is decoded by pybase64 (SIMD), several times faster than ``binascii``, which was
a large share of the gateway's CPU under batches of 100 (benchmarks/README.md, "Measured
choices"). What is accepted stays exactly what ``binascii``'s strict mode accepts:
pybase64 refuses a few strings that mode lets through (a lone ``=`` after a whole quantum,
``"mZsi="``), so a string pybase64 refuses is decoded again by ``binascii`` before it is
called invalid. Where both accept, the bytes are the same
(tests/unit/gateway/test_batches.py)."""

from __future__ import annotations

import binascii
from typing import Any

import pybase64

from services.errors import InvalidArgument, PayloadTooLarge
from services.limits import BATCH_ENTRIES_MAX, ENTRY_SIZE_MAX_BYTES

# The body of an add or an append, as the OpenAPI document describes it (the routes'
# ``openapi_extra``): one raw entry, or a JSON batch that ``decode_batch`` reads.
ADD_BODY = {
    "requestBody": {
        "description": (
            "A raw body (any content type but application/json) is one entry. JSON "
            '`{"entries": ["<base64>", ...]}` is a batch, acknowledged as a whole, in order.'
        ),
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["entries"],
                    "properties": {
                        "entries": {
                            "type": "array",
                            "items": {"type": "string", "format": "byte"},
                            "minItems": 1,
                            "maxItems": BATCH_ENTRIES_MAX,
                        }
                    },
                }
            },
        },
    }
}


def decode_batch(doc: Any) -> tuple[bytes, ...]:
    """``{"entries": [base64, ...]}`` → payloads; 400 / 413 per docs/api.md."""
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
            payload = pybase64.b64decode(item, validate=True)
        except (binascii.Error, ValueError):
            payload = _strict_binascii(item, index)
        if len(payload) > ENTRY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(
                f"entries[{index}] of {len(payload)} bytes over {ENTRY_SIZE_MAX_BYTES}"
            )
        payloads.append(payload)
    return tuple(payloads)


def _strict_binascii(item: str, index: int) -> bytes:
    """``item`` decoded by ``binascii``'s strict mode, or the 400 for ``entries[index]``."""
    try:
        return binascii.a2b_base64(item, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidArgument(f"entries[{index}] is not valid base64") from exc
