"""Spark integration: the ``bmq`` data source (Spark 4 Python Data Source API) and the helpers
of the Parquet export job (``spark_jobs/export_to_parquet.py``). Needs ``pip install
'bmq[spark]'`` (pyspark 4, pyarrow, numpy) and Java 17."""

from bmq.startup import missing_package

# What the extra `spark` installs: without one of them importing bmq.spark (or any module of it)
# says which is missing and the pip line that installs it, not a bare ModuleNotFoundError.
SPARK_PACKAGES = frozenset({"pyspark", "py4j", "pyarrow", "numpy"})

try:
    import numpy  # noqa: F401 (decoding and the Parquet job need them; Spark only pyspark)
    import pyarrow  # noqa: F401

    from bmq.spark.datasource import BMQDataSource
except ModuleNotFoundError as error:
    raise missing_package(error, "spark", "bmq.spark", SPARK_PACKAGES) or error from None

__all__ = ["BMQDataSource"]
