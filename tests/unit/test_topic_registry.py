"""Saving a topic keeps the registry's cached object: an admin call saves a copy with the new
partition count or configs (the cached object may be refreshed from ZooKeeper while the save
waits for a thread, and a save that serialised that object then wrote stale values back: a
CreatePartitions was lost that way under load), and whoever holds the cached object sees it."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

from bmq.metadata.local import LocalTopicRegistry
from bmq.metadata.topics import TopicInfo
from bmq.storage.local import LocalStorage


def test_saving_a_copy_updates_the_cached_topic(tmp_path: Path) -> None:
    registry = LocalTopicRegistry(LocalStorage(str(tmp_path)))
    registry.load()
    registry.save(TopicInfo("orders", uuid.uuid4(), 2, {}))
    cached = registry.get("orders")
    assert cached is not None
    registry.save(replace(cached, partitions=5, configs={"retention.ms": "1000"}))
    assert registry.get("orders") is cached
    assert (cached.partitions, cached.configs) == (5, {"retention.ms": "1000"})
    reloaded = LocalTopicRegistry(LocalStorage(str(tmp_path)))
    reloaded.load()
    again = reloaded.get("orders")
    assert again is not None and (again.partitions, again.configs) == (5, {"retention.ms": "1000"})
