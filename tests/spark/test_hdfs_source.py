"""The Spark source on HDFS: a cluster's broker writes its segments to a real HDFS
(MiniDFSCluster) and ``spark.read.format("bmq")`` reads them, every codec, headers and null
keys and values, including the segments the broker still has open (their last block is read
through WebHDFS: the ``dfs.namenode.http-address`` storage option, passed as
``storage.dfs.namenode.http-address``); so do a Structured Streaming query
(``spark.readStream``, into Spark's Parquet file sink) and the Parquet job. Streaming
through a broker's and the driver's kill -9 on HDFS: ``test_streaming_cluster.py`` (slow
set)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from hdfs_native import Client

from bmq.spark.parquet_export import JobConfig
from bmq.storage import PartitionLog, open_storage
from tests.cluster.conftest import (
    ClusterFactory,
    SharedStorage,
    cluster_factory,
    shared_storage,
    zookeeper,
)
from tests.hdfs import MiniHdfs
from tests.spark.conftest import CODECS, Produced, mixed_messages, produce
from tests.spark.test_datasource import check_rows, rows_by_offset
from tests.spark.test_parquet_export import check_exact, output_rows, run_job
from tests.spark.test_streaming import check_equal, run_available_now, sink_rows

__all__ = ["cluster_factory", "shared_storage", "zookeeper"]
PARTITIONS = 3
SEGMENT_BYTES = 8192     # several segments a partition: closed ones and the open one
PUBLISHED_WITHIN_S = 30


def test_the_spark_source_reads_a_cluster_on_hdfs(spark: Any, cluster_factory: ClusterFactory,
                                                  mini_hdfs: MiniHdfs, tmp_path: Path) -> None:
    root = f"bmq-spark-{time.time_ns()}"
    http = mini_hdfs.storage_options()
    cluster = cluster_factory(brokers=1, storage=SharedStorage(mini_hdfs.url(root), http))
    produced = Produced(f"spark-hdfs-{time.time_ns()}", PARTITIONS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(produced.topic, PARTITIONS, 1, config={
        "segment.bytes": str(SEGMENT_BYTES)})])[produced.topic].result(60)
    cluster.wait_writable(produced.topic, timeout=60)
    for codec in CODECS:
        produce(cluster.bootstrap, produced, mixed_messages(120, PARTITIONS, codec), codec)
    # The source reads what the owner last published (its state document, at most a second
    # behind its acknowledgements): a query planned before that misses the newest records.
    store = open_storage(mini_hdfs.url(f"{root}/topics"), http)
    try:
        for partition, end in produced.ends().items():
            reader = PartitionLog.open_reader(store, produced.topic, partition)
            try:
                deadline = time.monotonic() + PUBLISHED_WITHIN_S
                while reader.high_watermark < end:
                    assert time.monotonic() < deadline, (partition, reader.high_watermark, end)
                    time.sleep(0.2)
                    reader.refresh()
            finally:
                reader.close()
    finally:
        store.close()

    options = {"storage": mini_hdfs.url(f"{root}/topics"), "topic": produced.topic,
               **{f"storage.{key}": value for key, value in http.items()}}
    check_rows(rows_by_offset(spark.read.format("bmq").options(**options).load()), produced,
               set(produced.records))
    run_available_now(spark, tmp_path / "out", tmp_path / "checkpoint", **options)
    check_equal(sink_rows(spark, tmp_path / "out"), produced)
    # The Parquet job (spark_jobs/export_to_parquet.py) on the same segments.
    summary, _ = run_job(spark, JobConfig(
        storage=options["storage"], topics=[produced.topic], output=str(tmp_path / "parquet"),
        storage_options=http))
    assert summary["records"] == len(produced.records)
    check_exact(output_rows(tmp_path / "parquet"), produced)
    segments = [status.path for status in Client(mini_hdfs.namenode).list_status(
        f"/{root}/topics/{produced.topic}/0") if status.path.endswith(".log")]
    assert len(segments) >= 2, segments     # a closed segment, and the open one
