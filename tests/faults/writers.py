"""Who wrote each record of a topic: the producer id, epoch and sequence of every record batch,
read with BMQ's own client (confluent-kafka does not show them), so that a checker can tell a
broker's duplicate from a client's.

librdkafka's idempotent producer bumps its epoch by itself when a message times out
(``message.timeout.ms``) or when a later in-flight request of a partition fails with
OUT_OF_ORDER_SEQUENCE_NUMBER after an earlier one failed, and renumbers every message it still
holds from sequence 0 under the new epoch: those it had sent already and that may have been
persisted, whose acknowledgement it never had, too (librdkafka's INTRODUCTION.md, "Message
timeout considerations"; confluentinc/librdkafka#4953, open, seen on Apache Kafka: "it can have
duplications in case messages time out because the epoch needs to be bumped"). A broker, Kafka's
as well, must take the new epoch's sequence 0 as new records: one value twice in the log, its
copies under two epochs of one producer id. That is what ``renumbered`` recognises. A broker
that wrote one batch twice shows the same producer id, epoch and sequence at two offsets, and a
value that reached the log twice under one epoch is no client's doing: both stay duplicates.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Mapping, Sequence

from bmq.net.client import LinkPool
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import FetchRequest, MetadataRequest
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from bmq.protocol.messages.metadata_request import MetadataRequestTopic
from bmq.protocol.records import iter_batches

# Per partition, per batch in offset order: base offset, last offset, producer id, epoch, base
# sequence (JSON-friendly: recorded in the history as is).
Writers = dict[int, list[list[int]]]
FETCH_VERSION = 12          # topics by name
METADATA_VERSION = 12
# A fetch sent where the partition is no more (it moved as the faults healed): ask again.
LEADER_MOVED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
FETCH_BYTES = 4 << 20
READ_TIMEOUT_S = 30.0


def read_writers(address: str, topic: str, partitions: int) -> Writers:
    """The batches of every partition of ``topic`` up to its high watermark, read from each
    partition's leader as the node at ``address`` (host:port; a broker or a proxy) names it."""
    host, port = address.split(",")[0].rsplit(":", 1)
    return asyncio.run(asyncio.wait_for(_read(host, int(port), topic, partitions),
                                        READ_TIMEOUT_S))


async def _read(host: str, port: int, topic: str, partitions: int) -> Writers:
    links = LinkPool("bmq-faults-writers")
    try:
        return {partition: await _read_partition(links, (host, port), topic, partition)
                for partition in range(partitions)}
    finally:
        links.close()


async def _read_partition(links: LinkPool, bootstrap: tuple[str, int], topic: str,
                          partition: int) -> list[list[int]]:
    """One partition's batches, fetched from its leader (the node at ``bootstrap`` names it:
    a proxy names a proxy, a broker the broker that owns the partition, or a proxy)."""
    batches: list[list[int]] = []
    offset = 0
    leader = await _leader(links, bootstrap, topic, partition)
    while True:
        response = await links.get(*leader).request(FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=FETCH_BYTES,
            isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchTopic(
                topic=topic, partitions=[FetchPartition(
                    partition=partition, fetch_offset=offset,
                    partition_max_bytes=FETCH_BYTES)])]), FETCH_VERSION)
        [answer] = response.responses[0].partitions
        if answer.error_code in LEADER_MOVED:
            await asyncio.sleep(0.5)
            leader = await _leader(links, bootstrap, topic, partition)
            continue
        if answer.error_code:
            raise AssertionError(f"fetch of {topic}-{partition} at {offset}: error "
                                 f"{answer.error_code}")
        start = offset
        for _, header in iter_batches(bytes(answer.records or b"")):
            if header.last_offset >= offset:
                batches.append([header.base_offset, header.last_offset, header.producer_id,
                                header.producer_epoch, header.base_sequence])
                offset = header.last_offset + 1
        if offset == start or offset >= answer.high_watermark:
            return batches


async def _leader(links: LinkPool, bootstrap: tuple[str, int], topic: str, partition: int
                  ) -> tuple[str, int]:
    metadata = await links.get(*bootstrap).request(MetadataRequest(
        topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
        METADATA_VERSION)
    nodes = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    [found] = metadata.topics
    leader = next((p.leader_id for p in found.partitions if p.partition_index == partition), -1)
    return nodes.get(leader, bootstrap)


def writer_at(writers: Mapping[int, Sequence[Sequence[int]]], partition: int, offset: int
              ) -> tuple[int, int, int] | None:
    """(producer id, epoch, sequence) of the record at ``offset``, if a batch holds it."""
    batches = writers.get(partition, [])
    i = bisect.bisect_right([b[0] for b in batches], offset) - 1
    if i < 0 or offset > batches[i][1]:
        return None
    base, _, producer_id, epoch, sequence = batches[i]
    return producer_id, epoch, sequence + offset - base


def renumbered(writers: Mapping[int, Sequence[Sequence[int]]] | None,
               places: Sequence[tuple[int, int]]) -> bool:
    """Whether the copies of one value at ``places`` (partition, offset) are one producer's
    record renumbered by the client: one partition, one producer id, each later copy under a
    higher epoch."""
    if writers is None or len({partition for partition, _ in places}) != 1:
        return False
    found = [writer_at(writers, partition, offset) for partition, offset in sorted(places)]
    if any(w is None or w[0] < 0 for w in found):
        return False
    ids = {w[0] for w in found if w is not None}
    epochs = [w[1] for w in found if w is not None]
    return len(ids) == 1 and all(a < b for a, b in itertools.pairwise(epochs))
