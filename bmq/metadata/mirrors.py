"""Mirrored topics: topics that ``bmq mirror`` copies from a source cluster, batch for batch at
the source's offsets.

A mirrored topic is marked by its config ``bmq.mirror.source`` (the source cluster's name, set
when the mirror creates it). While it is marked, only the mirror writes to it (BmqMirrorAppend,
from that source); clients' produces are refused. ``bmq mirror promote`` deletes the config:
the mirror stops and the topic is an ordinary, writable one from its last mirrored offset on.
"""

from __future__ import annotations

import re

from bmq.metadata.topics import TopicRegistry
from bmq.protocol.errors import ErrorCode, KafkaError

MIRROR_SOURCE = "bmq.mirror.source"
# What a source cluster's name may be (it is a config value and a metric label).
LEGAL_SOURCE_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def mirror_source(topics: TopicRegistry, name: str) -> str | None:
    """The source cluster ``name`` is mirrored from, None if it is not a mirrored topic."""
    info = topics.get(name)
    return None if info is None else info.configs.get(MIRROR_SOURCE) or None


def refuse_mirrored(topics: TopicRegistry, name: str) -> None:
    """Produce to a mirrored topic: INVALID_REQUEST (what Confluent's Cluster Linking answers
    for a write to a mirror topic), nothing written."""
    source = mirror_source(topics, name)
    if source is not None:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"{name} is a read-only mirror of {source}'s topic: produce there, "
                         f"or promote it first (bmq mirror promote {name})")
