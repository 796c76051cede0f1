"""A log as a Structured Streaming source (``spark.readStream.format("quire")``).

Offsets are positions: ``{"position": "LID:EID"}``, the next record to read (so a
micro-batch reads ``[start, end)``); ``{"position": null}`` is the beginning of a log
that had no ledger yet. Options, besides ``gateway``, ``log``, ``token``, ``password``
and the TLS options (``caFile``, ``certFile``, ``keyFile``: services/spark/options.py):

    startingPosition   where a new query (no checkpoint) starts: "earliest" (default,
                       the log's first ledger, entry 0), "latest" (what is readable
                       when the query starts) or a position "LID:EID"
    startingTimestamp  instead of startingPosition: a new query starts at the first
                       record stamped at or after this time (ms since the Unix epoch
                       or RFC 3339; one call on the driver, the gateway's ``from_time``)
    partitionEntries   at most this many entries per partition (default 100,000)

The latest offset is the end of what is readable now, found the way the gateway's log
read goes (gateway/logs/reads.py): through the log's ledgers in order, each CLOSED one
up to its last entry, and the first ledger that is not closed up to its LAC (``GET
/v1/ledgers/{id}/lac``, which never fences); nothing after an open ledger is read
before it closes. An end inside an open ledger is moved back to the end of the last
whole batch (batches are atomic to readers, ``log_records.visible``): the driver reads
the entry at the LAC (and, only when a batch is still being written, a few before it)
to see where its batch ends. Every end offset is thus a batch boundary or the end of
a closed ledger, so a range ``[first, end)`` of one ledger shows exactly the records
visible with ``end - 1`` as the readable end; a batch a crashed writer cut short at
the end of a closed ledger never shows.

A micro-batch's partitions are bounded entry ranges of each ledger between the two
offsets, read on executors with the binary range read. A start position whose ledger
is no longer in the log (truncated) fails the query with a message saying so.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from services.errors import InvalidArgument
from services.protocol import log_records
from services.protocol.logs import Position, check_log_name
from services.spark.client import INVALID_OPTION, QuireSparkError
from services.spark.limits import (
    BOUNDARY_SCAN_ENTRIES,
    DEFAULT_PARTITION_ENTRIES,
    PARTITION_ENTRIES_MAX,
)
from services.spark.options import parse_timestamp, tls_options
from services.spark.stream_client import StreamClient

# The code of a position no longer in the log (its ledger truncated or deleted).
POSITION_GONE = "position_not_in_log"
BAD_OFFSET = "bad_offset"


@dataclass(frozen=True, slots=True)
class LedgerRange(InputPartition):
    """Entries ``first..last`` of one ledger; ``end`` is the readable end the planning
    used (a record shows when its whole batch is within ``end``)."""

    ledger_id: int
    first: int
    last: int
    end: int


def _option(options: Mapping[str, str], key: str) -> str | None:
    """An option's value (Spark hands keys over in lower case; a dict may not)."""
    for k, v in options.items():
        if k.lower() == key.lower():
            return None if v is None else str(v)
    return None


def _offset(position: Position | None) -> dict[str, Any]:
    return {"position": None if position is None else str(position)}


def _position(offset: Mapping[str, Any]) -> Position | None:
    text = offset.get("position")
    if text is None:
        return None
    try:
        return Position.parse(str(text), "offset position")
    except InvalidArgument as exc:
        raise QuireSparkError(BAD_OFFSET, f"a bad offset {dict(offset)!r}: {exc}") from exc


class QuireStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        gateway = _option(options, "gateway")
        if not gateway or not gateway.strip():
            raise QuireSparkError(
                INVALID_OPTION, "option 'gateway' is required (the gateway's URL)"
            )
        name = _option(options, "log")
        if name is None:
            raise QuireSparkError(INVALID_OPTION, "option 'log' is required: a stream reads a log")
        try:
            self.log = check_log_name(name)
        except InvalidArgument as exc:
            raise QuireSparkError(INVALID_OPTION, f"option 'log': {exc}") from exc
        self.client = StreamClient(
            gateway.strip(),
            _option(options, "token"),
            _option(options, "password"),
            tls_options(options),
        )
        starting = _option(options, "startingPosition")
        self.starting = (starting or "earliest").strip()
        self.starting_ms = parse_timestamp(options, "startingtimestamp")
        if self.starting_ms is not None and starting is not None:
            raise QuireSparkError(
                INVALID_OPTION,
                "give the option 'startingPosition' or 'startingTimestamp', not both",
            )
        if self.starting not in ("earliest", "latest"):
            try:
                Position.parse(self.starting)
            except InvalidArgument as exc:
                raise QuireSparkError(
                    INVALID_OPTION,
                    f'option \'startingPosition\' must be "earliest", "latest" or '
                    f"LID:EID, not {self.starting!r}",
                ) from exc
        entries = _option(options, "partitionEntries") or str(DEFAULT_PARTITION_ENTRIES)
        if not entries.isdigit() or not 1 <= int(entries) <= PARTITION_ENTRIES_MAX:
            raise QuireSparkError(
                INVALID_OPTION,
                f"option 'partitionEntries' must be 1..{PARTITION_ENTRIES_MAX}, not {entries!r}",
            )
        self.partition_entries = int(entries)
        # Driver-side caches: closed ledgers' last entries (they never change) and the
        # last latest offset (the next one is never before it).
        self._closed: dict[int, int] = {}
        self._latest: Position | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_closed"], state["_latest"] = {}, None
        return state

    # ------------------------------------------------------------ the driver

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        if self.starting_ms is not None:
            return _offset(self.client.gateway.position_at_time(self.log, self.starting_ms))
        if self.starting == "earliest":
            ledgers = self.client.log(self.log)
            return _offset(Position(ledgers[0], 0) if ledgers else None)
        if self.starting == "latest":
            return self.latestOffset()
        position = Position.parse(self.starting)
        ledgers = self.client.log(self.log)
        if position.ledger_id not in ledgers:
            raise QuireSparkError(
                INVALID_OPTION,
                f"startingPosition {position} is not in log {self.log} "
                f"(its ledgers: {_shown(ledgers)})",
            )
        closed, last = self._ledger(position.ledger_id)
        if closed and position.entry_id > last + 1:
            raise QuireSparkError(
                INVALID_OPTION,
                f"startingPosition {position} is past the end of ledger "
                f"{position.ledger_id} (last entry {last})",
            )
        return _offset(position)

    def latestOffset(self) -> dict[str, Any]:  # noqa: N802
        ledgers = self.client.log(self.log)
        if not ledgers:
            return _offset(self._latest)
        previous = self._latest
        index = 0
        if previous is not None and previous.ledger_id in ledgers:
            index = ledgers.index(previous.ledger_id)  # earlier ledgers are closed
        latest = Position(ledgers[0], 0)
        for lid in ledgers[index:]:
            closed, last = self._ledger(lid)
            if closed:
                latest = Position(lid, last + 1)
                continue
            lower = previous.entry_id if previous and previous.ledger_id == lid else 0
            latest = Position(lid, self._batch_end(lid, self.client.lac(lid), lower))
            break
        if (
            previous is not None
            and previous.ledger_id == latest.ledger_id
            and previous.entry_id > latest.entry_id
        ):
            latest = previous  # a LAC seen lower than before: keep the offsets monotonic
        self._latest = latest
        return _offset(latest)

    def partitions(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> Sequence[LedgerRange]:
        first, stop = _position(start), _position(end)
        if stop is None:
            return []
        ledgers = self.client.log(self.log)
        if first is None:
            first = Position(ledgers[0], 0) if ledgers else stop
        i = self._index(ledgers, first, "the stream's position")
        j = self._index(ledgers, stop, "the planned end")
        if j < i or (i == j and stop.entry_id < first.entry_id):
            raise QuireSparkError(BAD_OFFSET, f"the planned end {stop} is before the start {first}")
        out: list[LedgerRange] = []
        for k in range(i, j + 1):
            lid = ledgers[k]
            begin = first.entry_id if k == i else 0
            if k < j:
                closed, last = self._ledger(lid)
                if not closed:
                    raise QuireSparkError(BAD_OFFSET, f"ledger {lid} before {stop} is not closed")
            else:
                last = stop.entry_id - 1
            for lo in range(begin, last + 1, self.partition_entries):
                out.append(LedgerRange(lid, lo, min(last, lo + self.partition_entries - 1), last))
        return out

    def commit(self, end: Mapping[str, Any]) -> None:
        """Nothing to do: the log keeps its records; the offsets live in the checkpoint."""

    def stop(self) -> None:
        self.client.close()

    # ------------------------------------------------------------ executors

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int, bytes]]:
        if not isinstance(partition, LedgerRange):
            raise QuireSparkError(BAD_OFFSET, f"not a partition of this reader: {partition!r}")
        lid, end = partition.ledger_id, partition.end
        try:
            entries = self.client.read_range(lid, partition.first, partition.last)
            for entry_id, data in log_records.visible_records(entries, end):
                yield (lid, entry_id, data)
        finally:
            self.client.close()

    # ------------------------------------------------------------ helpers

    def _ledger(self, ledger_id: int) -> tuple[bool, int]:
        if ledger_id in self._closed:
            return True, self._closed[ledger_id]
        closed, last = self.client.ledger(ledger_id)
        if closed:
            self._closed[ledger_id] = last
        return closed, last

    def _index(self, ledgers: list[int], position: Position, what: str) -> int:
        if position.ledger_id not in ledgers:
            raise QuireSparkError(
                POSITION_GONE,
                f"{what} {position} is no longer in log {self.log}: ledger "
                f"{position.ledger_id} was truncated or deleted (the log's ledgers: "
                f"{_shown(ledgers)}); start the query again with a new checkpoint",
            )
        return ledgers.index(position.ledger_id)

    def _batch_end(self, ledger_id: int, lac: int, lower: int) -> int:
        """The entry after the last whole batch of entries ``lower..lac`` of an open
        ledger (``lower`` is a batch boundary): the largest ``e + 1`` such that entry
        ``e``'s batch ends within the LAC; ``lower`` when there is none."""
        hi = lac
        while hi >= lower:
            lo = max(lower, hi - BOUNDARY_SCAN_ENTRIES + 1)
            entries = list(self.client.read_range(ledger_id, lo, hi))
            for entry_id, payload in reversed(entries):
                if log_records.visible(entry_id, log_records.decode(payload), lac):
                    return entry_id + 1
            hi = lo - 1
        return lower


def _shown(ledgers: list[int]) -> str:
    if len(ledgers) <= 10:
        return str(ledgers)
    return f"[{ledgers[0]}, …, {ledgers[-1]}] ({len(ledgers)} ledgers)"
