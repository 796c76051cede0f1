"""What ``quire log`` sends and shows: records appended in order (one request at a
time, each with its own ``Idempotency-Key`` when asked), pages of records read in
log order, and positions checked the way the gateway checks them.

Positions on the command line and in what ``quire log`` prints are ``LID:EID``
strings (the form ``--from`` and ``--before`` take), whichever of docs/api.md's two forms
the gateway answered with. A read may start at a time instead (``--from-time``: ms since
the epoch or RFC 3339; ``--since``: a duration back from now), sent as ``from_time``.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import typer

from services.cli.client import GatewayClient
from services.cli.limits import EMPTY_POLL_BACKOFF_S
from services.errors import InvalidArgument, QuireError, present
from services.limits import LAC_WAIT_MAX_MS, LIST_LIMIT_MAX
from services.protocol.cursors import check_cursor_name
from services.protocol.log_records import KEY_MAX_CHARS, check_key
from services.protocol.logs import ExpectedLast, Position, check_log_name, parse_time

# ``--since``: a whole number of seconds, minutes, hours or days.
_DURATION = re.compile(r"([0-9]{1,9})([smhd])")
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

# -- arguments ------------------------------------------------------------------


def name_argument(value: str) -> str:
    """A log name as typer's callback: ``BadParameter`` with the gateway's rule."""
    try:
        return check_log_name(value)
    except InvalidArgument as exc:
        raise typer.BadParameter(exc.message) from None


def cursor_argument(value: str) -> str:
    """A durable cursor's name as typer's callback (the rules of log names)."""
    try:
        return check_cursor_name(value)
    except InvalidArgument as exc:
        raise typer.BadParameter(exc.message) from None


def cursor_option(value: str | None) -> str | None:
    return cursor_argument(value) if value is not None else None


def position_option(value: str | None) -> str | None:
    """``LID:EID`` (non-negative integers) as typer's callback, normalised."""
    if value is None:
        return None
    try:
        return str(Position.parse(value.strip()))
    except InvalidArgument as exc:
        raise typer.BadParameter(f"{exc.message}, got {value!r}") from None


def time_option(value: str | None) -> str | None:
    """``--from-time``: ms since the epoch or RFC 3339 (the gateway's rule)."""
    if value is not None:
        try:
            parse_time(value.strip(), "--from-time")
        except InvalidArgument as exc:
            raise typer.BadParameter(exc.message) from None
    return value


def duration_option(value: str | None) -> str | None:
    """``--since``: ``10m``, ``36h``... (s, m, h or d)."""
    if value is not None and _DURATION.fullmatch(value.strip()) is None:
        raise typer.BadParameter(
            f"must be a whole number and a unit s, m, h or d (e.g. 10m), got {value!r}"
        )
    return value


def start_time(since: str | None, from_time: str | None, now_ms: int) -> int | None:
    """Where a read starts in time (ms since the epoch): ``since`` (a duration checked by
    ``duration_option``) before ``now_ms``, or ``from_time``; None for neither."""
    if since is not None:
        found = present(_DURATION.fullmatch(since.strip()), "a checked duration")
        return max(0, now_ms - int(found.group(1)) * _UNIT_MS[found.group(2)])
    if from_time is not None:
        return parse_time(from_time.strip(), "--from-time")
    return None


def key_option(value: str | None) -> str | None:
    """An ``Idempotency-Key``: 1-128 printable ASCII characters."""
    if value is None:
        return None
    try:
        return check_key(value)
    except InvalidArgument as exc:
        raise typer.BadParameter(exc.message) from None


def expect_option(value: str | None) -> str | None:
    """An ``Expected-Last-Position``: ``LID:EID`` or ``none``."""
    if value is None:
        return None
    try:
        return str(ExpectedLast.parse(value))
    except InvalidArgument as exc:
        raise typer.BadParameter(exc.message) from None


def request_key(key: str, index: int) -> str:
    """The key of the ``index``-th request of one append: ``key`` for the first and
    ``key#N`` after it, so re-running the same command with the same input, --batch and
    --key sends every request again under the key it had (and appends nothing twice)."""
    derived = key if index == 0 else f"{key}#{index}"
    if len(derived) > KEY_MAX_CHARS:
        raise InvalidArgument(
            f"--key is too long for {index + 1} requests: {derived!r} is over "
            f"{KEY_MAX_CHARS} characters"
        )
    return derived


def position_text(value: Any) -> str:
    """A position of an answer (``"LID:EID"`` or ``{"ledger_id", "entry_id"}``) as text."""
    try:
        return str(Position.from_api(value))
    except InvalidArgument as exc:
        raise QuireError(f"the gateway answered a bad position {value!r}") from exc


# -- appending ------------------------------------------------------------------


class LogAppender:
    """Sends records in order, one request at a time, and sums up what was acknowledged.

    One record goes as a raw body, several as a JSON batch. With ``key`` each request
    carries ``Idempotency-Key`` (``request_key``). With ``expect`` (``LID:EID`` or
    ``none``) the first request carries ``Expected-Last-Position: expect`` and each later
    one the last position of the request before it: the records land one after the
    other right after ``expect``, or the append stops at 412 ``position_mismatch``."""

    def __init__(
        self, client: GatewayClient, name: str, key: str | None = None, expect: str | None = None
    ) -> None:
        self.client = client
        self.name = name
        self.key = key
        self.expect = expect
        self.path = f"/v1/logs/{name}/records"
        self.requests = 0
        self.records = 0
        self.bytes = 0
        self.first_position: str | None = None
        self.last_position: str | None = None

    def send(self, payloads: list[bytes]) -> None:
        if not payloads:
            return
        headers: dict[str, str] = {}
        if self.key is not None:
            headers["Idempotency-Key"] = request_key(self.key, self.requests)
        if self.expect is not None:
            headers["Expected-Last-Position"] = self.last_position or self.expect
        if len(payloads) == 1:
            headers["Content-Type"] = "application/octet-stream"
            answer = self.client.json("POST", self.path, content=payloads[0], headers=headers)
            first = last = position_text(answer["position"])
        else:
            body = {"entries": [base64.b64encode(p).decode() for p in payloads]}
            answer = self.client.json("POST", self.path, json=body, headers=headers)
            first = position_text(answer["first_position"])
            last = position_text(answer["last_position"])
        if self.first_position is None:
            self.first_position = first
        self.last_position = last
        self.requests += 1
        self.records += len(payloads)
        self.bytes += sum(map(len, payloads))

    def finish(self) -> None:
        """Nothing to wait for: each request was answered (``StreamAppender`` waits)."""

    def close(self) -> None:
        """The client is the command's own (closed by it)."""

    def summary(self) -> dict[str, Any]:
        return append_summary(
            self.name, self.records, self.bytes, self.first_position, self.last_position
        )


def append_summary(
    name: str, records: int, size: int, first: str | None, last: str | None
) -> dict[str, Any]:
    """The JSON summary of ``quire log append`` (REST or ``--stream``)."""
    out: dict[str, Any] = {
        "log": name,
        "records": records,
        "bytes": size,
        "first_position": first,
        "last_position": last,
    }
    if records == 1:
        out["position"] = first
    return out


# -- reading --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PositionedRecord:
    """One record read from a log, with its position (``LID:EID``) and its time (ms
    since the epoch; None for data written before every entry carried one)."""

    position: str
    data: bytes
    time: int | None = None


@dataclass(frozen=True, slots=True)
class Page:
    records: list[PositionedRecord]
    next: str | None
    caught_up: bool


def get_page(
    client: GatewayClient,
    name: str,
    start: str | None,
    limit: int,
    wait_ms: int = 0,
    from_time: int | None = None,
    cursor: str | None = None,
) -> Page:
    """One ``GET /v1/logs/{name}/records`` answer, positions as text (from ``start``,
    from the first record stamped at or after ``from_time``, or just after durable
    cursor ``cursor``'s position)."""
    params: dict[str, str | int] = {"limit": min(limit, LIST_LIMIT_MAX)}
    if start is not None:
        params["from"] = start
    if from_time is not None:
        params["from_time"] = from_time
    if cursor is not None:
        params["cursor"] = cursor
    if wait_ms:
        params["wait_ms"] = min(wait_ms, LAC_WAIT_MAX_MS)
    doc = client.json("GET", f"/v1/logs/{name}/records", params=params)
    try:
        records = [
            PositionedRecord(
                position_text(r["position"]),
                base64.b64decode(r["data"], validate=True),
                _time_of(r.get("time")),
            )
            for r in doc["records"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise QuireError(f"the gateway's page of records is malformed ({exc})") from exc
    following = doc.get("next")
    return Page(records, position_text(following) if following is not None else start,
                bool(doc.get("caught_up")))  # fmt: skip


def _time_of(value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"a record's time is {type(value).__name__}")


def read_records(
    client: GatewayClient,
    name: str,
    start: str | None,
    limit: int | None,
    from_time: int | None = None,
    cursor: str | None = None,
) -> Iterator[Page]:
    """Pages from ``start`` (or the first record stamped at or after ``from_time``, or
    just after durable cursor ``cursor``'s position) until ``limit`` records were read or
    the read caught up with what is readable now."""
    left = limit
    position = start
    while left is None or left > 0:
        size = LIST_LIMIT_MAX if left is None else left
        page = get_page(client, name, position, size, from_time=from_time, cursor=cursor)
        from_time = cursor = None  # the pages after the first go on from ``next``
        yield page
        if left is not None:
            left -= len(page.records)
        if page.caught_up or (not page.records and page.next == position):
            return
        position = page.next


def render(record: PositionedRecord, as_json: bool, positions: bool) -> bytes:
    """One record as one output line: its text (undecodable bytes escaped), optionally
    after ``LID:EID`` and a tab, or ``{"position", "data" (base64), "time"}``."""
    if as_json:
        return json.dumps(_record_json(record)).encode() + b"\n"
    prefix = f"{record.position}\t".encode() if positions else b""
    return prefix + record.data.decode("utf-8", errors="backslashreplace").encode() + b"\n"


def page_json(
    records: list[PositionedRecord], following: str | None, caught_up: bool
) -> dict[str, Any]:
    """What ``quire log read --json`` prints: the API's page, positions as text."""
    return {
        "records": [_record_json(r) for r in records],
        "next": following,
        "caught_up": caught_up,
    }


def _record_json(record: PositionedRecord) -> dict[str, Any]:
    return {
        "position": record.position,
        "data": base64.b64encode(record.data).decode(),
        "time": record.time,
    }


def write_records(
    records: list[PositionedRecord], as_json: bool, positions: bool, out: IO[bytes] | None = None
) -> int:
    """Write ``records`` to ``out`` (stdout by default); the number of bytes written."""
    sink = sys.stdout.buffer if out is None else out
    written = 0
    for record in records:
        line = render(record, as_json, positions)
        sink.write(line)
        written += len(line)
    sink.flush()
    return written


def tail_records(
    client: GatewayClient,
    name: str,
    start: str | None,
    follow: bool,
    wait_ms: int,
    as_json: bool,
    positions: bool,
) -> None:
    """Print pages from ``start`` until caught up or, with ``follow``, for ever: each long
    poll waits ``wait_ms`` at the gateway on the ``next`` of the page before."""
    position = start
    while True:
        began = time.monotonic()
        page: Page = get_page(client, name, position, LIST_LIMIT_MAX, wait_ms if follow else 0)
        write_records(page.records, as_json, positions)
        if page.caught_up and not follow:
            return
        if not page.records and page.next == position:
            if not follow:
                return
            # Nothing, and the gateway did not wait (e.g. a log without ledgers yet).
            if time.monotonic() - began < EMPTY_POLL_BACKOFF_S:
                time.sleep(EMPTY_POLL_BACKOFF_S)
        position = page.next
