"""Topic creation and offset look-ups through the admin and consumer APIs."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.config import BenchConfig, consumer_conf


class BenchError(Exception):
    """A problem that ends the run with a message rather than a traceback."""


def admin_client(cfg: BenchConfig) -> AdminClient:
    return AdminClient({"bootstrap.servers": cfg.bootstrap, "log.connection.close": False,
                        **cfg.client_overrides})


def check_reachable(admin: AdminClient, bootstrap: str, timeout: float = 15.0) -> int:
    """Fetch cluster metadata once; returns the broker count."""
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as error:
        raise BenchError(f"cannot reach {bootstrap}: {error.args[0]}") from error
    return len(md.brokers)


def ensure_topic(admin: AdminClient, cfg: BenchConfig, create: bool) -> tuple[int, str | None]:
    """Make sure the topic exists; returns (partitions, note).

    The topic is created with cfg.partitions and replication factor 1 when
    create is set. An existing topic is used as it is, even with another count.
    """
    existing = _existing_partitions(admin, cfg.topic)
    if existing:
        note = None
        if existing != cfg.partitions:
            note = f"topic {cfg.topic} already exists with {existing} partitions; using them"
        return existing, note
    if not create:
        raise BenchError(f"topic {cfg.topic} does not exist")
    futures = admin.create_topics(
        [NewTopic(cfg.topic, num_partitions=cfg.partitions, replication_factor=1)],
        request_timeout=15.0, operation_timeout=15.0)
    try:
        futures[cfg.topic].result(timeout=30.0)
    except KafkaException as error:
        err = error.args[0]
        if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise BenchError(f"cannot create topic {cfg.topic}: {err}") from error
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        # Wait for a leader of every partition too: a cluster places new partitions a moment
        # after creating the topic.
        count = _existing_partitions(admin, cfg.topic, with_leaders=True)
        if count:
            note = None
            if count != cfg.partitions:
                note = f"topic {cfg.topic} has {count} partitions, not {cfg.partitions}"
            return count, note
        time.sleep(0.2)
    raise BenchError(f"topic {cfg.topic} was created but does not show in the metadata")


def _existing_partitions(admin: AdminClient, topic: str, with_leaders: bool = False) -> int:
    """Partition count of topic, asking without auto-creating it (0 if it does not exist, or
    with ``with_leaders`` if a partition has no leader yet)."""
    md = admin.list_topics(timeout=15.0)
    info = md.topics.get(topic)
    if info is None or info.error is not None:
        return 0
    if with_leaders and any(p.leader < 0 for p in info.partitions.values()):
        return 0
    return len(info.partitions)


def watermarks(cfg: BenchConfig, partitions: int) -> list[tuple[int, int]]:
    """(low, high) offsets of every partition, asked of the leaders (ListOffsets)."""
    consumer = Consumer(consumer_conf(cfg))
    try:
        marks = []
        for p in range(partitions):
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(cfg.topic, p), timeout=15.0, cached=False)
            except KafkaException as error:
                raise BenchError(
                    f"cannot read offsets of {cfg.topic}/{p}: {error.args[0]}") from error
            marks.append((int(low), int(high)))
        return marks
    finally:
        consumer.close()
