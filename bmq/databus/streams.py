"""Logical streams: what applications write to, and the mapping that says where a stream's
messages go (which topic, how they are partitioned, compressed and batched).

The mappings are kept on the cluster itself, as the records of a compacted topic
(``STREAMS_TOPIC``: key the stream's name, value its mapping as JSON, a tombstone to remove
it), so every agent of a cluster reads the same ones over the Kafka protocol it already
speaks, whatever the cluster's mode (a ``bmq serve``, brokers under ZooKeeper, or any
Kafka-compatible cluster); ``bmq databus map`` writes them. A stream with no mapping goes to
the topic of its own name with the agent's defaults."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

from bmq.databus.settings import COMPRESSIONS, DatabusSettings
from bmq.metadata.topics import check_topic_name
from bmq.protocol.errors import KafkaError

STREAMS_TOPIC = "__bmq_databus_streams"
# key: murmur2 of the key as Kafka's Java producer does (a key's records stay in one partition,
# in order); records without a key go where the stream's current batch goes. sticky: keys are
# ignored, each batch goes to one partition, the next batch to another (fewest requests).
PARTITIONERS = ("key", "sticky")


class MappingError(ValueError):
    """A mapping that cannot be used; its text says why."""


@dataclasses.dataclass(frozen=True)
class StreamMapping:
    topic: str
    partitioner: str = "key"
    compression: str | None = None      # None: the agent's setting
    linger_ms: int | None = None
    batch_bytes: int | None = None

    def to_json(self) -> bytes:
        return json.dumps({k: v for k, v in dataclasses.asdict(self).items()
                           if v is not None}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> StreamMapping:
        try:
            doc = json.loads(raw)
        except ValueError as error:
            raise MappingError(f"not JSON: {error}") from error
        if not isinstance(doc, dict):
            raise MappingError("a mapping is a JSON object")
        return make_mapping(**doc)


def make_mapping(**fields: Any) -> StreamMapping:
    """A checked mapping (MappingError says what is wrong)."""
    known = {field.name for field in dataclasses.fields(StreamMapping)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise MappingError(f"unknown mapping field(s): {', '.join(unknown)}")
    try:
        check_topic_name(fields.get("topic"))
    except KafkaError as error:
        raise MappingError(error.message or "invalid topic name") from error
    if fields.get("partitioner", "key") not in PARTITIONERS:
        raise MappingError(f"partitioner: one of {', '.join(PARTITIONERS)}")
    compression = fields.get("compression")
    if compression is not None and compression not in COMPRESSIONS:
        raise MappingError(f"compression: one of {', '.join(COMPRESSIONS)}")
    for name, lowest in (("linger_ms", 0), ("batch_bytes", 1)):
        value = fields.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < lowest):
            raise MappingError(f"{name}: a whole number of at least {lowest}")
    return StreamMapping(**fields)


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
    """The mappings an agent knows, as read from ``STREAMS_TOPIC``."""

    def __init__(self, settings: DatabusSettings) -> None:
        self.settings = settings
        self.mappings: dict[str, StreamMapping] = {}
        self.next_offset = 0        # of STREAMS_TOPIC's only partition
        # Each stream's route as last worked out (one a message was a profile's 2.6%); any
        # change of a mapping clears them.
        self._routes: dict[str, StreamRoute] = {}

    def apply(self, key: bytes | None, value: bytes | None) -> str | None:
        """One record of the mappings topic; a complaint for the log if it is unusable."""
        if key is None:
            return "a mapping record without a key"
        self._routes.clear()
        stream = key.decode("utf-8", "replace")
        if value is None:
            self.mappings.pop(stream, None)
            return None
        try:
            self.mappings[stream] = StreamMapping.from_json(value)
        except (MappingError, TypeError) as error:
            return f"stream {stream}: mapping ignored: {error}"
        return None

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
