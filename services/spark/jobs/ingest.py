"""Ingest a Parquet or JSON-lines dataset into a log, atomically: all of it lands in
the log in one commit, or (the job failed) none of it.

    python -m services.spark.jobs.ingest --gateway http://127.0.0.1:8080 \\
        --log orders --input /data/orders.jsonl --format json

JSON lines: each line becomes one record, as it is. Parquet: the column ``--column``
(string or binary; default ``data`` when there is one), else each row as a JSON
object. The log is created when missing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from services.spark.jobs.common import connection, parser, session


def arguments() -> argparse.ArgumentParser:
    p = parser("Ingest a Parquet or JSON-lines dataset into a Quire log.")
    p.add_argument("--log", required=True, help="the log to append to (created if missing)")
    p.add_argument("--input", required=True, help="a file or directory to read")
    p.add_argument("--format", choices=("parquet", "json"), default="parquet")
    p.add_argument("--column", help="Parquet: the column holding each record")
    return p


def records(spark: Any, args: argparse.Namespace) -> Any:
    """The dataset as one ``data`` column, a record per row."""
    if args.format == "json":
        return spark.read.text(args.input).selectExpr("value AS data")
    source = spark.read.parquet(args.input)
    column = args.column or ("data" if "data" in source.columns else None)
    if column is None:
        return source.selectExpr("to_json(struct(*)) AS data")
    if column not in source.columns:
        raise SystemExit(f"ingest: --column {column!r} is not a column of {args.input}")
    return source.selectExpr(f"`{column}` AS data")


def run(spark: Any, args: argparse.Namespace) -> int:
    """Ingest; the number of records appended (all in one commit)."""
    df = records(spark, args)
    count: int = df.count()
    writer = df.write.format("quire").options(**connection(args)).option("log", args.log)
    writer.mode("append").save()
    return count


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    spark = session("quire-ingest", args.master)
    try:
        count = run(spark, args)
    finally:
        spark.stop()
    print(f"ingested {count} records into log {args.log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
