"""The Spark connector: the data source ``quire`` (PySpark 4 Python Data Source API).

    from services.spark import register
    register(spark)
    spark.read.format("quire").option("gateway", URL).option("log", NAME).load()

Batch reads (``batch_read``), batch writes (``batch_write``), a streaming source
(``stream_read``) and a streaming sink (``stream_write``), all through a gateway's
REST API (``client``). pyspark is imported only when the connector is used.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the data source ``quire`` with a SparkSession."""
    from services.spark.source import QuireDataSource

    spark.dataSource.register(QuireDataSource)
