"""Parsing JSON request bodies with bounds, so that no body can make the parser (or
whoever walks the document later) fail badly.

Python's ``json`` recurses once per nested array or object: a body of a few thousand
``[`` raises ``RecursionError`` (a 500 if it escapes), and a body that parses may still
break whoever walks it later (pydantic, ``json.dumps``, the ZooKeeper record). So before
parsing, one pass in C counts the bracket bytes: more than ``2 * JSON_CONTAINERS_MAX`` is
refused outright (the API's bodies hold a handful; base64 holds none, and metadata is a
few KiB at most), and at most ``JSON_DEPTH_MAX`` of them cannot nest deeper than that, so
almost every body is parsed at once. Otherwise the document is parsed (``RecursionError``
refused) and its containers walked for their depth; a regular expression blanking out the
string literals first would cost several times the parse on a body of many short strings.
Parsing refuses the ``NaN`` / ``Infinity`` literals Python accepts but JSON does not, and
strings holding a lone UTF-16 surrogate (``"\\ud800"``), which are not text and cannot be
encoded again. Every refusal is ``InvalidArgument`` (400) with a message that quotes
nothing of the body.

``validated`` checks a parsed document against a pydantic model the same way: its
refusal names where the body is wrong and what is wrong there, never the value found
(pydantic's own message quotes it, and a body may hold a ledger password).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gateway.limits import ERROR_LOCATION_MAX_CHARS, JSON_CONTAINERS_MAX, JSON_DEPTH_MAX
from services.errors import InvalidArgument

Model = TypeVar("Model", bound=BaseModel)

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# A \u escape in the surrogate range (hex digits in either case); rare in real bodies,
# so only bodies that hold one are walked for lone surrogates after parsing.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def parse_json(raw: bytes) -> Any:
    """The JSON document in ``raw`` (UTF-8), or ``InvalidArgument`` when it is not JSON or
    passes the bounds on containers and nesting."""
    brackets = len(raw.translate(None, _NOT_BRACKETS))
    if brackets > 2 * JSON_CONTAINERS_MAX:
        raise InvalidArgument(f"body holds more than {JSON_CONTAINERS_MAX} arrays and objects")
    try:
        # UTF-8 only (RFC 8259 §8.1): json.loads would also guess UTF-16 and UTF-32.
        doc = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise InvalidArgument(_TOO_DEEP) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"body is not valid JSON: {_reason(exc)}") from exc
    if brackets > JSON_DEPTH_MAX and _depth(doc) > JSON_DEPTH_MAX:
        raise InvalidArgument(_TOO_DEEP)
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(doc):
        raise InvalidArgument("body is not valid JSON: a string holds a lone UTF-16 surrogate")
    return doc


def validated(model: type[Model], doc: Any, what: str = "") -> Model:
    """``doc`` as ``model``, or ``InvalidArgument`` with ``what`` and the first error's
    location and message (module docstring: never the value given)."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        # The location may hold a key of the body: quote only the start of it.
        where = ".".join(str(p) for p in first["loc"])[:ERROR_LOCATION_MAX_CHARS]
        message = f"{where}: {first['msg']}" if where else first["msg"]
        # Not chained: the pydantic error holds the input, which no traceback may show.
        raise InvalidArgument(f"{what}{message}") from None


_TOO_DEEP = f"body is nested more than {JSON_DEPTH_MAX} levels deep"


def _depth(doc: Any) -> int:
    """The nesting depth of arrays and objects in ``doc`` (iterative: no recursion)."""
    deepest = 0
    stack = [(doc, 1)] if isinstance(doc, list | dict) else []
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        items = node.values() if isinstance(node, dict) else node
        stack += [(item, depth + 1) for item in items if isinstance(item, list | dict)]
    return deepest


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
