"""Spark integration: the ``bmq`` data source (Spark 4 Python Data Source API) and the helpers
of the Parquet compaction job (``spark_jobs/compact_to_parquet.py``). Needs ``pip install
'bmq[spark]'`` (pyspark 4, pyarrow) and Java 17."""

from bmq.spark.datasource import BMQDataSource

__all__ = ["BMQDataSource"]
