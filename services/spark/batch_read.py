"""The batch reader of the data source ``quire``.

``partitions()`` plans on the driver from the log and ledger metadata and a LAC
snapshot (``plan``), reading no data; every option and gateway error is raised there,
as one ``QuireSparkError`` whose text carries the gateway's error code. ``read()``
runs in the executors: it streams its partition's entry range in the gateway's binary
format and yields Arrow record batches of ``(ledger_id, entry_id, data)``; for a log it
strips the record envelopes and keeps only visible records (whole appends).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from services.protocol import log_records
from services.spark import limits
from services.spark.client import SHORT_READ, QuireSparkError, SparkGatewayClient
from services.spark.options import ReadOptions, parse_read_options
from services.spark.plan import LedgerView, Partition, plan_ledgers, plan_log

ARROW_SCHEMA = pa.schema(
    [("ledger_id", pa.int64()), ("entry_id", pa.int64()), ("data", pa.binary())]
)


class QuirePartition(InputPartition):
    """One planned range (``plan.Partition``), as Spark hands it to ``read``."""

    def __init__(self, range_: Partition) -> None:
        super().__init__(range_)
        self.range = range_


def view_of(client: SparkGatewayClient, ledger_id: int, password: str | None) -> LedgerView:
    """The ledger now: CLOSED → its last entry; otherwise the LAC the gateway reports
    (the writer's when this gateway writes it, else the bookies')."""
    doc = client.ledger(ledger_id)
    length = int(doc.get("length") or 0)
    if doc["state"] == "CLOSED":
        last = doc["last_entry_id"]
        return LedgerView(ledger_id, True, -1 if last is None else int(last), length)
    return LedgerView(ledger_id, False, client.lac(ledger_id, password), length)


def plan(options: ReadOptions, client: SparkGatewayClient) -> list[Partition]:
    """The read's partitions (driver side; gateway calls for metadata and LACs only)."""
    if options.ledgers is not None:
        return plan_ledgers(
            options.ledgers,
            lambda lid: view_of(client, lid, options.password),
            options.partition_entries,
            options.partition_bytes,
        )
    name = options.log
    if name is None:
        raise QuireSparkError("invalid_option", "no log to read")
    start = options.start
    if options.starting_timestamp is not None:
        start = client.position_at_time(name, options.starting_timestamp)
    log = client.get_log(name)

    def log_view(ledger_id: int) -> LedgerView | None:
        try:
            return view_of(client, ledger_id, None)
        except QuireSparkError as exc:
            if exc.code == "ledger_not_found":
                return None  # truncated meanwhile: the read stops there, as reads.py's
            raise

    return plan_log(
        name,
        [int(i) for i in log["ledgers"]],
        log_view,
        options.partition_entries,
        options.partition_bytes,
        start,
        options.end,
    )


Columns = tuple[list[int], list[bytes]]  # entry ids and data, one chunk of rows


def read_partition(
    client: SparkGatewayClient, part: Partition, password: str | None
) -> Iterator[Columns]:
    """The partition's rows as columns ``(entry ids, data)``, in chunks: every entry of
    the range for ledgers; the visible records' data for a log. Fewer entries than
    planned (the gateway served less than the snapshot promised) is ``QuireSparkError``.
    Each payload is copied once, straight out of the chunk it came in, without its log
    envelope (``log_records.data_span``): this loop runs once per record."""
    expected = part.first
    limit = part.end
    span_of = log_records.data_span
    for data, spans in client.read_range_spans(part.ledger_id, part.first, part.last, password):
        ids: list[int] = []
        datas: list[bytes] = []
        for entry_id, start, end in spans:
            if entry_id != expected:
                raise QuireSparkError(
                    SHORT_READ,
                    f"ledger {part.ledger_id}: entry {entry_id} came where {expected} was due",
                )
            expected += 1
            if part.is_log:
                start, remaining = span_of(data, start, end)
                if entry_id + remaining > limit:  # log_records.visible
                    # The rest of the snapshot is this one append, not readable whole.
                    if ids:
                        yield ids, datas
                    return
            ids.append(entry_id)
            datas.append(data[start:end])
        if ids:
            yield ids, datas
    if expected != part.last + 1:
        raise QuireSparkError(
            SHORT_READ,
            f"ledger {part.ledger_id}: entries {part.first}..{part.last} were planned, "
            f"the gateway served up to {expected - 1}",
        )


def to_batches(ledger_id: int, chunks: Iterator[Columns]) -> Iterator[pa.RecordBatch]:
    """Rows grouped into Arrow batches of at most ``ARROW_BATCH_ROWS`` rows and about
    ``ARROW_BATCH_BYTES`` of data (a batch may pass the byte bound by one chunk's worth
    of rows, bounded by the read's chunk size)."""
    ids: list[int] = []
    datas: list[bytes] = []
    size = 0
    for chunk_ids, chunk_datas in chunks:
        ids += chunk_ids
        datas += chunk_datas
        size += sum(map(len, chunk_datas))
        while len(ids) >= limits.ARROW_BATCH_ROWS or size >= limits.ARROW_BATCH_BYTES:
            cut = min(len(ids), limits.ARROW_BATCH_ROWS)
            yield _batch(ledger_id, ids[:cut], datas[:cut])
            ids, datas = ids[cut:], datas[cut:]
            size = sum(map(len, datas))
    if ids:
        yield _batch(ledger_id, ids, datas)


def _batch(ledger_id: int, ids: list[int], datas: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([ledger_id] * len(ids), pa.int64()),
            pa.array(ids, pa.int64()),
            pa.array(datas, pa.binary()),
        ],
        schema=ARROW_SCHEMA,
    )


@contextmanager
def plain_errors() -> Iterator[None]:
    """A ``QuireSparkError`` leaves without the frames below this one and without the
    httpx error it came from: Spark shows the failing job's Python traceback, and the
    message is all a user needs."""
    try:
        yield
    except QuireSparkError as exc:
        raise exc.with_traceback(None) from None


class QuireReader(DataSourceReader):
    """A batch read of a log or of ledgers (options: ``options``)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        with plain_errors():
            self.options = parse_read_options(options)
        self.schema = schema

    def _client(self) -> SparkGatewayClient:
        return SparkGatewayClient(self.options.gateway, self.options.token, tls=self.options.tls)

    def partitions(self) -> list[QuirePartition]:
        with plain_errors(), self._client() as client:
            return [QuirePartition(p) for p in plan(self.options, client)]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        part = getattr(partition, "range", None)
        if not isinstance(part, Partition):
            return  # nothing planned: Spark hands one empty partition
        password = None if part.is_log else self.options.password
        with plain_errors(), self._client() as client:
            yield from to_batches(part.ledger_id, read_partition(client, part, password))
