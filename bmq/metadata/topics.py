"""Topics: Kafka's naming rules, the internal topics, and the registry every role reads.

A ``TopicRegistry`` is a cache of topics by name and by id; where the topics are kept (a
`bmq serve` data directory, ZooKeeper) is up to its subclass (``bmq.metadata.local``,
``bmq.metadata.zookeeper.topics``).
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.primitives import ZERO_UUID

# A partition of a topic, as Kafka's TopicPartition (by name) and TopicIdPartition (by topic
# id, as the share group APIs name partitions): the one definition every package uses.
TopicPartition = tuple[str, int]
TopicIdPartition = tuple[uuid.UUID, int]

LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME = 249
# Kafka's internal topics: clients may read them but never produce to or delete them.
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"


class Compaction(Enum):
    """How an internal log is kept about as small as its live state."""

    #: Its coordinator has the live state in memory already: it appends all of it again (a
    #: snapshot) and deletes the records before it (DeleteRecords). The log cleaner leaves it
    #: alone.
    SNAPSHOTS = "snapshots"
    #: The log cleaner keeps each key's last record, as for any ``cleanup.policy=compact`` topic.
    LOG_CLEANER = "log cleaner"


@dataclass(frozen=True, slots=True)
class InternalLog:
    """What is decided once per internal log, whichever coordinator writes it."""

    topic: str
    compaction: Compaction
    #: The ``cleanup.policy`` it is created with, as Kafka creates it (None: not set, the
    #: brokers' ``log.cleanup.policy``). The log cleaner's logs need ``compact``; for
    #: snapshotted ones it is only what DescribeConfigs shows: the cleaner skips them by name.
    cleanup_policy: str | None
    #: Created on first use (as Kafka does) rather than when the broker starts: a broker whose
    #: clients never use transactions or share groups keeps no partitions for them.
    created_on_first_use: bool

    def __post_init__(self) -> None:
        if self.compaction is Compaction.LOG_CLEANER and self.cleanup_policy != "compact":
            raise ValueError(f"{self.topic}: the log cleaner compacts only compact topics")

    def configs(self) -> dict[str, str]:
        """The configs that follow from the declaration (the coordinator adds the rest)."""
        return {} if self.cleanup_policy is None else {"cleanup.policy": self.cleanup_policy}


INTERNAL_LOGS = {internal.topic: internal for internal in (
    InternalLog(OFFSETS_TOPIC, Compaction.SNAPSHOTS, "compact", created_on_first_use=False),
    InternalLog(TRANSACTION_TOPIC, Compaction.LOG_CLEANER, "compact",
                created_on_first_use=True),
    InternalLog(SHARE_STATE_TOPIC, Compaction.SNAPSHOTS, None, created_on_first_use=True),
)}
INTERNAL_TOPICS = frozenset(INTERNAL_LOGS)
# The internal logs the log cleaner leaves alone (their coordinators snapshot them).
SNAPSHOTTED_TOPICS = frozenset(topic for topic, internal in INTERNAL_LOGS.items()
                               if internal.compaction is Compaction.SNAPSHOTS)


def check_topic_name(name: str | None) -> str:
    """Kafka's topic-name rule; raises INVALID_TOPIC_EXCEPTION."""
    if not name or name in (".", "..") or len(name) > MAX_TOPIC_NAME \
            or not LEGAL_TOPIC.fullmatch(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Invalid topic name {name!r}")
    return name


def asked_name(name: str | None, topic_id: uuid.UUID) -> str | None:
    """The topic name a Metadata request asks for, or None when it asks by topic id: a
    non-zero id wins over the name, as in Kafka (the Java consumer sends an empty name beside
    the id of a topic a broker-side regex assigned it)."""
    return None if topic_id != ZERO_UUID else name


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "topic_id": str(self.topic_id),
                "partitions": self.partitions, "configs": self.configs}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TopicInfo:
        return cls(doc["name"], uuid.UUID(doc["topic_id"]), int(doc["partitions"]),
                   dict(doc.get("configs", {})))


class TopicRegistry(ABC):
    """Topics by name and by id, cached in memory; subclasses keep them somewhere durable.

    ``load``, ``lookup``, ``save`` and ``remove`` may do I/O: call them off the event loop.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    def _cached(self, info: TopicInfo) -> TopicInfo:
        """``info`` as the cache keeps it: the cached object of the same topic, updated in
        place (those who hold it see the change), else ``info`` itself."""
        current = self._by_name.get(info.name)
        if current is None or current.topic_id != info.topic_id:
            return info
        current.partitions, current.configs = info.partitions, info.configs
        return current

    def _index(self, info: TopicInfo) -> None:
        info = self._cached(info)
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info

    def _forget(self, info: TopicInfo) -> None:
        self._by_name.pop(info.name, None)
        self._by_id.pop(info.topic_id, None)

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    @abstractmethod
    def load(self) -> None:
        """Fill the cache from where the topics are kept."""

    @abstractmethod
    def lookup(self, name: str) -> TopicInfo | None:
        """The topic as the source of truth has it.

        Admin requests use it: a topic created through another broker a moment ago must be
        found even before this node's cached view has caught up.
        """

    @abstractmethod
    def save(self, info: TopicInfo) -> None:
        """Create or update a topic (TOPIC_ALREADY_EXISTS if another one took the name)."""

    @abstractmethod
    def remove(self, info: TopicInfo) -> None:
        """Delete a topic."""
