"""Views and lanes: topics that have no log of their own and show a filtered source topic.

A view is a topic whose configs name its source (``bmq.view.source``) and its filter
(``bmq.view.filter``, RocketMQ's SQL-92 subset over record headers, ``bmq.readpath.filters``).
It has the source's partitions and offsets; its partitions are served by whoever serves the
source's, so it is never placed or opened itself.

Lanes: on a topic with ``bmq.lanes.enable=true`` the records with a ``bmq.lane`` header belong
to that lane. Consumers of the topic itself (the trunk) see only records without one, and
``TOPIC.lane.LANE`` is a view of the topic showing one lane, made on first use (its id is
derived from the source's, so every node names it alike).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from bmq.metadata.topics import TopicInfo, TopicRegistry
from bmq.protocol.errors import ErrorCode, KafkaError

VIEW_SOURCE = "bmq.view.source"
VIEW_FILTER = "bmq.view.filter"
LANES_ENABLE = "bmq.lanes.enable"
LANE_HEADER = "bmq.lane"
LANE_INFIX = ".lane."
# What the trunk of a topic with lanes shows: records of no lane.
TRUNK_FILTER = f"{LANE_HEADER} IS NULL"


@dataclass(frozen=True, slots=True)
class ReadFilter:
    """How a topic's fetches are served: from ``source``'s log, keeping the records that match
    ``expression`` (None: every record)."""

    source: str
    expression: str | None


def is_view(configs: Mapping[str, str | None]) -> bool:
    return VIEW_SOURCE in configs


def lanes_enabled(configs: Mapping[str, str]) -> bool:
    return configs.get(LANES_ENABLE, "false").lower() == "true"


def lane_filter(lane: str) -> str:
    # Topic names allow only [a-zA-Z0-9._-]: a lane name never needs quoting.
    return f"{LANE_HEADER} = '{lane}'"


def lane_view(topics: TopicRegistry, name: str) -> TopicInfo | None:
    """The lane view ``name`` stands for (``TOPIC.lane.LANE`` of a topic with lanes), whether or
    not it was made yet; None if ``name`` names no lane."""
    source_name, infix, lane = name.rpartition(LANE_INFIX)
    if not infix or not lane:
        return None
    source = topics.get(source_name)
    if source is None or is_view(source.configs) or not lanes_enabled(source.configs):
        return None
    return TopicInfo(name, uuid.uuid5(source.topic_id, lane), source.partitions,
                     {VIEW_SOURCE: source_name, VIEW_FILTER: lane_filter(lane)})


def read_filter(topics: TopicRegistry, name: str) -> ReadFilter:
    """Where ``name``'s records come from: a view's source and filter, a lane's, the trunk's
    filter of a topic with lanes, or the topic itself."""
    info = topics.get(name)
    if info is None:
        info = lane_view(topics, name)
        if info is None:
            return ReadFilter(name, None)
    if is_view(info.configs):
        return ReadFilter(info.configs[VIEW_SOURCE], info.configs.get(VIEW_FILTER, "TRUE"))
    if lanes_enabled(info.configs):
        return ReadFilter(name, TRUNK_FILTER)
    return ReadFilter(name, None)


def refuse_view(topics: TopicRegistry, name: str) -> None:
    """Produce to a view or a lane: INVALID_TOPIC_EXCEPTION, as to an internal topic."""
    how = read_filter(topics, name)
    if how.source != name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"{name} is a read-only view of {how.source}: produce to {how.source}")


def served_topic(topics: TopicRegistry, name: str) -> str:
    """The topic whose partitions serve ``name``'s: a view's source, else ``name``."""
    return read_filter(topics, name).source


def views_of(topics: TopicRegistry, source: str) -> list[TopicInfo]:
    """The views (lanes included) whose source is ``source``."""
    return [info for info in topics.all() if info.configs.get(VIEW_SOURCE) == source]
