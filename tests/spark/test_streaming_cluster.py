"""The streaming source on a cluster's S3 storage (SeaweedFS): given the brokers' own --storage
URL, it reads the partitions while a broker is killed -9 and its partitions move, and a
partition added meanwhile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.cluster.conftest import (  # noqa: F401 (fixtures)
    ClusterFactory,
    SharedStorage,
    cluster_factory,
    zookeeper,
)
from tests.cluster.test_cluster import create_topic, owned_by
from tests.cluster.workload import SteadyProducer, read_all, verify
from tests.conftest import make_topic_name
from tests.seaweedfs import SeaweedFS
from tests.spark.test_streaming import add_partitions, sink_rows

PARTITIONS = 4


@pytest.mark.slow
def test_stream_from_s3_while_a_broker_dies(spark: Any, cluster_factory: ClusterFactory,  # noqa: F811
                                            seaweedfs: SeaweedFS, tmp_path: Path) -> None:
    storage = SharedStorage(seaweedfs.url(f"spark-{time.time_ns()}"),
                            seaweedfs.storage_options())
    assert storage.url is not None
    cluster = cluster_factory(brokers=3, storage=storage)
    topic = make_topic_name("stream-s3")
    create_topic(cluster, topic, PARTITIONS)
    producer = SteadyProducer(cluster.bootstrap, topic, PARTITIONS, rate=200).start()
    reader = (spark.readStream.format("bmq").option("storage", storage.url)
              .option("subscribe", topic))
    for key, value in storage.options.items():
        reader = reader.option(f"storage.{key}", value)
    output = tmp_path / "out"
    query = (reader.load().writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(processingTime="1 second").start())
    try:
        try:
            time.sleep(4)
            moved = owned_by(cluster, topic, 1)
            cluster.brokers[1].kill()
            cluster.wait_writable(topic, owners={2, 3})
            assert moved
            add_partitions(cluster.bootstrap, topic, PARTITIONS + 1)
            cluster.wait_writable(topic)
            added = Producer({"bootstrap.servers": cluster.bootstrap})
            for i in range(50):
                added.produce(topic, value=b"added-%d" % i, partition=PARTITIONS)
            assert added.flush(30) == 0
            time.sleep(4)
        finally:
            producer.stop()
        assert not producer.failed, producer.failed[:5]
        acked = verify(producer, cluster.bootstrap)
        topic_records = {(p, o): v for p, records in
                         read_all(cluster.bootstrap, topic, PARTITIONS + 1).items()
                         for o, v in records}
        assert len(topic_records) >= acked + 50
        assert sum(p == PARTITIONS for p, _o in topic_records) == 50
        deadline = time.monotonic() + 120
        while len(rows := sink_rows(spark, output)) < len(topic_records):
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, \
                f"the sink has {len(rows)} of {len(topic_records)} records"
            time.sleep(1)
    finally:
        query.stop()
    assert {k: r.value for k, r in sink_rows(spark, output).items()} == topic_records
