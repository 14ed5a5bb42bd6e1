"""Dead-letter topics for share groups (KIP-1191): a record rejected by a consumer, or
given up at the group's delivery limit, is copied to the group's
``errors.deadletterqueue.topic.name`` (created on first use) with headers that say where it
came from and why, before the share-partition archives it.

KIP-1191's guard against writing to a business topic, checked at each write in Kafka's order
(so fixing a topic's config takes effect at the next one): the name does not start with ``__``;
a topic that exists has ``errors.deadletterqueue.group.enable=true`` (the topics created here get
it); the name starts with the broker's ``errors.deadletterqueue.topic.name.prefix`` (``dlq.``;
empty: any name). A topic that breaks one gets nothing: ``DeadLetterTopicRefused``, Kafka's
message, and the records are archived without a letter, as Kafka does.

KIP-1191 leaves the header names open, so they are BMQ's: ``bmq.dlq.topic``,
``bmq.dlq.partition``, ``bmq.dlq.offset``, ``bmq.dlq.group``, ``bmq.dlq.delivery.count`` and
``bmq.dlq.reason`` (``rejected`` or ``delivery.count.limit``), values as UTF-8 text, after the
record's own headers. Key, value and timestamp are the record's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bmq.coordinators.base import CoordinatorHost
from bmq.coordinators.share.partition import DeadLetter
from bmq.coordinators.share.reads import read_records
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import Record, encode_batch
from bmq.readpath.partition_view import PartitionView
from bmq.writepath.partitions import now_ms

# KIP-1191's topic config: the topic may be a share group's dead-letter topic.
DEAD_LETTER_ENABLE = "errors.deadletterqueue.group.enable"
# The provenance headers (all named HEADER_PREFIX + ...); `bmq dlq redrive` reads them back.
HEADER_PREFIX = "bmq.dlq."
TOPIC_HEADER = HEADER_PREFIX + "topic"
PARTITION_HEADER = HEADER_PREFIX + "partition"


class DeadLetterTopicRefused(KafkaError):
    """The group's dead-letter topic breaks one of KIP-1191's rules (Kafka's ConfigException):
    a lasting configuration error, not a failed write to retry."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_CONFIG, message)


def check_dead_letter_topic(host: CoordinatorHost, group_id: str, dlq_topic: str) -> None:
    """Raise DeadLetterTopicRefused if ``dlq_topic`` may not take ``group_id``'s dead letters
    (Kafka's ShareGroupDLQValidator, its rules and messages, in its order)."""
    if dlq_topic.startswith("__"):
        raise DeadLetterTopicRefused(f"Configured DLQ topic name in share group: {group_id} "
                                     f"cannot start with __, topic: {dlq_topic}.")
    info = host.topics.get(dlq_topic)
    if info is not None and info.configs.get(DEAD_LETTER_ENABLE, "").lower() != "true":
        raise DeadLetterTopicRefused("DLQ is not enabled on configured DLQ topic for share "
                                     f"group: {group_id}, topic: {dlq_topic}")
    prefix = host.config.errors_deadletterqueue_topic_name_prefix
    if prefix and not dlq_topic.startswith(prefix):
        raise DeadLetterTopicRefused(
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share "
            f"group: {group_id}, topic: {dlq_topic}, prefix: {prefix}")


# Cluster mode: append a batch to a partition another broker owns, durably (acks=all).
RemoteAppend = Callable[[str, int, bytes], Awaitable[None]]


async def dead_letter(host: CoordinatorHost, view: PartitionView, group_id: str,
                      dlq_topic: str, letters: list[DeadLetter],
                      append_elsewhere: RemoteAppend | None = None) -> None:
    """Write ``letters`` of ``view``'s partition to ``dlq_topic`` and wait until durable
    (through its owner when another broker owns the partition). Raises DeadLetterTopicRefused
    if KIP-1191's rules refuse the topic, KafkaError if it cannot take them now."""
    check_dead_letter_topic(host, group_id, dlq_topic)
    info = host.topics.get(dlq_topic)
    if info is None:
        try:
            info = await host.create_topic(dlq_topic, configs={DEAD_LETTER_ENABLE: "true"})
        except KafkaError as error:
            if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            check_dead_letter_topic(host, group_id, dlq_topic)    # made meanwhile: as it is
            info = host.topics.get(dlq_topic)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, dlq_topic)
    index = view.index % info.partitions
    partition = await host.local_partition(dlq_topic, index)
    if partition is None and append_elsewhere is None:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{dlq_topic} is not local")
    records = []
    for letter in letters:
        context = [(TOPIC_HEADER, view.topic), (PARTITION_HEADER, str(view.index)),
                   ("bmq.dlq.group", group_id), ("bmq.dlq.delivery.count", str(letter.count)),
                   ("bmq.dlq.reason", letter.reason)]
        for record in await read_records(view, letter.first, letter.last):
            headers = record.headers + [(name, value.encode()) for name, value in context]
            headers.append(("bmq.dlq.offset", str(record.offset).encode()))
            records.append(Record(0, record.timestamp, record.key, record.value, headers))
    if not records:
        return
    if partition is None:
        assert append_elsewhere is not None
        await append_elsewhere(dlq_topic, index, bytes(encode_batch(records)[0]))
        return
    batch, header = encode_batch(records, partition.leader_epoch)
    await partition.append_batch(batch, header, now_ms())
