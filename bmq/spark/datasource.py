"""``spark.read.format("bmq")``: BMQ partitions as a Spark DataFrame (Python Data Source API).

    from bmq.spark import BMQDataSource
    spark.dataSource.register(BMQDataSource)
    df = (spark.read.format("bmq")
          .option("storage", "file:///var/lib/bmq")   # the brokers' own storage URL
          .option("topic", "orders")
          .option("startingOffsets", '{"orders": {"0": 23, "1": -2}}')
          .load())

Planning (``partitions()``) builds a read-only view of each selected partition (the durable
log, see ``bmq.storage.log.durable``) and cuts it into ranges of at most ``maxBytesPerPartition``
bytes of segment file, one Spark input partition each. Each task reads its byte range straight
from storage and hands Spark Arrow record batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from bmq.spark.planning import SourceOptions, plan
from bmq.spark.tasks import BMQInputPartition, read_partition

# The same columns as Spark's Kafka source (with includeHeaders=true); decode.ARROW_SCHEMA is
# the Arrow form. (Planning runs in fresh Python processes: numpy/pyarrow load only to read.)
SPARK_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int, "
    "headers array<struct<key: string, value: binary>>")


class BMQReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ranges = plan(self.options)
        if not ranges:
            return [BMQInputPartition(None)]
        return [BMQInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.options, partition.value)


class BMQDataSource(DataSource):
    """The ``bmq`` format. Options: ``storage`` (required), ``topic`` (required; several
    comma-separated), ``partitions``, ``startingOffsets``, ``endingOffsets``,
    ``failOnDataLoss``, ``includeHeaders``, ``maxBytesPerPartition``, ``verifyCrc``, ``filter``
    (a view's: its source read as the view) and
    ``storage.<name>`` settings for the filesystem; ``subscribePattern`` instead of ``topic``.
    Streams (``spark.readStream.format("bmq")``) also take ``maxOffsetsPerTrigger``,
    ``minOffsetsPerTrigger``, ``maxTriggerDelay`` and ``watch``. See docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return "bmq"

    def _options(self) -> SourceOptions:
        return SourceOptions.parse(self.options)

    def schema(self) -> str:
        opts = self._options()   # bad options fail here, at load()
        if opts.include_headers:
            return SPARK_SCHEMA_DDL
        return SPARK_SCHEMA_DDL.rsplit(", headers", 1)[0]

    def reader(self, schema: Any) -> DataSourceReader:
        return BMQReader(self._options().resolved())

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        from bmq.spark.streaming import BMQStreamReader

        return BMQStreamReader(self._options().resolved())
