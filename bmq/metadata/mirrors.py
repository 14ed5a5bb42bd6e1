"""Mirrored topics: topics that ``bmq mirror`` copies from a source cluster, batch for batch at
the source's offsets.

A mirrored topic is marked by its config ``bmq.mirror.source`` (the source cluster's name, set
when the mirror creates it). While it is marked, only the mirror writes to it (BmqMirrorAppend,
from that source); clients' produces are refused. ``bmq mirror promote`` deletes the config:
the mirror stops and the topic is an ordinary, writable one from its last mirrored offset on.
No other change of the mark is taken (``check_mark_change``): an existing topic never becomes
a mirror (it would refuse its producers), nor a mirror of another source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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


def check_mark_change(name: str, old: Mapping[str, str], new: Mapping[str, str],
                      promoting: bool) -> None:
    """AlterConfigs and IncrementalAlterConfigs of a topic's configs ``old`` into ``new``: the
    mark is set only when `bmq mirror` creates a mirrored topic, and only deleted by a
    promotion (``promoting``: an IncrementalAlterConfigs DELETE of it, what `bmq mirror
    promote` sends); any other change is refused with INVALID_CONFIG."""
    before, after = old.get(MIRROR_SOURCE) or None, new.get(MIRROR_SOURCE) or None
    if before == after or (after is None and promoting):
        return
    if before is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"{MIRROR_SOURCE} is set only by bmq mirror, on a topic it creates: "
                         f"{name} is not a mirror")
    raise KafkaError(ErrorCode.INVALID_CONFIG,
                     f"{name} is a mirror of {before}: {MIRROR_SOURCE} is never changed, only "
                     f"deleted by promoting the topic (bmq mirror promote {name}, or an "
                     f"IncrementalAlterConfigs DELETE of {MIRROR_SOURCE})")
