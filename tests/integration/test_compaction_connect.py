"""A Kafka Connect-style workload on compacted topics: a worker's config, offset and status
topics (Connect refuses to start unless DescribeConfigs says cleanup.policy=compact), written
as Connect writes them, read back from the start by a restarted worker: the latest config,
offset and status of everything, deleted connectors gone, while the cleaner compacts."""

from __future__ import annotations

import json

import pytest

from .compaction import COMPACTED, offsets_grow
from .helpers import consume, create_topic, produce_all, topic_configs, wait_until

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.broker(env={"BMQ_LOG_CLEANER_BACKOFF_MS": 200})]

CONNECTORS = 20
DELETED = 5
TOPICS = {"configs": 1, "offsets": 5, "status": 3}   # Connect's defaults are 1, 25, 5


def _key(name: str, partition_hint: int) -> dict[str, object]:
    return {"key": name.encode(), "partition": partition_hint}


def test_connect_style_topics_keep_the_latest_state(broker, unique_topic) -> None:
    names = {kind: unique_topic(kind) for kind in TOPICS}
    for kind, partitions in TOPICS.items():
        create_topic(broker.bootstrap, names[kind], partitions, config=COMPACTED)
        assert topic_configs(broker.bootstrap, names[kind])["cleanup.policy"] == "compact"

    state: dict[str, dict[tuple[int, bytes], bytes | None]] = {k: {} for k in TOPICS}
    items: dict[str, list[dict[str, object]]] = {k: [] for k in TOPICS}

    def write(kind: str, key: str, value: dict[str, object] | None, partition: int) -> None:
        raw = None if value is None else json.dumps(value).encode()
        items[kind].append({**_key(key, partition), "value": raw})
        state[kind][(partition, key.encode())] = raw

    for generation in range(30):
        for c in range(CONNECTORS):
            name = f"connector-{c}"
            write("configs", f"connector-{name}",
                  {"properties": {"name": name, "tasks.max": "4", "gen": generation,
                                  "pad": "x" * 400}}, 0)
            write("configs", f"commit-{name}", {"tasks": 4, "gen": generation}, 0)
            for task in range(4):
                write("offsets", json.dumps([name, {"file": f"f{task}"}]),
                      {"position": generation * 100 + task}, (c + task) % TOPICS["offsets"])
            write("status", f"status-task-{name}-0",
                  {"state": "RUNNING", "worker_id": "w1", "generation": generation},
                  c % TOPICS["status"])
    for c in range(DELETED):   # connectors removed: tombstones, as Connect writes them
        name = f"connector-{c}"
        write("configs", f"connector-{name}", None, 0)
        write("configs", f"commit-{name}", None, 0)
        write("status", f"status-task-{name}-0", None, c % TOPICS["status"])
    for kind in TOPICS:
        produce_all(broker.bootstrap, names[kind], items[kind], enable_idempotence=True,
                    acks="all", batch_size=8192)

    def restarted_worker_reads(kind: str) -> dict[tuple[int, bytes], bytes | None]:
        seen: dict[tuple[int, bytes], bytes | None] = {}
        partitions = range(TOPICS[kind])
        for partition, messages in consume(broker.bootstrap, names[kind], partitions).items():
            assert offsets_grow(messages)
            for m in messages:
                assert m.key is not None
                seen[(partition, m.key)] = m.value
        return seen

    for kind in TOPICS:
        live = {k: v for k, v in state[kind].items() if v is not None}
        seen = restarted_worker_reads(kind)
        assert {k: v for k, v in seen.items() if v is not None} == live, kind

    # The config topic (the busiest partition) is compacted meanwhile.
    produced = len(items["configs"])
    wait_until(lambda: len(consume(broker.bootstrap, names["configs"])[0]) < produced // 4,
               60, interval=0.5, message="the config topic was not compacted")
    live = {k: v for k, v in state["configs"].items() if v is not None}
    seen = restarted_worker_reads("configs")
    assert {k: v for k, v in seen.items() if v is not None} == live
