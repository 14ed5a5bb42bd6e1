"""Compacted topics on `bmq serve`, with confluent-kafka and kafka-python: the log cleaner keeps
the last value of each key, drops tombstones after delete.retention.ms, keeps offsets, shrinks
storage, never shows a reader a half-cleaned log, and survives kill -9 mid-cleaning."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from bmq.net.client import BrokerLink
from bmq.protocol.messages import BmqWatchPartitionsRequest, BmqWatchPartitionsResponse
from bmq.protocol.messages.bmq_watch_partitions_request import WatchPartition, WatchTopic
from tests.conftest import free_port
from tests.metrics.scrape import scrape, value

from .compaction import COMPACTED, FILLER_KEY, latest, offsets_grow, segment_bytes, updates
from .helpers import (
    admin,
    consume,
    create_topic,
    produce_all,
    topic_configs,
    wait_until,
    watermarks,
)
from .test_kcat import kcat

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.broker(env={"BMQ_LOG_CLEANER_BACKOFF_MS": 200}),
]

DELETE_RETENTION_MS = 4000


def _clean_state(bootstrap: str, topic: str, expected: dict[bytes, bytes | None],
                 tombstones: bool | None) -> bool:
    """Whether a read from the start shows exactly one record per key, the last value (with
    tombstones for deleted keys when ``tombstones``, without when False)."""
    messages = consume(bootstrap, topic)[0]
    values, counts = latest(messages)
    assert offsets_grow(messages)
    if any(n > 1 for n in counts.values()):
        return False
    live = {k: v for k, v in expected.items() if v is not None}
    if tombstones is None:
        return {k: v for k, v in values.items() if v is not None} == live
    want = expected if tombstones else live
    return values == want


def _kcat_reads_the_live_keys(broker, topic: str, expected: dict[bytes, bytes | None]
                              ) -> None:
    """kcat (librdkafka's consumer) reads the cleaned log from the start: exactly one record
    per live key, its last value, offsets growing across the gaps the cleaner left."""
    out, _ = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                  "-f", "%p %o %k %s\\n")
    lines = [line.split(" ") for line in out.splitlines()]
    offsets = [int(o) for p, o, _k, _v in lines if p == "0"]
    assert len(offsets) == len(lines) and offsets == sorted(set(offsets))
    got = [(k.encode(), v.encode()) for _p, _o, k, v in lines if k.encode() != FILLER_KEY]
    assert sorted(got) == sorted((k, v) for k, v in expected.items() if v is not None)


def test_cleaner_keeps_the_last_value_of_each_key(broker, unique_topic) -> None:
    topic = unique_topic("c")
    create_topic(broker.bootstrap, topic,
                 config={**COMPACTED, "delete.retention.ms": str(DELETE_RETENTION_MS)})
    items, expected = updates(20_000, keys=1000, deleted=100)
    produce_all(broker.bootstrap, topic, items, linger_ms=5, batch_size=8192)
    produced_at = time.monotonic()
    written = sum(len(i["key"]) + len(i["value"] or b"") for i in items)

    # Cleaned: one record per key, the last value; tombstones stay for delete.retention.ms.
    wait_until(lambda: _clean_state(broker.bootstrap, topic, expected, None), 60,
               interval=0.5, message="the cleaner did not clean the topic")
    if time.monotonic() - produced_at < DELETE_RETENTION_MS / 1000 - 1:
        assert _clean_state(broker.bootstrap, topic, expected, True), \
            "tombstones removed before delete.retention.ms"
    # Then the tombstones go too; offsets keep their gaps, the log still starts at 0.
    wait_until(lambda: _clean_state(broker.bootstrap, topic, expected, False), 60,
               interval=0.5, message="tombstones outlived delete.retention.ms")
    messages = consume(broker.bootstrap, topic)[0]
    low, high = watermarks(broker.bootstrap, topic)
    assert (low, high) == (0, len(items))
    live_bytes = sum(len(k) + len(v) for k, v in expected.items() if v is not None)
    assert segment_bytes(broker.data_dir, topic) < max(written // 4, 3 * live_bytes)
    _kcat_reads_the_live_keys(broker, topic, expected)

    # Survives a restart as it is.
    broker.restart()
    again = consume(broker.bootstrap, topic)[0]
    assert [(m.offset, m.key, m.value) for m in again] == \
        [(m.offset, m.key, m.value) for m in messages]

    # And a kill -9 with the checkpoint unreadable after it: recovery lists the segment files,
    # the cleaned ones (the originals are gone: file.delete.delay.ms 0) included.
    broker.kill()
    for checkpoint in Path(broker.data_dir, "topics", topic, "0").glob("checkpoint*.json"):
        checkpoint.write_bytes(b'{"version": 1, "segm')
    broker.start()
    recovered = consume(broker.bootstrap, topic)[0]
    assert [(m.offset, m.key, m.value) for m in recovered] == \
        [(m.offset, m.key, m.value) for m in messages]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_million_updates_over_ten_thousand_keys(broker_factory, unique_topic) -> None:
    """Issue 19's scenario: 1,000,000 updates over 10,000 keys, 1,000 of them deleted."""
    metrics_port = free_port()
    broker = broker_factory(env={"BMQ_LOG_CLEANER_BACKOFF_MS": "200"},
                            extra_args=["--metrics-port", str(metrics_port)])
    topic = unique_topic("m")
    create_topic(broker.bootstrap, topic,
                 config={**COMPACTED, "segment.bytes": str(1 << 20),
                         "delete.retention.ms": str(DELETE_RETENTION_MS)})
    items, expected = updates(1_000_000, keys=10_000, deleted=1000, fillers=12_000)
    produce_all(broker.bootstrap, topic, items, timeout=300, linger_ms=20)
    # What was appended (the cleaner runs while the producer writes, so the files never hold
    # it all at once).
    written = value(scrape(metrics_port), "bmq_bytes_in_total", topic=topic)
    wait_until(lambda: _clean_state(broker.bootstrap, topic, expected, False), 600,
               interval=2, message="not compacted to the live keys")
    live_bytes = sum(len(k) + len(v) for k, v in expected.items() if v is not None)
    # About the live set: the live records (with their framing), and the active segment.
    assert segment_bytes(broker.data_dir, topic) < 3 * live_bytes + (1 << 20)
    # The sealed segments shrink to a tenth (the active segment, up to 1 MiB of filler here,
    # is never cleaned: where the last roll falls decides its size).
    assert segment_bytes(broker.data_dir, topic, sealed=True) < written // 10
    assert watermarks(broker.bootstrap, topic) == (0, len(items))


def test_a_reader_during_cleaning_sees_a_consistent_log(broker, unique_topic) -> None:
    topic = unique_topic("r")
    create_topic(broker.bootstrap, topic, config=COMPACTED)
    items, expected = updates(20_000, keys=500, deleted=50, seed=11)
    produce_all(broker.bootstrap, topic, items, linger_ms=5, batch_size=8192)
    live = {k: v for k, v in expected.items() if v is not None}
    failures: list[str] = []
    passes = 0
    stop = threading.Event()

    def read_repeatedly() -> None:
        nonlocal passes
        while not stop.is_set():
            messages = consume(broker.bootstrap, topic)[0]
            values, _counts = latest(messages)
            if not offsets_grow(messages):
                failures.append("offsets went back")
            if {k: v for k, v in values.items() if v is not None} != live:
                failures.append(f"pass {passes}: the last values differ")
            passes += 1

    reader = threading.Thread(target=read_repeatedly)
    reader.start()
    try:
        wait_until(lambda: _clean_state(broker.bootstrap, topic, expected, None), 60,
                   interval=0.3, message="the cleaner did not clean the topic")
    finally:
        stop.set()
        reader.join(60)
    assert passes >= 1 and not failures, failures[:3]


@pytest.mark.parametrize("step", ["written", pytest.param("swapped", marks=pytest.mark.slow)])
def test_kill_9_mid_cleaning_loses_nothing(broker_factory, unique_topic, step) -> None:
    # The records are written while the cleaner waits, so the crash cannot interrupt them;
    # the broker restarted with the crash armed then cleans what is dirty and dies at ``step``.
    broker = broker_factory(env={"BMQ_LOG_CLEANER_BACKOFF_MS": "3600000"})
    topic = unique_topic(step)
    create_topic(broker.bootstrap, topic, config=COMPACTED)
    items, expected = updates(5000, keys=300, deleted=30, seed=3)
    produce_all(broker.bootstrap, topic, items, linger_ms=5, batch_size=8192)
    broker.kill()
    broker.env = {"BMQ_LOG_CLEANER_BACKOFF_MS": "1000", "BMQ_CLEANER_CRASH_AT": step}
    broker.start()
    wait_until(lambda: not broker.is_running(), 60, message="the cleaner never reached " + step)
    broker.kill()
    # Everything acknowledged is there after the crash (whether or not the cleaner has run
    # again: the last values stay, the last offset is in the active segment)...
    broker.env = {"BMQ_LOG_CLEANER_BACKOFF_MS": "200"}
    broker.start()
    messages = consume(broker.bootstrap, topic)[0]
    values, _counts = latest(messages)
    assert offsets_grow(messages)
    assert {k: v for k, v in values.items() if v is not None} == \
        {k: v for k, v in expected.items() if v is not None}
    assert messages[-1].offset == len(items) - 1
    # ... and the cleaner finishes the job.
    wait_until(lambda: _clean_state(broker.bootstrap, topic, expected, None), 60,
               interval=0.5, message="the cleaner did not clean after the restart")
    written = sum(len(i["key"]) + len(i["value"] or b"") for i in items)
    assert segment_bytes(broker.data_dir, topic) < written // 3


def test_admin_clients_create_and_alter_compacted_topics(broker, unique_topic,
                                                        bmq_cli) -> None:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidConfigurationError

    # kafka-python creates one, confluent-kafka alters it; both see the result.
    name = unique_topic("kp")
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        kp.create_topics([NewTopic(name, 1, 1, topic_configs={
            "cleanup.policy": "compact", "delete.retention.ms": "1000",
            "min.compaction.lag.ms": "0", "max.compaction.lag.ms": "60000",
            "segment.ms": "10000", "segment.bytes": "65536"})])
        with pytest.raises(InvalidConfigurationError):
            kp.create_topics([NewTopic(unique_topic("bad"), 1, 1,
                                       topic_configs={"cleanup.policy": "shred"})])
        described = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, name)])
        assert "compact" in repr(described)
    finally:
        kp.close()
    resource = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact,delete",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.cleanable.dirty.ratio", "0.2",
                    incremental_operation=AlterConfigOpType.SET)])
    client = admin(broker.bootstrap)
    client.incremental_alter_configs([resource])[resource].result(15)
    configs = topic_configs(broker.bootstrap, name)
    assert configs["cleanup.policy"] == "compact,delete"
    assert configs["min.cleanable.dirty.ratio"] == "0.2"
    assert configs["delete.retention.ms"] == "1000"
    # An unknown policy is INVALID_CONFIG and changes nothing.
    bad = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact,shred",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("delete.retention.ms", "5", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        client.incremental_alter_configs([bad])[bad].result(15)
    assert info.value.args[0].name() == "INVALID_CONFIG"
    configs = topic_configs(broker.bootstrap, name)
    assert (configs["cleanup.policy"], configs["delete.retention.ms"]) == \
        ("compact,delete", "1000")
    # And `bmq topic create --config`.
    created, refused = unique_topic("cli"), unique_topic("cli-bad")
    run = [*bmq_cli, "topic", "create", "--bootstrap", broker.bootstrap]
    ok = subprocess.run([*run, created, "--config", "cleanup.policy=compact", "--config",
                         "min.compaction.lag.ms=100"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*run, refused, "--config", "cleanup.policy=compact,shred"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "INVALID_CONFIG" in bad.stderr, bad.stderr
    listed = admin(broker.bootstrap).list_topics(timeout=10).topics
    assert created in listed and refused not in listed
    assert topic_configs(broker.bootstrap, created)["min.compaction.lag.ms"] == "100"


def test_the_readme_example_runs(broker, capsys) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Compacted topics"):readme.index("## Compatibility")]
    example = section[section.index("```python") + len("```python"):]
    example = example[:example.index("```")]
    exec(example.replace("localhost:9092", broker.bootstrap)
         .replace("time.sleep(40)", "time.sleep(3)"), {})
    out = capsys.readouterr().out
    assert "90 live users" in out, out
    assert int(out.split()[0]) < 1000, out


def _watch(broker, topic: str, high_watermark: int, known_rewrites: int
           ) -> BmqWatchPartitionsResponse:
    """One BmqWatchPartitions call, as a proxy parks it, for partition 0 of ``topic``."""
    async def call() -> BmqWatchPartitionsResponse:
        link = BrokerLink(broker.host, broker.port, "test-watch")
        try:
            return await link.request(BmqWatchPartitionsRequest(max_wait_ms=500, topics=[
                WatchTopic(name=topic, partitions=[WatchPartition(
                    partition_index=0, known_high_watermark=high_watermark,
                    known_rewrites=known_rewrites)])]), 0)
        finally:
            link.close()
    return asyncio.run(call())


def test_a_watch_reports_a_cleaning_pass_the_watcher_has_not_seen(broker, unique_topic
                                                                  ) -> None:
    # A proxy sends the owner's swap count from the last tail it applied: a pass that landed
    # between two of its watch requests (no new data) is answered at once, not missed.
    topic = unique_topic("w")
    create_topic(broker.bootstrap, topic, config=COMPACTED)
    items, expected = updates(5000, keys=300, deleted=30, seed=5)
    produce_all(broker.bootstrap, topic, items, linger_ms=5, batch_size=8192)
    wait_until(lambda: _clean_state(broker.bootstrap, topic, expected, None), 60,
               interval=0.5, message="the cleaner did not clean the topic")
    high_watermark = len(items)
    answer = _watch(broker, topic, high_watermark, known_rewrites=0)
    assert answer.error_code == 0 and [t.name for t in answer.topics] == [topic]
    (reported,) = answer.topics[0].partitions
    assert reported.high_watermark == high_watermark and reported.tail is not None
    rewrites = json.loads(reported.tail)["rewrites"]
    assert rewrites >= 1
    # Knowing the current count, the watcher hears of nothing (or of a later pass only).
    again = _watch(broker, topic, high_watermark, known_rewrites=rewrites)
    for watched in again.topics:
        assert watched.partitions[0].tail is not None
        assert json.loads(watched.partitions[0].tail)["rewrites"] > rewrites
