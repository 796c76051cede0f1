"""Example Spark jobs of the Quire connector, each runnable with ``python -m`` or
``spark-submit`` (docs/spark.md):

    export_parquet     a log (or ledgers) -> a Parquet dataset
    ingest             a Parquet or JSON-lines dataset -> a log (one atomic commit)
    transform_stream   tail one log, transform each record, write to another log
                       exactly once (a checkpoint directory)

``common`` holds what they share: the gateway options and the SparkSession.
"""
