"""The create-ledger body (gateway/ledgers/schemas.py ``CreateLedger``): metadata is a flat map of
string keys to string values within docs/api.md's bounds, a password is 1-256 printable ASCII
characters, and an hmac-sha256 ledger needs one; anything else fails validation (400)
before anything is written."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gateway.ledgers.schemas import CreateLedger
from gateway.limits import (
    METADATA_KEY_MAX_BYTES,
    METADATA_KEYS_MAX,
    METADATA_TOTAL_MAX_BYTES,
    METADATA_VALUE_MAX_BYTES,
    PASSWORD_LENGTH_MAX,
)


def _nested(depth: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"x": "leaf"}
    for _ in range(depth):
        doc = {"x": doc}
    return doc


BAD_METADATA = [
    _nested(1),
    _nested(500),
    {"k": 1},
    {"k": None},
    {"k": ["v"]},
    {"k": True},
    {"k": float("nan")},
    {"k": "\ud800"},
    {"\udc00": "v"},
    {f"k{i}": "v" for i in range(METADATA_KEYS_MAX + 1)},
    {"k" * (METADATA_KEY_MAX_BYTES + 1): "v"},
    {"é" * (METADATA_KEY_MAX_BYTES // 2 + 1): "v"},  # 258 bytes in 129 characters
    {"k": "v" * (METADATA_VALUE_MAX_BYTES + 1)},
    {"k": "€" * (METADATA_VALUE_MAX_BYTES // 3 + 1)},
    {f"k{i}": "v" * METADATA_VALUE_MAX_BYTES for i in range(4)},  # 16,392 bytes in all
    ["k", "v"],
    "k=v",
]


@pytest.mark.parametrize("metadata", BAD_METADATA, ids=range(len(BAD_METADATA)))
def test_bad_metadata_is_refused(metadata: Any) -> None:
    """Nested maps, non-string values, lone surrogates, too many keys, a key or value
    over its bound (in UTF-8 bytes) or too many bytes in all: a validation error."""
    with pytest.raises(ValidationError):
        CreateLedger.model_validate({"metadata": metadata})


def test_metadata_at_its_bounds_is_accepted() -> None:
    """64 keys, a key of 256 bytes, a value of 4 KiB and 16 KiB in all are fine."""
    at_count = {f"k{i}": "v" for i in range(METADATA_KEYS_MAX)}
    assert CreateLedger.model_validate({"metadata": at_count}).metadata == at_count
    key = "k" * METADATA_KEY_MAX_BYTES
    assert CreateLedger.model_validate({"metadata": {key: "v"}}).metadata == {key: "v"}
    value_len = (METADATA_TOTAL_MAX_BYTES - 4 * 2) // 4
    at_total = {f"k{i}": "v" * value_len for i in range(4)}
    assert value_len <= METADATA_VALUE_MAX_BYTES
    assert CreateLedger.model_validate({"metadata": at_total}).metadata == at_total
    assert CreateLedger.model_validate({"metadata": {"ключ": "значение €"}}).metadata


BAD_PASSWORDS = [
    "",
    "пароль€",
    "caf\u00e9",
    "tab\there",
    "new\nline",
    "nul\x00",
    "del\x7f",
    " leading",
    "trailing ",
    "x" * (PASSWORD_LENGTH_MAX + 1),
    7,
]


@pytest.mark.parametrize("password", BAD_PASSWORDS, ids=range(len(BAD_PASSWORDS)))
def test_bad_passwords_are_refused(password: Any) -> None:
    """Non-ASCII, control characters, a leading or trailing space (a header loses it),
    empty or over 256 characters: a validation error."""
    with pytest.raises(ValidationError):
        CreateLedger.model_validate({"password": password})


@pytest.mark.parametrize("password", ["p", "x" * PASSWORD_LENGTH_MAX, "a b", "!~{}\"'\\"])
def test_printable_ascii_passwords_are_accepted(password: str) -> None:
    """1 to 256 printable ASCII characters, spaces inside included."""
    assert CreateLedger.model_validate({"password": password}).password == password


def test_hmac_needs_a_password() -> None:
    """An hmac-sha256 ledger without a password would use a key derived from nothing."""
    with pytest.raises(ValidationError, match="needs a password"):
        CreateLedger.model_validate({"digest": "hmac-sha256"})
    body = CreateLedger.model_validate({"digest": "hmac-sha256", "password": "pw"})
    assert body.password == "pw"
    assert CreateLedger.model_validate({"digest": "crc32c"}).password is None
