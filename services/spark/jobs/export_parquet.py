"""Export a log (or ledgers) to a Parquet dataset: one row per record, columns
``ledger_id``, ``entry_id``, ``data`` (binary; ``--text`` stores it as a UTF-8 string).

    python -m services.spark.jobs.export_parquet --gateway http://127.0.0.1:8080 \\
        --log orders --out /tmp/orders.parquet
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from services.spark.jobs.common import connection, parser, session


def arguments() -> argparse.ArgumentParser:
    p = parser("Export a Quire log (or ledgers) to Parquet.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--log", help="the log to export")
    what.add_argument("--ledgers", help='ledger ids to export, e.g. "1,2,7"')
    p.add_argument("--out", required=True, help="the Parquet directory to write")
    p.add_argument("--text", action="store_true", help="store data as a UTF-8 string")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    return p


def run(spark: Any, args: argparse.Namespace) -> int:
    """Export; the number of records written."""
    reader = spark.read.format("quire").options(**connection(args))
    if args.log:
        reader = reader.option("log", args.log)
    else:
        reader = reader.option("ledgers", args.ledgers)
    df = reader.load()
    if args.text:
        df = df.selectExpr("ledger_id", "entry_id", "CAST(data AS STRING) AS data")
    df.write.mode("overwrite" if args.overwrite else "errorifexists").parquet(args.out)
    count: int = spark.read.parquet(args.out).count()
    return count


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    spark = session("quire-export-parquet", args.master)
    try:
        count = run(spark, args)
    finally:
        spark.stop()
    print(f"exported {count} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
