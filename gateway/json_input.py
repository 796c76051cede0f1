"""Parsing JSON request bodies with bounds, before the parser can be made to fail badly.

Python's ``json`` recurses once per nested array or object: a body of a few thousand
``[`` raises ``RecursionError`` (a 500 if it escapes), and a body that parses may still
break whoever walks it later (pydantic, ``json.dumps``, the ZooKeeper record). So a cheap
pre-scan of the raw bytes runs first: string literals are blanked out with one regular
expression (C speed, whatever their size), and what is left must hold at most
``JSON_CONTAINERS_MAX`` brackets, nested at most ``JSON_DEPTH_MAX`` deep. Only then is the
body parsed, refusing the ``NaN`` / ``Infinity`` literals Python accepts but JSON does not,
and strings holding a lone UTF-16 surrogate (``"\\ud800"``), which are not text and cannot
be encoded again. Every refusal is ``InvalidArgument`` (400) with a message that quotes
nothing of the body.
"""

from __future__ import annotations

import json
import re
from typing import Any

from services.errors import InvalidArgument

# The API's JSON bodies are shallow (an object holding an array or a flat map); these
# bounds leave room for more without letting a body cost the parser more than its size.
JSON_DEPTH_MAX = 32
JSON_CONTAINERS_MAX = 10_000

# A JSON string literal: the unrolled form (no alternation inside the repeat), linear.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# A \u escape in the surrogate range (hex digits in either case); rare in real bodies,
# so only bodies that hold one are walked for lone surrogates after parsing.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def parse_json(raw: bytes) -> Any:
    """The JSON document in ``raw`` (UTF-8), or ``InvalidArgument`` when it is not JSON or
    passes the nesting bounds."""
    check_nesting(raw)
    try:
        # UTF-8 only (RFC 8259 §8.1): json.loads would also guess UTF-16 and UTF-32, in
        # which the byte-level pre-scan above would not see the strings' bounds.
        doc = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError as exc:  # unreachable after check_nesting; kept as a backstop
        raise InvalidArgument("body is nested too deeply") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"body is not valid JSON: {_reason(exc)}") from exc
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(doc):
        raise InvalidArgument("body is not valid JSON: a string holds a lone UTF-16 surrogate")
    return doc


def check_nesting(raw: bytes) -> None:
    """Refuse ``raw`` when, outside string literals, it holds more than
    ``JSON_CONTAINERS_MAX`` brackets or nests them more than ``JSON_DEPTH_MAX`` deep."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if len(brackets) > 2 * JSON_CONTAINERS_MAX:
        raise InvalidArgument(f"body holds more than {JSON_CONTAINERS_MAX} arrays and objects")
    depth = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            if depth > JSON_DEPTH_MAX:
                raise InvalidArgument(f"body is nested more than {JSON_DEPTH_MAX} levels deep")
        else:
            depth -= 1


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _reason(exc: Exception) -> str:
    # json's messages quote no input; a UnicodeDecodeError's str() quotes the bad bytes.
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    return str(exc)


def _has_lone_surrogate(doc: Any) -> bool:
    """Whether any string (key or value) in ``doc`` does not encode as UTF-8. The depth
    is bounded by ``check_nesting``, so the recursion is too."""
    if isinstance(doc, str):
        return not _is_utf8(doc)
    if isinstance(doc, list):
        return any(_has_lone_surrogate(item) for item in doc)
    if isinstance(doc, dict):
        return any(not _is_utf8(k) or _has_lone_surrogate(v) for k, v in doc.items())
    return False


def _is_utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
