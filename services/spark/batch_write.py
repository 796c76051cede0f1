"""Batch write of a DataFrame into a log: ``df.write.format("quire")``.

    df.write.format("quire").option("gateway", URL).option("log", NAME).mode("append").save()

The DataFrame has a ``data`` column, binary or string (UTF-8). The log is created when
missing (on the driver, before any task runs, so a wrong gateway or token fails at
once). Each task writes its rows into a ledger of its own (``ingest.write_task``:
custom metadata quire.log / quire.job / quire.task, deleted when the task fails); the
job's commit attaches every task's ledger, in partition order, to the log in ONE call
(it takes the writer role, fencing the last two ledgers, and leaves it free: a gateway
that was the writer gets ``not_writer`` afterwards). An aborted job deletes its task
ledgers; a task retried or run speculatively is committed once (one message per
partition reaches the commit), and the ledger of an attempt that lost is deleted by the
commit (it finds the job's ledgers by their quire.job tag among the ids made since the
job started). Only mode "append": overwrite is refused.

Options: ``gateway`` (URL, or URLs separated by commas), ``log``, ``token`` (API
token), ``request_records`` (records per append request, at most 10,000),
``ensemble_size`` / ``write_quorum`` / ``ack_quorum`` of the task ledgers, and the TLS
options ``caFile`` / ``certFile`` / ``keyFile`` (services/spark/options.py). Workers
run Python: set ``PYSPARK_PYTHON`` to an interpreter with this package, pyspark and
pyarrow installed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from services.spark import ingest
from services.spark.client import QuireSparkError
from services.spark.ingest import WriteOptions

DATA_COLUMN = "data"


@dataclass(frozen=True)
class QuireCommitMessage(WriterCommitMessage):
    """A task's ledger (None: the partition had no rows) and its partition."""

    ledger_id: int | None
    partition_id: int


def check_schema(schema: StructType) -> None:
    """The DataFrame must have a ``data`` column of binary or string."""
    fields = {f.name: f for f in schema.fields}
    data = fields.get(DATA_COLUMN)
    if data is None:
        names = ", ".join(fields) or "none"
        raise QuireSparkError(
            "invalid_schema", f"writing to quire needs a column 'data' (columns: {names})"
        )
    if not isinstance(data.dataType, BinaryType | StringType):
        raise QuireSparkError(
            "invalid_schema",
            f"column 'data' must be binary or string, not {data.dataType.simpleString()}",
        )


def task_ids() -> tuple[int, int]:
    """This task's partition and attempt numbers."""
    context = TaskContext.get()
    if context is None:
        return 0, 0
    return context.partitionId(), context.attemptNumber()


def rows_data(rows: Iterator[Row]) -> Iterator[bytes]:
    for row in rows:
        yield ingest.as_payload(row[DATA_COLUMN])


def write_partition(options: WriteOptions, job: str, rows: Iterator[Row]) -> QuireCommitMessage:
    partition, attempt = task_ids()
    ledger_id = ingest.write_task(options, job, partition, attempt, rows_data(rows))
    return QuireCommitMessage(ledger_id, partition)


class QuireWriter(DataSourceWriter):
    """The writer of one batch job (made on the driver; pickled to the tasks)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise QuireSparkError(
                "invalid_option",
                'a log is append-only: use mode("append") (overwrite is not supported)',
            )
        check_schema(schema)
        self.options = WriteOptions.parse(options)
        self.job = ingest.new_job_id()
        with ingest.IngestClient(self.options) as client:
            client.ensure_log()
            self.mark = client.ledger_mark()

    def write(self, iterator: Iterator[Row]) -> QuireCommitMessage:
        return write_partition(self.options, self.job, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Attach the task ledgers in partition order, then delete the job's other
        ledgers: a task attempt that lost to a speculative copy (or to its retry, its
        worker gone) made a ledger no message names. Once the attach answered the job
        has succeeded: finding and deleting those is best effort (a failure is logged; a
        ledger left over is in no log)."""
        ledgers = ingest.ledger_order(task_messages(messages))
        with ingest.IngestClient(self.options) as client:
            if ledgers:
                client.attach(ledgers)
            try:
                stray = client.job_ledgers(self.job, after=self.mark)
            except QuireSparkError as exc:
                ingest.log.warning("could not look up the job's stray ledgers: %s", exc)
                return
            client.delete_left_over([lid for lid in stray if lid not in ledgers])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_job(self.options, self.job, messages, after=self.mark)


def abort_job(
    options: WriteOptions,
    job: str,
    messages: list[WriterCommitMessage | None],
    after: int | None = None,
) -> None:
    """Delete the ledgers of an aborted job (never one a log lists: the gateway refuses).
    A task that failed sent no message: it deletes its own ledger, but one whose worker
    died first could not, and an attempt that lost to a speculative copy sends none; with
    a mark (``after``: ``IngestClient.ledger_mark`` or ``query_mark``) every ledger of the
    job above it is looked up (quire.job) and deleted too. Without one only the messages'
    ledgers are deleted: scanning every ledger of the cluster is no clean-up to run on a
    failure path (a ledger left is in no log)."""
    ours = task_messages(messages)
    ledgers = ingest.all_ledgers(ours)
    with ingest.IngestClient(options) as client:
        if after is not None:
            ledgers += [lid for lid in client.job_ledgers(job, after) if lid not in ledgers]
        client.discard(ledgers)


def task_messages(messages: list[WriterCommitMessage | None]) -> list[QuireCommitMessage | None]:
    return [m if isinstance(m, QuireCommitMessage) else None for m in messages]
