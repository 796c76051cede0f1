"""A JSON batch's base64, decoded by pybase64, accepts and refuses exactly what
``binascii``'s strict mode does, and gives the same bytes (gateway/http/batches.py)."""

from __future__ import annotations

import base64
import binascii

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.http.batches import decode_batch
from services.errors import InvalidArgument

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# Mostly the alphabet, with padding, URL-safe letters, whitespace and non-ASCII mixed in.
_CHARS = st.sampled_from(_ALPHABET) | st.sampled_from("==-_ \n\r\t\x00é")


def _strict(text: str) -> bytes | None:
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None


def _decoded(text: str) -> bytes | None:
    try:
        (payload,) = decode_batch({"entries": [text]})
    except InvalidArgument as exc:
        assert str(exc) == "entries[0] is not valid base64"
        return None
    return payload


@settings(max_examples=3000, deadline=None)
@given(st.text(_CHARS, max_size=24))
@example("mZsi=")  # a lone "=" after a whole quantum: binascii accepts, pybase64 does not
@example("QQ==QQ==")  # data after padding
@example("QQ")  # missing padding
@example("=QQ=")
def test_short_strings_as_binascii_strict(text: str) -> None:
    assert _decoded(text) == _strict(text)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=2048), st.integers(0, 4096), st.sampled_from(["", "=", "A", " ", "-"]))
def test_encoded_payloads_and_their_mutations(payload: bytes, at: int, insert: str) -> None:
    """Real encodings decode to their payload; one character inserted anywhere is judged
    as binascii's strict mode judges it."""
    text = base64.b64encode(payload).decode()
    assert _decoded(text) == payload
    mutated = text[: at % (len(text) + 1)] + insert + text[at % (len(text) + 1) :]
    assert _decoded(mutated) == _strict(mutated)


def test_the_error_names_the_entry() -> None:
    good = base64.b64encode(b"x").decode()
    with pytest.raises(InvalidArgument, match=r"entries\[2\] is not valid base64"):
        decode_batch({"entries": [good, good, "A@=="]})
