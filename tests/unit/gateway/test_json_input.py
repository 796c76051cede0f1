"""Bounded JSON parsing of request bodies (gateway/http/json_input.py): deep nesting, too many
containers, NaN / Infinity and lone surrogates are 400 invalid_argument before (or
instead of) a RecursionError or a value that breaks whoever handles it later; a body
that fails its model is refused without quoting what it holds."""

from __future__ import annotations

import json
import time

import pytest

from gateway.http.json_input import parse_json, validated
from gateway.ledgers.schemas import CreateLedger
from gateway.limits import JSON_CONTAINERS_MAX, JSON_DEPTH_MAX
from gateway.logs.schemas import CreateLog
from services.errors import InvalidArgument


def _nested(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return open_ * depth + close * depth


@pytest.mark.parametrize("depth", [JSON_DEPTH_MAX + 1, 1_000, 100_000, 1_000_000])
def test_deep_nesting_is_refused(depth: int) -> None:
    """Arrays or objects nested past the bound are refused (no RecursionError), also
    unbalanced ones (not JSON) and ones under an object key (as in ledger metadata)."""
    with pytest.raises(InvalidArgument, match="nested|arrays and objects"):
        parse_json(_nested(depth))
    with pytest.raises(InvalidArgument):
        parse_json(b"[" * depth)
    with pytest.raises(InvalidArgument, match="nested|arrays and objects"):
        parse_json(b'{"metadata": ' + b'{"x": ' * depth + b"1" + b"}" * depth + b"}")


def test_nesting_up_to_the_bound_parses() -> None:
    """Exactly JSON_DEPTH_MAX levels is fine, and brackets inside strings (with escaped
    quotes around them) do not count."""
    assert parse_json(_nested(JSON_DEPTH_MAX)) is not None
    tricky = b'{"a": "[[[[\\"[[[[", "b": ["' + b"{" * 5000 + b'"]}'
    assert parse_json(tricky) == {"a": '[[[["[[[[', "b": ["{" * 5000]}


def test_too_many_containers_are_refused() -> None:
    """A flat body of more than JSON_CONTAINERS_MAX arrays is refused before parsing."""
    ok = b"[" + b",".join([b"[]"] * (JSON_CONTAINERS_MAX - 1)) + b"]"
    assert len(parse_json(ok)) == JSON_CONTAINERS_MAX - 1
    over = b"[" + b",".join([b"[]"] * JSON_CONTAINERS_MAX) + b"]"
    with pytest.raises(InvalidArgument, match="arrays and objects"):
        parse_json(over)


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_not_json(literal: bytes) -> None:
    """Python's json accepts NaN and Infinity; JSON does not."""
    with pytest.raises(InvalidArgument, match="not a JSON value"):
        parse_json(b'{"metadata": {"k": ' + literal + b"}}")


@pytest.mark.parametrize(
    "body",
    [
        b'{"k": "\\ud800"}',
        b'{"\\udc00": "v"}',
        b'{"entries": ["AAAA", "x\\uDBFFy"]}',
        b'["\\ud800\\u0041"]',
    ],
)
def test_lone_surrogates_are_refused(body: bytes) -> None:
    """A string or key holding a lone UTF-16 surrogate escape is not text: 400."""
    with pytest.raises(InvalidArgument, match="surrogate"):
        parse_json(body)


def test_surrogate_pairs_and_other_escapes_are_fine() -> None:
    """A proper surrogate pair is one character; an escaped backslash before 'ud800'
    is no escape at all."""
    assert parse_json(b'{"k": "\\ud83d\\ude00"}') == {"k": "\U0001f600"}
    assert parse_json(b'{"k": "\\\\ud800"}') == {"k": "\\ud800"}


@pytest.mark.parametrize(
    "body", [b"", b"{", b"\xff\xfe{}", "{}".encode("utf-16"), b'{"a": 1}x', b"\xc3\x28"]
)
def test_not_json_or_not_utf8_is_refused(body: bytes) -> None:
    """Malformed JSON and non-UTF-8 bodies (UTF-16 included) are 400, quoting no bytes."""
    with pytest.raises(InvalidArgument, match="not valid JSON") as info:
        parse_json(body)
    assert "\\x" not in info.value.message


def test_the_bounds_cost_little_next_to_parsing() -> None:
    """Checking the bounds costs a fraction of the parse, also for a body of millions
    of short strings and a few dozen brackets (where blanking out the strings with a
    regular expression would cost several parses). Measured in this process's CPU time,
    not wall time, so that other load on a shared machine does not decide it."""
    body = b'{"entries": [' + b'"QUFB",' * 2_000_000 + b'["x"],' * 20 + b'"QUFB"]}'
    started = time.process_time()
    json.loads(body)
    parse_s = time.process_time() - started
    started = time.process_time()
    assert len(parse_json(body)["entries"]) == 2_000_021
    assert time.process_time() - started < 3 * parse_s + 0.5


PASSWORD = "pw/never-quoted+9=e"


@pytest.mark.parametrize(
    ("model", "doc", "where"),
    [
        (CreateLog, {"password": PASSWORD}, "password: Extra inputs are not permitted"),
        (CreateLedger, {"password": PASSWORD + " "}, "password: String should match pattern"),
        (CreateLedger, {"password": PASSWORD * 30}, "password: String should have at most"),
        (CreateLedger, {"ensemble_size": PASSWORD}, "ensemble_size: Input should be"),
    ],
)
def test_a_refused_body_is_never_quoted(model: type, doc: dict, where: str) -> None:
    """A body that fails its model (an extra key, a bad value) is 400 naming where and
    what is wrong, never the value given: it may be a ledger password
    (docs/security.md, "What is tested"); nor does the error carry pydantic's, which
    quotes it, as its cause."""
    with pytest.raises(InvalidArgument) as caught:
        validated(model, doc, "invalid: ")
    message = str(caught.value)
    assert message.startswith(f"invalid: {where}"), message
    assert "never-quoted" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
