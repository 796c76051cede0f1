"""What the example jobs share: the connection arguments and a SparkSession with the
connector registered."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

DEFAULT_MASTER = "local[2]"


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with ``--gateway``, ``--token``, ``--password``, ``--ca-file``,
    ``--master``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--gateway", required=True, help="the gateway's URL, e.g. http://h:8080")
    p.add_argument("--token", help="the API token (Authorization: Bearer)")
    p.add_argument("--password", help="the ledger password, for password ledgers")
    p.add_argument(
        "--ca-file",
        help="a PEM bundle of the CAs that sign an https gateway's certificate "
        "(default: QUIRE_CA_FILE, else the system's)",
    )
    p.add_argument(
        "--master",
        default=None,
        help=f"Spark master (default {DEFAULT_MASTER}; spark-submit's --master wins)",
    )
    return p


def session(app: str, master: str | None) -> Any:
    """A SparkSession for a job. Its Python workers run this interpreter unless
    PYSPARK_PYTHON says otherwise (they need pyarrow)."""
    from pyspark.sql import SparkSession

    from services.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app).config("spark.ui.enabled", "false")
    if master is not None:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not under spark-submit (which starts the JVM first and says so in this
        # variable, with its own --master): the default master.
        builder = builder.master(DEFAULT_MASTER)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def connection(args: argparse.Namespace) -> dict[str, str]:
    """The connector options of the connection arguments."""
    options = {"gateway": args.gateway}
    if args.token:
        options["token"] = args.token
    if args.password:
        options["password"] = args.password
    if args.ca_file:
        options["caFile"] = args.ca_file
    return options
