"""What CreateTopics checks of a view (``bmq.view.source``, ``bmq.view.filter``; see
bmq.metadata.views): a source that exists and is a topic with a log, a filter that parses
(INVALID_CONFIG saying where it does not), the source's partition count, no lane's name, and
no indexed fields (a view has no log of its own for the index builder to read)."""

from __future__ import annotations

from collections.abc import Mapping

from bmq.field_index.fields import INDEX_FIELDS
from bmq.metadata.topics import INTERNAL_TOPICS, TopicRegistry
from bmq.metadata.views import VIEW_FILTER, VIEW_SOURCE, is_view, lane_view
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.readpath.filters import FilterError, compile_filter


def check_filter(expression: str) -> None:
    try:
        compile_filter(expression)
    except FilterError as error:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Invalid {VIEW_FILTER} {expression!r}: {error}") from None


def check_not_indexed(name: str, configs: Mapping[str, str | None]) -> None:
    """A view's records are its source's, indexed (and queried) there: ``bmq.index.fields``
    on the view would index nothing, so it is refused rather than accepted in vain."""
    if is_view(configs) and (configs.get(INDEX_FIELDS) or "").strip():
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"{INDEX_FIELDS}: {name} is a view of {configs.get(VIEW_SOURCE)}, "
                         f"which has no log of its own to index; index its source topic "
                         f"{configs.get(VIEW_SOURCE)} instead")


def check_view(topics: TopicRegistry, name: str, num_partitions: int,
               configs: Mapping[str, str | None]) -> int:
    """Check a view about to be created; returns its partition count (its source's)."""
    lane = lane_view(topics, name)
    if lane is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"{name} is a lane of {lane.configs[VIEW_SOURCE]}: lanes exist on "
                         f"first use and are not created")
    source_name = configs.get(VIEW_SOURCE)
    expression = configs.get(VIEW_FILTER)
    if not source_name or expression is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"A view needs both {VIEW_SOURCE} and {VIEW_FILTER}")
    source = topics.get(source_name)
    if source is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"{VIEW_SOURCE}: topic {source_name} does not exist")
    if is_view(source.configs) or source_name in INTERNAL_TOPICS:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"{VIEW_SOURCE}: {source_name} is a view or an internal topic; a "
                         f"view's source is a topic with a log")
    check_filter(expression)
    check_not_indexed(name, configs)
    if num_partitions not in (-1, source.partitions):
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         f"A view has its source's {source.partitions} partitions")
    return source.partitions


def check_view_change(name: str, old: Mapping[str, str], new: Mapping[str, str]) -> None:
    """AlterConfigs: a topic becomes a view, or a view another source's, only by creation (a
    view has no log; a topic's log is not dropped by a config). Its filter may change, its
    indexed fields may not be set."""
    if old.get(VIEW_SOURCE) != new.get(VIEW_SOURCE):
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"{VIEW_SOURCE} is set when a view is created and never changed")
    check_not_indexed(name, new)
