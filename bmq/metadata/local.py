"""The metadata of the embedded broker (`bmq serve`): topics, cluster id and producer-id blocks.

Each is a small JSON document in the data directory's ``meta/`` storage, so a restarted
`bmq serve` finds its topics again. A cluster keeps the same facts in ZooKeeper instead
(``bmq.metadata.zookeeper``).
"""

from __future__ import annotations

import base64
import json
import uuid

from bmq.metadata.producer_ids import ProducerIdAllocator
from bmq.metadata.topics import TopicInfo, TopicRegistry
from bmq.storage import Storage


class LocalTopicRegistry(TopicRegistry):
    """One JSON document per topic under ``topics/``; the cache is the truth."""

    def __init__(self, storage: Storage) -> None:
        super().__init__()
        self._storage = storage

    def load(self) -> None:
        self._storage.makedirs("topics")
        for entry in self._storage.list("topics"):
            if entry.endswith(".json"):
                info = TopicInfo.from_json(json.loads(self._storage.read_all(f"topics/{entry}")))
                self._index(info)

    def lookup(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def save(self, info: TopicInfo) -> None:
        self._storage.write_atomic(f"topics/{info.name}.json",
                                   json.dumps(info.to_json(), sort_keys=True).encode())
        self._index(info)

    def remove(self, info: TopicInfo) -> None:
        self._storage.delete(f"topics/{info.name}.json")
        self._forget(info)


def load_cluster_id(storage: Storage) -> str:
    """The cluster id, made once (Kafka's 22-character URL-safe base64 form) and kept."""
    path = "cluster.json"
    if storage.exists(path):
        return str(json.loads(storage.read_all(path))["cluster_id"])
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    storage.write_atomic(path, json.dumps({"cluster_id": cluster_id}).encode())
    return cluster_id


class LocalProducerIdAllocator(ProducerIdAllocator):
    """Blocks reserved in ``producer_ids.json`` (written before any id of the block is used)."""

    _PATH = "producer_ids.json"

    def __init__(self, storage: Storage, block_size: int) -> None:
        super().__init__(block_size)
        self._storage = storage

    def _reserve_block(self, at_least: int = 0) -> int:
        start = 0
        if self._storage.exists(self._PATH):
            start = int(json.loads(self._storage.read_all(self._PATH))["next_block_start"])
        start = max(start, at_least)
        self._storage.write_atomic(
            self._PATH, json.dumps({"next_block_start": start + self._block_size}).encode())
        return start
