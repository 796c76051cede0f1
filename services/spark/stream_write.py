"""The streaming sink: ``df.writeStream.format("quire")``, exactly once per micro-batch.

    (df.writeStream.format("quire").option("gateway", URL).option("log", NAME)
       .option("checkpointLocation", DIR).start())

Each micro-batch is written like a batch job (``batch_write``: one ledger per task) and
committed into the log in ONE call with the commit ``{"id": <the query's commit id>,
"sequence": <batch id>}``: the log records the last committed batch id of the query
with the ledgers, in the same CAS. A batch the log has recorded already (the query
restarted after the commit landed but before Spark recorded the batch in its
checkpoint, so Spark runs it again) changes nothing and its new ledgers are deleted,
so every record lands once across restarts.

The commit id: option ``commit_id`` when given (1-200 characters of A-Za-z0-9._:-);
else derived from the checkpoint location (option ``checkpointLocation``, which Spark
passes to the sink), so a query restarted from the same checkpoint keeps it. A query
without either (e.g. a checkpoint set only through
``spark.sql.streaming.checkpointLocation``) is refused with a message saying so.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from services.spark import ingest
from services.spark.batch_write import (
    QuireCommitMessage,
    abort_job,
    check_schema,
    task_messages,
    write_partition,
)
from services.spark.client import QuireSparkError
from services.spark.ingest import WriteOptions

COMMIT_ID_OPTION = "commit_id"
CHECKPOINT_OPTION = "checkpointlocation"


def checkpoint_commit_id(location: str) -> str:
    """A stable commit id for a checkpoint location (a local path made absolute)."""
    where = location.strip()
    if "://" not in where and not where.startswith("file:"):
        where = "file:" + os.path.abspath(where)
    return "ckpt-" + hashlib.sha256(where.encode("utf-8")).hexdigest()[:40]


def commit_id_of(options: Mapping[str, str]) -> str:
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    if opts.get(COMMIT_ID_OPTION):
        return ingest.check_commit_id(opts[COMMIT_ID_OPTION])
    if opts.get(CHECKPOINT_OPTION):
        return checkpoint_commit_id(opts[CHECKPOINT_OPTION])
    raise QuireSparkError(
        "invalid_option",
        'writeStream.format("quire") needs option("checkpointLocation", DIR) or '
        'option("commit_id", ID): the log records the last committed batch under that '
        "id so a restarted query writes each batch once",
    )


class QuireStreamWriter(DataSourceStreamWriter):
    """The sink of one streaming query (made on the driver; pickled to the tasks)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise QuireSparkError(
                "invalid_option", 'a log is append-only: use outputMode("append")'
            )
        check_schema(schema)
        self.options = WriteOptions.parse(options)
        self.commit_id = commit_id_of(options)
        with ingest.IngestClient(self.options) as client:
            client.ensure_log()

    def write(self, iterator: Iterator[Row]) -> QuireCommitMessage:
        return write_partition(self.options, self.commit_id, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Attach the batch's ledgers under (commit id, batch id), or delete them when
        the log recorded this batch (or a later one) already."""
        ours = task_messages(messages)
        ledgers = ingest.ledger_order(ours)
        extra = [lid for lid in ingest.all_ledgers(ours) if lid not in ledgers]
        with ingest.IngestClient(self.options) as client:
            client.commit(ledgers, extra, (self.commit_id, batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Delete the batch's ledgers. A task without a message may have left its ledger
        (its worker died): the ledgers made since the query's last committed batch are
        looked up (``IngestClient.query_mark``), not every ledger of the cluster."""
        after: int | None = None
        if any(message is None for message in task_messages(messages)):
            with ingest.IngestClient(self.options) as client:
                after = client.query_mark(self.commit_id)
        abort_job(self.options, self.commit_id, messages, after=after)
