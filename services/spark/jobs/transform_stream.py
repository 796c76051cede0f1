"""Tail one log, transform each record, and write the results to another log exactly
once (the query's checkpoint and the sink's commit ids; a restart with the same
``--checkpoint`` goes on where it stopped).

    python -m services.spark.jobs.transform_stream --gateway http://127.0.0.1:8080 \\
        --source orders --sink orders-upper --checkpoint /var/lib/quire/ckpt/upper \\
        --transform upper

Transforms: ``upper`` (the record as UTF-8 text, upper-cased) or ``json-field:NAME``
(the field NAME of a JSON record, as text; records without it are dropped).
``--available-now`` processes what the log holds and stops; else the job runs until
``--timeout-s`` (or forever).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from services.spark.jobs.common import connection, parser, session


def transform(df: Any, spec: str) -> Any:
    """The ``data`` column of the sink's rows for a transform ``spec``."""
    from pyspark.sql import functions as f

    text = f.col("data").cast("string")
    if spec == "upper":
        return df.select(f.upper(text).alias("data"))
    if spec.startswith("json-field:") and len(spec) > len("json-field:"):
        field = spec[len("json-field:") :]
        path = "$." + field if field.isidentifier() else f"$['{field}']"
        out = df.select(f.get_json_object(text, path).alias("data"))
        return out.where(f.col("data").isNotNull())
    raise argparse.ArgumentTypeError(f"unknown transform {spec!r}")


def arguments() -> argparse.ArgumentParser:
    p = parser("Tail a Quire log, transform its records, write them to another log.")
    p.add_argument("--source", required=True, help="the log to tail")
    p.add_argument("--sink", required=True, help="the log to write to")
    p.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    p.add_argument("--transform", default="upper", help='"upper" or "json-field:NAME"')
    p.add_argument(
        "--starting-position",
        default="earliest",
        help='a new query starts at "earliest", "latest" or LID:EID',
    )
    p.add_argument("--trigger-ms", type=int, default=1000, help="micro-batch interval")
    p.add_argument("--available-now", action="store_true", help="process what is there, stop")
    p.add_argument("--timeout-s", type=float, help="stop after this long")
    return p


def start(spark: Any, args: argparse.Namespace) -> Any:
    """The running streaming query."""
    source = (
        spark.readStream.format("quire")
        .options(**connection(args))
        .option("log", args.source)
        .option("startingPosition", args.starting_position)
        .load()
    )
    writer = (
        transform(source, args.transform)
        .writeStream.format("quire")
        .options(**connection(args))
        .option("log", args.sink)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_ms} milliseconds")
    return writer.start()


# With --available-now, runs of the query until one finds nothing new (a bound, not a
# tuning knob: each run but the last processes at least one batch).
AVAILABLE_NOW_RUNS_MAX = 100


def run(spark: Any, args: argparse.Namespace) -> None:
    """Run the query until it is done (``--available-now``), the time is up or it fails.

    Why ``--available-now`` may take more than one run: Spark 4.0 runs a source without
    its own Trigger.AvailableNow support (every Python data source) as one batch
    (SPARK-45178). After a stop between planning a batch and committing it, that one
    batch is the planned batch again, and records appended since would wait for the next
    run. So the job runs the query again until a run reads nothing (one short extra run
    when all went well)."""
    if not args.available_now:
        query = start(spark, args)
        if args.timeout_s is None:
            query.awaitTermination()
        elif not query.awaitTermination(args.timeout_s):
            query.stop()
        return
    for _ in range(AVAILABLE_NOW_RUNS_MAX):
        query = start(spark, args)
        try:
            done = (
                query.awaitTermination(args.timeout_s)
                if args.timeout_s
                else (query.awaitTermination() or True)
            )
        finally:
            query.stop()  # also when done: it waits for the run's thread to let go
        if not done:
            return
        if not any(progress.get("numInputRows") for progress in query.recentProgress):
            return


def main(argv: list[str] | None = None) -> int:
    p = arguments()
    args = p.parse_args(argv)
    if not (args.transform == "upper" or args.transform.startswith("json-field:")):
        p.error(f"--transform must be upper or json-field:NAME, not {args.transform!r}")
    spark = session("quire-transform-stream", args.master)
    try:
        run(spark, args)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
