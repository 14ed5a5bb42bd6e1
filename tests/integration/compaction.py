"""The compacted-topic workload of the cleaner tests: updates over keys with tombstones, and the
checks a Kafka user makes of a compacted log read from the start."""

from __future__ import annotations

import random
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any

from .helpers import Msg

# Every test topic rolls small segments, so the cleaner has sealed segments to clean at once,
# and cleans as soon as anything is dirty.
COMPACTED: dict[str, str] = {
    "cleanup.policy": "compact",
    "segment.bytes": "16384",
    "min.cleanable.dirty.ratio": "0.01",
    "file.delete.delay.ms": "0",
}
FILLER_KEY = b"filler"


def updates(count: int, keys: int, deleted: int, seed: int = 7, fillers: int = 400
            ) -> tuple[list[dict[str, Any]], dict[bytes, bytes | None]]:
    """``count`` updates over ``keys`` keys, of which the last ``deleted`` end with a tombstone
    (others get tombstones along the way too), then ``fillers`` records of 100 bytes of one key,
    more than a segment of the topic, so that every update is in a sealed segment (the active
    segment is never cleaned). Returns the produce arguments and the last value of each key
    (None: deleted)."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    last: dict[bytes, bytes | None] = {}
    for i in range(count - deleted):
        key = b"key-%05d" % rng.randrange(keys)
        value = None if rng.random() < 0.02 else b"value-%08d-" % i + b"x" * 40
        items.append({"key": key, "value": value})
        last[key] = value
    for k in range(keys - deleted, keys):
        key = b"key-%05d" % k
        items.append({"key": key, "value": None})
        last[key] = None
    items += [{"key": FILLER_KEY, "value": b"f" * 100} for _ in range(fillers)]
    return items, last


def latest(messages: Iterable[Msg]) -> tuple[dict[bytes, bytes | None], dict[bytes, int]]:
    """(last value of each key but the filler's, how many records each key has)."""
    values: dict[bytes, bytes | None] = {}
    counts: dict[bytes, int] = {}
    for m in messages:
        assert m.key is not None
        if m.key == FILLER_KEY:
            continue
        values[m.key] = m.value
        counts[m.key] = counts.get(m.key, 0) + 1
    return values, counts


def segment_bytes(data_dir: str, topic: str, partition: int = 0, sealed: bool = False) -> int:
    """Bytes of the partition's segment files on disk; with ``sealed``, without the active
    segment (the one of the highest base offset), which the cleaner never cleans."""
    files = sorted(Path(data_dir, "topics", topic, str(partition)).glob("*.log"),
                   key=lambda p: int(p.name[:20]))
    return sum(p.stat().st_size for p in (files[:-1] if sealed else files))


def offsets_grow(messages: list[Msg]) -> bool:
    return all(a.offset < b.offset for a, b in pairwise(messages))
