"""The streaming source on a cluster's S3 storage (SeaweedFS) and on HDFS (MiniDFSCluster):
given the brokers' own --storage URL and options, a streaming query (its own Spark driver)
reads the partitions while a broker is killed -9 and its partitions move, a partition is added,
and the driver itself is killed -9 and restarted from its checkpoint: the sink equals the
topic, record by record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.cluster.conftest import (  # noqa: F401 (fixtures)
    ClusterFactory,
    SharedStorage,
    cluster_factory,
    shared_storage,
    zookeeper,
)
from tests.cluster.test_cluster import create_topic, owned_by
from tests.cluster.workload import SteadyProducer, read_all, verify
from tests.conftest import make_topic_name
from tests.spark.test_streaming import StreamJob, add_partitions, sink_rows

PARTITIONS = 4
ADDED = 50   # records produced into the partition added mid-stream


@pytest.mark.slow
@pytest.mark.parametrize("shared_storage", ["s3", "hdfs"], indirect=True)
def test_stream_while_a_broker_and_the_driver_die(
        spark: Any, cluster_factory: ClusterFactory,  # noqa: F811
        shared_storage: SharedStorage, tmp_path: Path) -> None:  # noqa: F811
    storage = shared_storage
    assert storage.url is not None
    cluster = cluster_factory(brokers=3, storage=storage)
    topic = make_topic_name("stream")
    create_topic(cluster, topic, PARTITIONS)
    producer = SteadyProducer(cluster.bootstrap, topic, PARTITIONS, rate=200).start()
    job = StreamJob(tmp_path, {"storage": storage.url, "subscribe": topic,
                               **{f"storage.{k}": v for k, v in storage.options.items()}})
    try:
        try:
            job.start()
            job.wait(lambda: job.committed_batches() >= 2, 240, "two committed micro-batches")
            moved = owned_by(cluster, topic, 1)
            cluster.brokers[1].kill()
            cluster.wait_writable(topic, owners={2, 3})
            assert moved
            job.kill()                       # the driver dies mid-stream too
            add_partitions(cluster.bootstrap, topic, PARTITIONS + 1)
            cluster.wait_writable(topic)
            added = Producer({"bootstrap.servers": cluster.bootstrap})
            for i in range(ADDED):
                added.produce(topic, value=b"added-%d" % i, partition=PARTITIONS)
            assert added.flush(30) == 0
            job.start()                      # from its checkpoint
            restarted = job.committed_batches()
            job.wait(lambda: job.committed_batches() >= restarted + 1, 240,
                     "a micro-batch after the restart")
        finally:
            producer.stop()
        assert not producer.failed, producer.failed[:5]
        acked = verify(producer, cluster.bootstrap)
        topic_records = {(p, o): v for p, records in
                         read_all(cluster.bootstrap, topic, PARTITIONS + 1).items()
                         for o, v in records}
        assert len(topic_records) >= acked + ADDED
        assert sum(p == PARTITIONS for p, _o in topic_records) == ADDED
        job.wait(lambda: len(sink_rows(spark, job.output)) >= len(topic_records), 180,
                 f"all {len(topic_records)} records in the sink")
    finally:
        if job.proc is not None and job.proc.poll() is None:
            job.kill()
    assert {k: r.value for k, r in sink_rows(spark, job.output).items()} == topic_records
