"""The data source ``quire``: one class that hands out the batch and streaming readers
and writers (each in its own module)."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

SCHEMA = "ledger_id long, entry_id long, data binary"


class QuireDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "quire"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from services.spark.batch_read import QuireReader

        return QuireReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from services.spark.batch_write import QuireWriter

        return QuireWriter(self.options, schema, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        from services.spark.stream_read import QuireStreamReader

        return QuireStreamReader(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        from services.spark.stream_write import QuireStreamWriter

        return QuireStreamWriter(self.options, schema, overwrite)
