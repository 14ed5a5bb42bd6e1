"""Logical streams: what applications write to, routed as their mappings say (which topic, how
they are partitioned, compressed and batched), and the partitioners.

The mappings are kept with the cluster's metadata (bmq/metadata/databus_streams.py: `bmq
serve`'s meta directory, or ZooKeeper in cluster mode) and served by its brokers over the Kafka
protocol the agent already speaks; ``bmq databus map`` changes them. A stream with no mapping
goes to the topic of its own name with the agent's defaults."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping

from bmq.databus.settings import DatabusSettings
from bmq.metadata.databus_streams import COMPRESSIONS, StreamMapping
from bmq.metadata.topics import check_topic_name

# The version of the mappings an agent holds before it has read any.
NO_VERSION = -1


@dataclasses.dataclass(frozen=True)
class StreamRoute:
    """A stream as the agent batches it: its mapping with the agent's defaults filled in."""

    stream: str
    topic: str
    partitioner: str
    codec: int
    linger_s: float
    batch_bytes: int


MAX_ROUTES = 10_000


class StreamTable:
    """The mappings an agent knows, as last read from the cluster."""

    def __init__(self, settings: DatabusSettings) -> None:
        self.settings = settings
        self.mappings: Mapping[str, StreamMapping] = {}
        self.version = NO_VERSION
        # Each stream's route as last worked out (one a message was a profile's 2.6%); any
        # change of the mappings clears them.
        self._routes: dict[str, StreamRoute] = {}

    def replace(self, version: int, mappings: Mapping[str, StreamMapping]) -> None:
        """The mappings as the cluster has them at ``version``."""
        self.version = version
        self.mappings = mappings
        self._routes.clear()

    def route(self, stream: str) -> StreamRoute:
        """Where ``stream``'s messages go; KafkaError INVALID_TOPIC_EXCEPTION for a name no
        topic could have."""
        route = self._routes.get(stream)
        if route is None:
            if len(self._routes) >= MAX_ROUTES:       # (names clients made up)
                self._routes.clear()
            route = self._routes[stream] = self._route(stream)
        return route

    def _route(self, stream: str) -> StreamRoute:
        mapping = self.mappings.get(stream)
        if mapping is None:
            check_topic_name(stream)
            mapping = StreamMapping(topic=stream)
        settings = self.settings
        return StreamRoute(
            stream, mapping.topic, mapping.partitioner,
            COMPRESSIONS[mapping.compression or settings.compression],
            (settings.linger_ms if mapping.linger_ms is None else mapping.linger_ms) / 1000,
            mapping.batch_bytes or settings.batch_bytes)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), as a signed int32."""
    length = len(data)
    seed, m, r = 0x9747B28C, 0x5BD1E995, 24
    h = (seed ^ length) & 0xFFFFFFFF
    end = length - length % 4
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's Java producer picks for ``key`` (its BuiltInPartitioner)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def other_partition(previous: int | None, partitions: int) -> int:
    """The sticky partition of a stream's next batch: another one than the last, if any."""
    if partitions <= 1:
        return 0
    choice = random.randrange(partitions - 1 if previous is not None else partitions)
    return choice + 1 if previous is not None and choice >= previous else choice
