"""Topics of a cluster: ZooKeeper is the source of truth, this is every broker's cached view.

Writes (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs on any broker) go straight to
ZooKeeper; the cache follows ZooKeeper through ``replace_all`` (called by the node's watcher on
the event loop) and is also updated at once by the writer so its own next request sees it.
"""

from __future__ import annotations

import contextlib

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from bmq.metadata.topics import TopicInfo, TopicRegistry
from bmq.metadata.zookeeper.layout import Paths, dumps, loads
from bmq.protocol.errors import ErrorCode, KafkaError


class ZkTopicRegistry(TopicRegistry):
    def __init__(self, zk: KazooClient, paths: Paths) -> None:
        super().__init__()
        self._zk = zk
        self._paths = paths

    def load(self) -> None:
        self._zk.ensure_path(self._paths.topics)
        topics = []
        for name in self._zk.get_children(self._paths.topics):
            try:
                data, _ = self._zk.get(self._paths.topic(name))
            except NoNodeError:
                continue
            topics.append(TopicInfo.from_json({"name": name, **loads(data)}))
        self.replace_all(topics)

    def lookup(self, name: str) -> TopicInfo | None:
        """ZooKeeper's topic, not the cached one: the watcher may not have delivered a change
        made through another broker a moment ago (a topic created, partitions added, configs
        altered), and an admin request computing from it (IncrementalAlterConfigs' APPEND and
        SUBTRACT, CreatePartitions) must not undo that change."""
        try:
            data, _ = self._zk.get(self._paths.topic(name))
        except NoNodeError:
            return None
        info = TopicInfo.from_json({"name": name, **loads(data)})
        self._index(info)
        return info

    def replace_all(self, topics: list[TopicInfo]) -> None:
        """Make the cache exactly ``topics``, keeping the objects of unchanged topics."""
        by_name = {info.name: self._cached(info) for info in topics}
        self._by_name = by_name
        self._by_id = {info.topic_id: info for info in by_name.values()}

    @staticmethod
    def _doc(info: TopicInfo) -> bytes:
        return dumps({"topic_id": str(info.topic_id), "partitions": info.partitions,
                      "configs": info.configs})

    def save(self, info: TopicInfo) -> None:
        path = self._paths.topic(info.name)
        current = self._by_name.get(info.name)
        if current is not None and current.topic_id == info.topic_id:
            self._zk.set(path, self._doc(info))
        else:
            try:
                self._zk.create(path, self._doc(info), makepath=True)
            except NodeExistsError:
                # Created concurrently through another broker: learn it now, then refuse.
                data, _ = self._zk.get(path)
                self._index(TopicInfo.from_json({"name": info.name, **loads(data)}))
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                 f"Topic '{info.name}' already exists.") from None
        self._index(info)

    def remove(self, info: TopicInfo) -> None:
        with contextlib.suppress(NoNodeError):
            self._zk.delete(self._paths.topic(info.name))
        self._forget(info)
