"""The index builder's first look at the partitions it owns: it lists a partition's index
files (one LIST per partition on S3) only for topics that have or had indexed fields, and
still removes the files of fields dropped while no owner ran."""

from __future__ import annotations

from pathlib import Path

from bmq.field_index.builder import IndexBuilder
from bmq.field_index.fields import (
    INDEX_FIELDS,
    Field,
    ever_indexed,
    keep_index_marker,
    parse_fields,
)
from bmq.field_index.store import IndexStore
from bmq.protocol.record_codec import Record, encode_batch
from bmq.storage import LocalStorage, LogConfig, PartitionLog

NOW = 1_700_000_000_000


class ListedStorage(LocalStorage):
    """Local storage that remembers every directory it was asked to list."""

    listed: list[str]

    def list(self, path: str) -> list[str]:
        self.listed.append(path)
        return super().list(path)


def test_first_sight_lists_only_topics_that_had_an_index(tmp_path: Path) -> None:
    storage = ListedStorage(str(tmp_path))
    storage.listed = []
    store = IndexStore(storage)
    dropped = parse_fields("key")[0]
    configs = {"plain": {}, "indexed": {INDEX_FIELDS: "order_id"},
               "dropped": keep_index_marker({INDEX_FIELDS: "order_id,key"}, {})}
    assert configs["dropped"] == {INDEX_FIELDS: ""}
    logs = {}
    for topic in configs:
        logs[topic] = PartitionLog.open(storage, topic, 0, LogConfig(retention_ms=-1))
        batch, header = encode_batch([Record(0, NOW, b"k", b'{"order_id": 7}', [])])
        logs[topic].append(memoryview(batch), [header], NOW)
        logs[topic].flush()
    # Files of an index dropped while no owner ran: the key field's of "dropped".
    store.write("dropped", 0, dropped, 0, 1, b"left over")
    assert store.indexed_dirs("dropped", 0)
    storage.listed.clear()

    def fields_of(topic: str) -> list[Field]:
        return parse_fields(configs[topic].get(INDEX_FIELDS, ""))

    builder = IndexBuilder(store, lambda: [(t, 0, log) for t, log in logs.items()], fields_of,
                           lambda topic: ever_indexed(configs[topic]), interval_s=0)
    builder.run_once()
    assert not [path for path in storage.listed if path.startswith("plain/")]
    assert {"indexed/0/field-index", "dropped/0/field-index"} <= set(storage.listed)
    assert store.indexed_dirs("dropped", 0) == []
    # A change of fields while the builder runs lists the topic again, marker or not.
    configs["plain"] = {INDEX_FIELDS: "key"}
    storage.listed.clear()
    builder.run_once()
    assert "plain/0/field-index" in storage.listed
    for log in logs.values():
        log.close()
