"""services/cli/ledger_io.py and the option parsing of `quire ledger`: lines and
batches within the API's limits, one-entry input bounded, entries rendered in every
read format, bad usage refused before any call."""

from __future__ import annotations

import base64
import io

import pytest
from typer.testing import CliRunner

from services.cli.app import app
from services.cli.ledger_io import (
    ReadFormat,
    batches,
    input_lines,
    read_whole,
    render,
)
from services.cli.limits import APPEND_BATCH_BYTES_MAX
from services.errors import PayloadTooLarge
from services.limits import ENTRY_SIZE_MAX_BYTES


def test_input_lines_drop_only_the_newline() -> None:
    """One entry per line without its newline; a last line without one counts; empty
    lines and carriage returns are kept (the bytes are the user's)."""
    stream = io.BytesIO(b"a\n\nb\r\nlast")
    assert list(input_lines(stream)) == [b"a", b"", b"b\r", b"last"]
    assert list(input_lines(io.BytesIO(b""))) == []


def test_batches_respect_the_entry_count() -> None:
    """Consecutive batches of at most N entries, in order, nothing lost."""
    entries = [str(i).encode() for i in range(25)]
    out = list(batches(entries, 10))
    assert [len(b) for b in out] == [10, 10, 5]
    assert [e for b in out for e in b] == entries


def test_batches_respect_the_byte_bound() -> None:
    """A batch stops before its payload passes the byte bound (base64 of it must fit
    the gateway's 64 MiB body); an entry bigger than the bound goes alone."""
    big = b"x" * (APPEND_BATCH_BYTES_MAX // 2 + 1)
    huge = b"y" * (APPEND_BATCH_BYTES_MAX + 1)
    out = list(batches([big, big, huge, b"z"], 10_000))
    assert [len(b) for b in out] == [1, 1, 1, 1]
    assert all(sum(map(len, b)) <= APPEND_BATCH_BYTES_MAX or len(b) == 1 for b in out)
    assert APPEND_BATCH_BYTES_MAX * 4 / 3 < 64 * 1024 * 1024


def test_read_whole_refuses_past_the_entry_limit_without_reading_it_all() -> None:
    """The whole input as one entry, up to 5 MiB; past that payload_too_large, having
    read only one byte more than the limit."""
    assert read_whole(io.BytesIO(b"abc"), "stdin") == b"abc"
    exact = b"e" * ENTRY_SIZE_MAX_BYTES
    assert read_whole(io.BytesIO(exact), "f") == exact
    stream = io.BytesIO(exact + b"more than one byte")
    with pytest.raises(PayloadTooLarge):
        read_whole(stream, "f")
    assert stream.tell() == ENTRY_SIZE_MAX_BYTES + 1


@pytest.mark.parametrize(
    ("fmt", "raw", "ids", "expected"),
    [
        (ReadFormat.text, False, False, b"hi \\xff\n"),
        (ReadFormat.text, False, True, b"7\thi \\xff\n"),
        (ReadFormat.base64, False, False, base64.b64encode(b"hi \xff") + b"\n"),
        (ReadFormat.base64, False, True, b"7\t" + base64.b64encode(b"hi \xff") + b"\n"),
        (ReadFormat.json, False, False, b'{"entry_id": 7, "data": "aGkg/w=="}\n'),
        (ReadFormat.text, True, False, b"hi \xff"),
    ],
)
def test_render(fmt: ReadFormat, raw: bool, ids: bool, expected: bytes) -> None:
    """Each read format; text escapes bytes that are not UTF-8; --raw is the bytes."""
    doc = {"entry_id": 7, "data": base64.b64encode(b"hi \xff").decode()}
    assert render(doc, fmt, raw, ids) == expected


@pytest.mark.parametrize(
    "args",
    [
        ["ledger", "create", "--meta", "novalue"],
        ["ledger", "create", "--meta", "=v"],
        ["ledger", "create", "--ensemble", "0"],
        ["ledger", "create", "--digest", "md5"],
        ["ledger", "read", "1", "--from", "3", "--to", "2"],
        ["ledger", "read", "-1"],
        ["ledger", "append", "1", "x", "--file", "f"],
        ["ledger", "append", "1", "--lines", "--batch", "10001"],
        ["ledger", "list", "--limit", "1001"],
        ["--gateway", "ftp://x", "ledger", "list"],
        ["bench", "--local", "--gateway", "http://x:1"],
    ],
)
def test_bad_usage_exits_2_before_any_call(args: list[str]) -> None:
    """Impossible options are refused by the parser (exit 2); the gateway, which does
    not exist here, is never called (that would be exit 3)."""
    result = CliRunner().invoke(app, ["--gateway", "http://127.0.0.1:9", *args]
                                if args[0] != "--gateway" else args)  # fmt: skip
    assert result.exit_code == 2, result.output
