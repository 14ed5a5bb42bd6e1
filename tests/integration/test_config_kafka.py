"""Kafka's names and configs, as Kafka tools see them: broker settings under Kafka's names,
every Kafka 4 topic config, replication factors above 1, compression.type recompression and
compacted topics' refusal of keyless records."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from bmq.protocol.messages import DescribeConfigsRequest
from bmq.protocol.messages.describe_configs_request import DescribeConfigsResource
from tests.conftest import BrokerProcess, bmq_command, free_port
from tests.groups.wire import RawClient

from . import kwire
from .helpers import DeliveryLog, admin, consume, produce_all, producer, wait_until
from .test_kafka_python import read_all

pytestmark = pytest.mark.timeout(90)

# Kafka 4's topic configs (TopicConfig / LogConfig), plus the two deprecated ones librdkafka's
# tests still set and KIP-1191's errors.deadletterqueue.group.enable (Kafka trunk); written out
# here so the broker's list is checked against Kafka's, not itself.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "errors.deadletterqueue.group.enable",
    "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}
CODEC_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class KafkaNamedBroker(BrokerProcess):
    """`bmq serve --config FILE` and nothing else: every setting comes from the file and the
    environment, under Kafka's names."""

    def command(self) -> list[str]:
        assert self.config_path is not None
        return [*bmq_command(), "serve", "--config", str(self.config_path)]


def _describe(bootstrap: str, kind: str, name: str) -> dict:
    resource = ConfigResource(kind, name)
    client = admin(bootstrap)
    return client.describe_configs([resource])[resource].result(15)


def _setting(topic: str, key: str, value: str) -> ConfigResource:
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    return ConfigResource("topic", topic, incremental_configs=[entry])


def test_broker_settings_under_kafka_names(tmp_path, unique_topic):
    port = free_port()
    data_dir = str(tmp_path / "kafka-logs")
    broker = KafkaNamedBroker(tmp_path / "b", port=port, config={
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        '"log.dirs"': data_dir,
        '"num.partitions"': 3,
        '"log.retention.hours"': 2,           # server.properties' unit, converted
    }, env={"BMQ_BROKER_ID": "5", "BMQ_AUTO_CREATE_TOPICS_ENABLE": "true"})
    broker.start()
    try:
        configs = _describe(broker.bootstrap, "broker", "5")
        listener = f"PLAINTEXT://127.0.0.1:{port}"
        assert configs["listeners"].value == listener
        assert configs["listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert configs["advertised.listeners"].value == listener
        assert configs["log.dirs"].value == data_dir
        assert configs["node.id"].value == configs["broker.id"].value == "5"
        assert configs["log.retention.ms"].value == "7200000"
        partitions = configs["num.partitions"]
        assert partitions.value == "3" and not partitions.is_default
        assert partitions.source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert "num.partitions" in partitions.synonyms
        assert configs["auto.create.topics.enable"].value == "true"
        assert configs["auto.create.topics.enable"].is_default
        for kafka in ("default.replication.factor", "log.segment.bytes", "message.max.bytes",
                      "offsets.topic.num.partitions", "group.initial.rebalance.delay.ms",
                      "zookeeper.connect", "log.retention.check.interval.ms"):
            assert kafka in configs, kafka
        # BMQ's own settings keep their names; BMQ's names for Kafka's settings are not shown.
        assert "metrics_port" in configs and "storage" in configs
        assert not {"data_dir", "data.dir", "node_id", "num_partitions"} & set(configs)

        # The settings took effect: topics live under log.dirs, auto-created with 3 partitions.
        topic = unique_topic("auto")
        produce_all(broker.bootstrap, topic, [{"value": b"x", "partition": 2}])
        assert len(admin(broker.bootstrap).list_topics(topic, timeout=10)
                   .topics[topic].partitions) == 3
        assert (tmp_path / "kafka-logs" / "topics" / topic / "2").is_dir()
    finally:
        broker.stop()


def test_env_with_kafka_names_and_conflicts(broker_factory, unique_topic):
    broker = broker_factory(env={"BMQ_LOG_SEGMENT_BYTES": "65536",
                                 "BMQ_DEFAULT_REPLICATION_FACTOR": "3"})
    configs = _describe(broker.bootstrap, "broker", "0")
    assert configs["log.segment.bytes"].value == "65536"
    assert configs["default.replication.factor"].value == "3"
    # A topic takes the broker's setting, and says where it came from (as Kafka does).
    topic = unique_topic("seg")
    produce_all(broker.bootstrap, topic, [{"value": b"x"}])
    segment = _describe(broker.bootstrap, "topic", topic)["segment.bytes"]
    assert segment.value == "65536"
    assert segment.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert segment.synonyms["log.segment.bytes"].value in ("65536", "1073741824")

    # One setting under two names in one source is refused before anything starts.
    clash = broker_factory(env={"BMQ_NODE_ID": "1", "BMQ_BROKER_ID": "2"}, start=False)
    with pytest.raises(RuntimeError):
        clash.start(timeout=15)
    assert "node_id" in clash.log_text() and "set twice" in clash.log_text()
    clash = broker_factory(config={"num_partitions": 2, '"num.partitions"': 3}, start=False)
    with pytest.raises(RuntimeError):
        clash.start(timeout=15)
    assert "num_partitions" in clash.log_text() and "set twice" in clash.log_text()


def test_every_kafka_topic_config_and_replication_factor_3(module_broker, unique_topic):
    name = unique_topic("rf3")
    stored = {"delete.retention.ms": "1000", "flush.ms": "100", "segment.jitter.ms": "5",
              "message.format.version": "0.10.0.0", "min.insync.replicas": "2",
              "unclean.leader.election.enable": "true"}
    client = admin(module_broker.bootstrap)
    client.create_topics([NewTopic(name, num_partitions=2, replication_factor=3,
                                   config=stored)])[name].result(15)
    wait_until(lambda: name in client.list_topics(name, timeout=5).topics
               and not client.list_topics(name, timeout=5).topics[name].error, 15,
               message="topic created")
    # Metadata names the one broker that serves each partition as its replica and ISR.
    for partition in client.list_topics(name, timeout=5).topics[name].partitions.values():
        assert partition.replicas == [0] and partition.isrs == [0]

    configs = _describe(module_broker.bootstrap, "topic", name)
    # Kafka's topic configs, and BMQ's own (views, lanes), all under bmq.
    assert {key for key in configs if not key.startswith("bmq.")} == KAFKA_TOPIC_CONFIGS
    assert {"bmq.view.source", "bmq.view.filter", "bmq.lanes.enable"} <= set(configs)
    for key, value in stored.items():
        assert configs[key].value == value and configs[key].source == \
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value, key
    for key, default in [("file.delete.delay.ms", "60000"), ("min.cleanable.dirty.ratio", "0.5"),
                         ("compression.zstd.level", "3"), ("remote.storage.enable", "false"),
                         ("local.retention.ms", "-2"), ("cleanup.policy", "delete")]:
        assert configs[key].value == default and configs[key].is_default, key
    retention = configs["retention.ms"].synonyms
    assert retention["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # Alterable like any other; an unknown name is still refused.
    resource = _setting(name, "preallocate", "true")
    client.incremental_alter_configs([resource])[resource].result(15)
    assert _describe(module_broker.bootstrap, "topic", name)["preallocate"].value == "true"
    bad = _setting(name, "no.such.config", "1")
    with pytest.raises(KafkaException) as refused:
        client.incremental_alter_configs([bad])[bad].result(15)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG

    # CreatePartitions with an explicit assignment naming live brokers.
    growth = client.create_partitions([NewPartitions(name, 3, replica_assignment=[[0]])])
    growth[name].result(15)
    assert len(client.list_topics(name, timeout=5).topics[name].partitions) == 3


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_compression_type_recompresses(module_broker, unique_topic, target):
    name = unique_topic(f"ct-{target}")
    client = admin(module_broker.bootstrap)
    client.create_topics([NewTopic(name, num_partitions=1, replication_factor=1,
                                   config={"compression.type": target})])[name].result(15)
    # Batches come in with another codec than the topic's (lz4, or none for an lz4 topic).
    sent = "none" if target == "lz4" else "lz4"
    items = [{"key": f"k{i}".encode(), "value": f"record {i} ".encode() * 30,
              "headers": [("i", str(i).encode())]} for i in range(300)]
    produce_all(module_broker.bootstrap, name, items, compression_type=sent, linger_ms=20,
                enable_idempotence=True)
    with kwire.KafkaWire(module_broker.bootstrap) as wire:
        fetched = wire.fetch(name, 0, 0, max_bytes=16 << 20)
        batches = kwire.parse_record_batches(fetched.records or b"")
    assert batches and all(b.crc_ok() for b in batches)
    assert {b.compression for b in batches} == {CODEC_IDS[target]}
    got = consume(module_broker.bootstrap, name, [0], expected=len(items))[0]
    assert [(m.key, m.value, m.headers) for m in got] == \
        [(i["key"], i["value"], i["headers"]) for i in items]
    assert [m.offset for m in got] == list(range(len(items)))
    # kafka-python decodes with other libraries (python-snappy's xerial reader, lz4.frame).
    records = read_all(module_broker.bootstrap, name, [0], len(items))
    assert [(r.key, r.value) for r in records] == [(i["key"], i["value"]) for i in items]


def _compacted_topic(bootstrap, name):
    topic = NewTopic(name, num_partitions=1, replication_factor=1,
                     config={"cleanup.policy": "compact"})
    client = admin(bootstrap)   # kept alive until its future resolves
    client.create_topics([topic])[name].result(15)
    return name


def test_compacted_topic_refuses_keyless_records(module_broker, unique_topic):
    name = _compacted_topic(module_broker.bootstrap, unique_topic("compact"))
    log = DeliveryLog()
    p = producer(module_broker.bootstrap, linger_ms=0, retries=0)
    p.produce(name, key=b"k", value=b"kept", on_delivery=log)
    p.flush(15)
    p.produce(name, value=b"no key", on_delivery=log)
    p.flush(15)
    assert [(k, v) for k, v, _, _ in log.ok] == [(b"k", b"kept")]
    assert len(log.errors) == 1 and log.errors[0][1].code() == KafkaError.INVALID_RECORD
    got = consume(module_broker.bootstrap, name, [0], expected=1)[0]
    assert [(m.key, m.value) for m in got] == [(b"k", b"kept")]


def test_a_mixed_batch_fails_only_its_keyless_records(module_broker, unique_topic):
    """KIP-467: the Produce response names the records at fault (record_errors), so librdkafka
    fails those with INVALID_RECORD and the others of the batch with _INVALID_DIFFERENT_RECORD
    (librdkafka's test 0011 counts exactly that); nothing of the batch is written."""
    name = _compacted_topic(module_broker.bootstrap, unique_topic("compact-mixed"))
    log = DeliveryLog()
    p = producer(module_broker.bootstrap, linger_ms=100, retries=0)
    # Until the producer knows the partition, librdkafka may send the first record in a batch of
    # its own; it then fails every record of the second batch with INVALID_RECORD although the
    # response names only the keyless one (seen under load). Known metadata keeps one batch.
    p.list_topics(name, timeout=15)
    for i in range(20):
        p.produce(name, key=None if i % 10 == 0 else b"k%d" % i, value=b"v%d" % i,
                  on_delivery=log)
    p.flush(15)
    codes = sorted(error.code() for _, error in log.errors)
    assert codes.count(KafkaError.INVALID_RECORD) == 2
    assert codes.count(KafkaError._INVALID_DIFFERENT_RECORD) == 18
    assert not log.ok


def test_documentation_and_types_in_describe_configs_v4(module_broker, unique_topic):
    """What librdkafka's and the Java client's newest DescribeConfigs carry beyond values."""
    name = unique_topic("doc")
    produce_all(module_broker.bootstrap, name, [{"value": b"x"}])  # auto-created
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=2, resource_name=name,
                                           configuration_keys=["flush.ms", "compression.type"]),
                   DescribeConfigsResource(resource_type=4, resource_name="0",
                                           configuration_keys=["log.dirs"])],
        include_synonyms=True, include_documentation=True)
    with RawClient(module_broker.bootstrap) as client:
        response = client.call(request, 4)
    topic, broker = response.results
    entries = {c.name: c for c in topic.configs}
    assert set(entries) == {"flush.ms", "compression.type"}
    assert entries["flush.ms"].config_type == 5  # LONG
    assert entries["flush.ms"].config_source == 5  # DEFAULT_CONFIG (is_default is v0 only)
    assert "no effect here" in (entries["flush.ms"].documentation or "")
    assert "recompress" in (entries["compression.type"].documentation or "")
    assert [c.name for c in broker.configs] == ["log.dirs"]
    assert "BMQ_LOG_DIRS" in (broker.configs[0].documentation or "")
