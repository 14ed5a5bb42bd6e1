"""kafka-python: producer/consumer essentials and the admin client against `bmq serve`."""

from __future__ import annotations

import os
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from .helpers import create_topic, wait_until

pytestmark = pytest.mark.timeout(120)


def kp_producer(bootstrap, **kw):
    return KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000, **kw)


def kp_consumer(bootstrap, **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         request_timeout_ms=15000, **kw)


def kp_admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def read_all(bootstrap, topic, partitions, expected, timeout=30, **kw):
    consumer = kp_consumer(bootstrap, **kw)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records = []
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        # Nothing beyond what we expected shows up.
        for batch in consumer.poll(timeout_ms=300).values():
            records.extend(batch)
        assert len(records) == expected, f"expected {expected} records, got {len(records)}"
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def test_produce_consume_keys_values_headers(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1, config={"retention.ms": "-1"})
    binary = bytes(range(256))
    sent = [
        (b"k1", b"v1", []),
        (None, b"no key", []),
        (b"tombstone", None, []),
        (b"h", b"with headers", [("dup", b"1"), ("dup", b"2"), ("bin", binary)]),
        (binary, binary[::-1], [("x", b"")]),
    ]
    producer = kp_producer(module_broker.bootstrap, acks="all", linger_ms=0)
    try:
        metas = []
        for key, value, headers in sent:
            metas.append(producer.send(topic, key=key, value=value, headers=headers,
                                       partition=0).get(timeout=15))
        assert [m.offset for m in metas] == list(range(len(sent)))
        ts_meta = producer.send(topic, key=b"ts", value=b"t", timestamp_ms=1_234_567_890_123,
                                partition=0).get(timeout=15)
        assert ts_meta.offset == len(sent)
    finally:
        producer.close()

    records = read_all(module_broker.bootstrap, topic, [0], len(sent) + 1)
    for (key, value, headers), rec in zip(sent, records, strict=False):
        assert rec.key == key
        assert rec.value == value
        assert list(rec.headers) == headers
    assert records[-1].timestamp == 1_234_567_890_123
    assert records[-1].timestamp_type == 0  # CreateTime


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_round_trip(module_broker, topic, codec):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    values = [os.urandom(100 + i) if i % 2 else (b"abc" * (i + 1)) for i in range(200)]
    producer = kp_producer(module_broker.bootstrap, compression_type=codec, linger_ms=20,
                           batch_size=64 * 1024)
    try:
        futures = [producer.send(topic, key=str(i).encode(), value=v,
                                 headers=[("n", str(i).encode())], partition=0)
                   for i, v in enumerate(values)]
        producer.flush(30)
        offsets = [f.get(timeout=15).offset for f in futures]
    finally:
        producer.close()
    assert offsets == list(range(len(values)))
    records = read_all(module_broker.bootstrap, topic, [0], len(values))
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [str(i).encode() for i in range(len(values))]
    assert [list(r.headers) for r in records] == [[("n", str(i).encode())]
                                                   for i in range(len(values))]


def _topic_config(admin, topic, key):
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, [key])],
                                    config_filter="all")
    return result["topic"][topic][key]["value"]


def test_admin_lifecycle(module_broker, unique_topic):
    admin = kp_admin(module_broker.bootstrap)
    name = unique_topic("admin")
    try:
        result = admin.create_topics({name: {"num_partitions": 3, "replication_factor": 1,
                                             "configs": {"retention.ms": "3600000",
                                                         "segment.bytes": "1048576"}}})
        assert [t["error_code"] for t in result["topics"]] == [0]
        admin.wait_for_topics([name])
        assert name in admin.list_topics()
        described = {t["name"]: t for t in admin.describe_topics([name])}
        assert len(described[name]["partitions"]) == 3
        assert {p["leader_id"] for p in described[name]["partitions"]} == {0}

        # describe_configs: the explicitly set keys are reported as modified (non-default).
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        assert modified["topic"][name]["retention.ms"]["value"] == "3600000"
        assert modified["topic"][name]["segment.bytes"]["value"] == "1048576"
        assert _topic_config(admin, name, "cleanup.policy") == "delete"

        # Legacy AlterConfigs (kafka-python re-sends the other modified keys itself).
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                  {"retention.ms": "7200000"})],
                                  incremental=False)
        assert res["topic"][name] == "OK"
        assert _topic_config(admin, name, "retention.ms") == "7200000"
        assert _topic_config(admin, name, "segment.bytes") == "1048576"

        # IncrementalAlterConfigs: SET one key, DELETE another (back to the default).
        res = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, name,
            {"max.message.bytes": (AlterConfigOp.SET, "200000"),
             "retention.ms": (AlterConfigOp.DELETE, None)})], incremental=True)
        assert res["topic"][name] == "OK"
        assert _topic_config(admin, name, "max.message.bytes") == "200000"
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        assert "retention.ms" not in modified["topic"][name]
        assert _topic_config(admin, name, "retention.ms") == str(7 * 24 * 3600 * 1000)

        # create_partitions grows the topic; shrinking is refused.
        admin.create_partitions({name: 5})
        wait_until(lambda: len(admin.describe_topics([name])[0]["partitions"]) == 5, 10,
                   message="5 partitions visible")
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({name: 2})

        # delete_records moves the log start offset.
        producer = kp_producer(module_broker.bootstrap, linger_ms=0)
        for i in range(10):
            producer.send(name, value=f"v{i}".encode(), partition=0)
        producer.flush(15)
        producer.close()
        tp = TopicPartition(name, 0)
        deleted = admin.delete_records({tp: 4})
        assert deleted[tp]["low_watermark"] == 4
        consumer = kp_consumer(module_broker.bootstrap)
        try:
            assert consumer.beginning_offsets([tp])[tp] == 4
            assert consumer.end_offsets([tp])[tp] == 10
        finally:
            consumer.close()

        # describe_cluster names the single node.
        cluster = admin.describe_cluster()
        brokers = cluster["brokers"]
        assert [b["broker_id"] for b in brokers] == [0]
        assert brokers[0]["host"] == "127.0.0.1"
        assert brokers[0]["port"] == module_broker.port
        assert cluster["controller_id"] == 0
        assert cluster.get("cluster_id")

        admin.delete_topics([name])
        wait_until(lambda: name not in admin.list_topics(), 10, message="topic deleted")
    finally:
        admin.close()


def test_admin_errors(module_broker, unique_topic):
    admin = kp_admin(module_broker.bootstrap)
    try:
        name = unique_topic("exists")
        admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
        with pytest.raises(InvalidTopicError):
            admin.create_topics({"bad topic name!": {"num_partitions": 1,
                                                     "replication_factor": 1}})
        with pytest.raises(InvalidTopicError):
            admin.create_topics({"x" * 250: {"num_partitions": 1, "replication_factor": 1}})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([unique_topic("never-created")])
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics({unique_topic("badcfg"): {
                "num_partitions": 1, "replication_factor": 1,
                "configs": {"no.such.config": "1"}}})
        with pytest.raises(InvalidPartitionsError):
            admin.create_topics({unique_topic("p0"): {"num_partitions": 0,
                                                      "replication_factor": 1}})
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics({unique_topic("rf0"): {"num_partitions": 1,
                                                       "replication_factor": 0}})
        # Values Kafka refuses are refused up front rather than accepted and ignored.
        for key, value in [("cleanup.policy", "shred"), ("retention.ms", "abc"),
                           ("segment.bytes", "100"), ("min.insync.replicas", "0"),
                           ("message.timestamp.type", "Sometime"), ("compression.type", "brotli"),
                           ("compression.gzip.level", "10"), ("preallocate", "maybe")]:
            with pytest.raises(InvalidConfigurationError):
                admin.create_topics({unique_topic("badcfg"): {
                    "num_partitions": 1, "replication_factor": 1, "configs": {key: value}}})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.create_partitions({unique_topic("never-created"): 3})
        # None of the refused topics exists afterwards.
        topics = admin.list_topics()
        assert name in topics
        assert not [t for t in topics
                    if any(tag in t for tag in ("badcfg", "rf0", "-p0-", "bad topic"))]

        # An unknown config in AlterConfigs is refused for that resource only.
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                  {"no.such.config": "1"})],
                                  raise_on_unknown=False, incremental=True)
        assert "InvalidConfiguration" in res["topic"][name], res
        # So is an invalid value, and the topic keeps its previous setting.
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                  {"retention.ms": "not-a-number"})],
                                  incremental=True)
        assert "InvalidConfiguration" in res["topic"][name], res
        assert _topic_config(admin, name, "retention.ms") == str(7 * 24 * 3600 * 1000)
        # Altering a topic that does not exist names the problem.
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC,
                                                  unique_topic("never-created"),
                                                  {"retention.ms": "1000"})],
                                  raise_on_unknown=False, incremental=True)
        assert "UnknownTopicOrPartition" in next(iter(res["topic"].values())), res
    finally:
        admin.close()


def test_delete_and_recreate_topic_starts_empty(module_broker, unique_topic):
    name = unique_topic("recreate")
    admin = kp_admin(module_broker.bootstrap)
    try:
        admin.create_topics({name: {"num_partitions": 2, "replication_factor": 1}})
        producer = kp_producer(module_broker.bootstrap, linger_ms=0)
        for i in range(5):
            producer.send(name, value=f"old-{i}".encode(), partition=0)
        producer.flush(15)
        admin.delete_topics([name])
        wait_until(lambda: name not in admin.list_topics(), 10, message="topic deleted")
        admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
        admin.wait_for_topics([name])
        assert len(admin.describe_topics([name])[0]["partitions"]) == 1
        meta = producer.send(name, value=b"new", partition=0).get(timeout=15)
        assert meta.offset == 0
        producer.close()
    finally:
        admin.close()
    records = read_all(module_broker.bootstrap, name, [0], 1)
    assert [r.value for r in records] == [b"new"]
