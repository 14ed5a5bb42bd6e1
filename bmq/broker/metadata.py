"""Cluster metadata of the embedded broker: topics, cluster id and producer-id blocks.

Each is a small JSON document on the metadata storage, so a restarted `bmq serve` finds its topics
again. In cluster mode the same facts live in ZooKeeper instead.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import Storage

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME = 249
# Kafka's internal topics: clients may read them but never produce to or delete them.
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})


def check_topic_name(name: str | None) -> str:
    """Kafka's topic-name rule; raises INVALID_TOPIC_EXCEPTION."""
    if not name or name in (".", "..") or len(name) > MAX_TOPIC_NAME \
            or not _LEGAL_TOPIC.fullmatch(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Invalid topic name {name!r}")
    return name


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


class TopicRegistry:
    """Topics by name and by id, one JSON document per topic under ``topics/``."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    def load(self) -> None:
        self._storage.makedirs("topics")
        for entry in self._storage.list("topics"):
            if entry.endswith(".json"):
                info = TopicInfo.from_json(json.loads(self._storage.read_all(f"topics/{entry}")))
                self._index(info)

    def _index(self, info: TopicInfo) -> None:
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def lookup(self, name: str) -> TopicInfo | None:
        """The topic as the source of truth has it (may do I/O: call off the event loop).

        Admin requests use it: a topic created through another broker a moment ago must be
        found even before this broker's cached view has caught up. Here the cache is the truth.
        """
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    def save(self, info: TopicInfo) -> None:
        self._storage.write_atomic(f"topics/{info.name}.json",
                                   json.dumps(info.to_json(), sort_keys=True).encode())
        self._index(info)

    def remove(self, info: TopicInfo) -> None:
        self._storage.delete(f"topics/{info.name}.json")
        self._by_name.pop(info.name, None)
        self._by_id.pop(info.topic_id, None)


def load_cluster_id(storage: Storage) -> str:
    """The cluster id, made once (Kafka's 22-character URL-safe base64 form) and kept."""
    path = "cluster.json"
    if storage.exists(path):
        return str(json.loads(storage.read_all(path))["cluster_id"])
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    storage.write_atomic(path, json.dumps({"cluster_id": cluster_id}).encode())
    return cluster_id


class ProducerIdAllocator:
    """Hands out producer ids from blocks reserved on storage, so no id is ever given twice."""

    _PATH = "producer_ids.json"

    def __init__(self, storage: Storage, block_size: int) -> None:
        self._storage = storage
        self._block_size = block_size
        self._next = 0
        self._block_end = 0
        self._lock = threading.Lock()

    def allocate(self) -> int:
        with self._lock:
            return self._allocate_locked()

    def _allocate_locked(self) -> int:
        if self._next >= self._block_end:
            start = 0
            if self._storage.exists(self._PATH):
                start = int(json.loads(self._storage.read_all(self._PATH))["next_block_start"])
            self._storage.write_atomic(
                self._PATH, json.dumps({"next_block_start": start + self._block_size}).encode())
            self._next, self._block_end = start, start + self._block_size
        pid = self._next
        self._next += 1
        return pid
