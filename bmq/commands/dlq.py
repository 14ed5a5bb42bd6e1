"""`bmq dlq redrive DLQ_TOPIC`: send the records of a share group's dead-letter topic (KIP-1191)
back to the topics they came from, as their provenance headers (``bmq.dlq.topic``,
``bmq.dlq.partition``; bmq.coordinators.share.dlq) name them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from bmq.commands.common import Connection, connection_options, counted, fail, say


@click.group()
def dlq() -> None:
    """Work with share groups' dead-letter topics (KIP-1191).

    \b
    Examples:
      bmq dlq redrive dlq.orders --dry-run
      bmq dlq redrive dlq.orders
    """


def _source(message: Any) -> tuple[str, int | None] | None:
    """The topic (and partition) a dead letter came from; None without provenance headers."""
    from bmq.coordinators.share.dlq import PARTITION_HEADER, TOPIC_HEADER

    headers = dict(message.headers() or [])
    topic = headers.get(TOPIC_HEADER)
    if not topic:
        return None
    partition = headers.get(PARTITION_HEADER)
    return topic.decode(), int(partition) if partition and partition.isdigit() else None


def _own_headers(message: Any) -> list[tuple[str, bytes]]:
    """The record's headers, without the ones the dead-letter write added."""
    from bmq.coordinators.share.dlq import HEADER_PREFIX

    return [(k, v) for k, v in message.headers() or [] if not k.startswith(HEADER_PREFIX)]


@dlq.command()
@click.argument("dlq_topic")
@click.option("--group", "group_id", help="Consumer group that keeps how far re-driving got "
              "(default: bmq-dlq-redrive-DLQ_TOPIC); a later run sends only newer records.")
@click.option("--dry-run", is_flag=True, help="Only count what would be sent where.")
@connection_options
def redrive(conn: Connection, dlq_topic: str, group_id: str | None, dry_run: bool) -> None:
    """Send every record of DLQ_TOPIC, up to its end now, back to its source topic.

    Each record goes to the topic and partition its bmq.dlq.* headers name, with its key,
    value and own headers (the bmq.dlq.* ones dropped), and it is delivered again to the
    share groups that read that topic. Progress is committed to --group once the source
    topics acknowledged the records (acks=all, idempotent), so running it again re-drives
    only records that arrived since; a run that fails before its commit sends them again next
    time (at least once). Records without provenance headers are skipped and counted.

    \b
    Example:
      bmq dlq redrive dlq.orders
    """
    from confluent_kafka import Consumer, Producer, TopicPartition

    partitions = conn.topic_partitions(dlq_topic)
    consumer = Consumer(conn.client_config(**{
        "group.id": group_id or f"bmq-dlq-redrive-{dlq_topic}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest"}))
    producer = Producer(conn.client_config(**{"acks": "all", "enable.idempotence": True}))
    try:
        sent, skipped, reached = _redrive(conn, consumer, None if dry_run else producer,
                                          dlq_topic, partitions)
        if reached and not dry_run:
            consumer.commit(offsets=[TopicPartition(dlq_topic, p, o)
                                     for p, o in reached.items()], asynchronous=False)
    finally:
        consumer.close()
    verb = "would re-drive" if dry_run else "re-drove"
    for topic, count in sorted(sent.items()):
        say(f"{verb} {counted(count, 'record')} to {topic}")
    if not sent:
        say(f"nothing to re-drive in {dlq_topic}")
    if skipped:
        say(f"skipped {counted(skipped, 'record')} without a known source topic")


def _redrive(conn: Connection, consumer: Any, producer: Any, dlq_topic: str,
             partitions: list[int]) -> tuple[Counter[str], int, dict[int, int]]:
    """Read ``dlq_topic`` from the committed offsets to its end now and produce each record
    to its source (``producer`` None: count only); (records per source topic, records
    skipped, the offset reached per partition), once every record is acknowledged."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    committed = consumer.committed([TopicPartition(dlq_topic, p) for p in partitions],
                                   timeout=conn.timeout)
    starts = {tp.partition: tp.offset for tp in committed}
    ends = {p: consumer.get_watermark_offsets(TopicPartition(dlq_topic, p),
                                              timeout=conn.timeout)[1] for p in partitions}
    todo = {p for p in partitions if ends[p] > max(starts[p], 0)}
    consumer.assign([TopicPartition(dlq_topic, p, starts[p] if starts[p] >= 0
                                    else OFFSET_BEGINNING) for p in todo])
    known = conn.metadata().topics
    sent: Counter[str] = Counter()
    skipped = 0
    reached: dict[int, int] = {}
    failures: list[str] = []

    def delivered(error: Any, _: Any) -> None:
        if error is not None:
            failures.append(str(error))

    while todo:
        message = consumer.poll(conn.timeout)
        if message is None:
            fail(f"no records from {dlq_topic} within {conn.timeout:g} s")
        if message.error() is not None:
            fail(f"cannot read {dlq_topic}: {message.error()}")
        partition, offset = message.partition(), message.offset()
        reached[partition] = offset + 1
        if offset + 1 >= ends[partition]:
            todo.discard(partition)
        source = _source(message)
        if source is None or source[0] not in known:
            skipped += 1
            continue
        topic, index = source
        sent[topic] += 1
        if producer is not None:
            producer.produce(topic, value=message.value(), key=message.key(),
                             headers=_own_headers(message), on_delivery=delivered,
                             partition=index if index in known[topic].partitions else -1)
            producer.poll(0)
    if producer is not None and (producer.flush(conn.timeout) or failures):
        fail(f"re-driving failed ({'; '.join(failures[:3]) or 'not acknowledged'}): nothing "
             "committed, a new run sends these records again")
    return sent, skipped, reached
