"""Group configs (Kafka 4's GroupConfig, KIP-848/KIP-932, and KIP-1191's dead-letter topic):
set per group with IncrementalAlterConfigs on a GROUP resource, described with DescribeConfigs
(source GROUP_CONFIG when set, else the default), checked as Kafka checks them. BMQ's own
``bmq.share.retry.backoff.ms`` is the share groups' redelivery back-off (issue 17). Consumer and
share group coordinators read a group's values from the store (bmq/metadata/group_configs.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bmq.broker.topic_config import ConfigType
from bmq.config import Config
from bmq.metadata.topics import INTERNAL_TOPICS, check_topic_name
from bmq.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    type: ConfigType
    default: str
    doc: str
    low: int | None = None          # INT bounds
    high: int | None = None
    choices: tuple[str, ...] = ()   # STRING: one of these
    check: Callable[[str], None] | None = None     # STRING: raises ValueError if bad


def _check_dead_letter_topic(value: str) -> None:
    """A dead-letter topic must be a legal topic name, and not an internal topic."""
    if not value:
        return
    try:
        check_topic_name(value)
    except KafkaError:
        raise ValueError(value) from None
    if value in INTERNAL_TOPICS:
        raise ValueError(value)


_INT, _STR, _LIST = ConfigType.INT, ConfigType.STRING, ConfigType.LIST
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": GroupConfigDef(
        _INT, "45000", "A consumer group member is removed when no heartbeat came for this long.",
        low=1),
    "consumer.heartbeat.interval.ms": GroupConfigDef(
        _INT, "5000", "How often a consumer group member heartbeats.", low=1),
    "share.session.timeout.ms": GroupConfigDef(
        _INT, "45000", "A share group member is removed when no heartbeat came for this long.",
        low=1),
    "share.heartbeat.interval.ms": GroupConfigDef(
        _INT, "5000", "How often a share group member heartbeats.", low=1),
    "share.record.lock.duration.ms": GroupConfigDef(
        _INT, "30000", "How long a share consumer holds the records it acquired.",
        low=1000, high=3_600_000),
    "share.auto.offset.reset": GroupConfigDef(
        _STR, "latest", "Where a share group starts on a partition it has not read yet.",
        choices=("latest", "earliest")),
    "share.isolation.level": GroupConfigDef(
        _STR, "read_uncommitted", "Whether a share group reads records of open transactions.",
        choices=("read_uncommitted", "read_committed")),
    "share.delivery.count.limit": GroupConfigDef(
        _INT, "5", "Deliveries of a record before it is archived (or sent to the dead-letter "
        "topic).", low=2, high=10),
    "errors.deadletterqueue.topic.name": GroupConfigDef(
        _STR, "", "KIP-1191: the topic records a share group rejects or gives up on are written "
        "to (empty: none).", check=_check_dead_letter_topic),
    "bmq.share.retry.backoff.ms": GroupConfigDef(
        _LIST, "1000,5000,10000,30000,60000,120000,180000,240000,300000,360000,420000,480000,"
        "540000,600000,1200000,1800000,3600000,7200000",
        "BMQ: the delay before a released or timed-out record is delivered again, by its "
        "delivery count (the last repeats; 0: none, as Kafka)."),
}


def group_config_defaults(config: Config) -> dict[str, str]:
    """Every group config's default: the broker's ``group.share.*`` settings where Kafka has
    one (a group's own value overrides it), else the fixed default above."""
    defaults = {name: d.default for name, d in GROUP_CONFIGS.items()}
    defaults["share.record.lock.duration.ms"] = str(config.group_share_record_lock_duration_ms)
    defaults["share.delivery.count.limit"] = str(config.group_share_delivery_count_limit)
    return defaults


def check_group_configs(configs: dict[str, str]) -> None:
    """Kafka's checks: known names, values of their type and range, each session timeout
    above its heartbeat interval. Raises KafkaError(INVALID_CONFIG)."""
    for name, value in configs.items():
        definition = GROUP_CONFIGS.get(name)
        if definition is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        try:
            _check(definition, value)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {value} for configuration {name}") from None
    for kind in ("consumer", "share"):
        session = int(configs.get(f"{kind}.session.timeout.ms",
                                  GROUP_CONFIGS[f"{kind}.session.timeout.ms"].default))
        heartbeat = int(configs.get(f"{kind}.heartbeat.interval.ms",
                                    GROUP_CONFIGS[f"{kind}.heartbeat.interval.ms"].default))
        if session <= heartbeat:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"{kind}.session.timeout.ms must be greater than "
                             f"{kind}.heartbeat.interval.ms")


def _check(definition: GroupConfigDef, value: str) -> None:
    if definition.type == ConfigType.INT:
        number = int(value)
        if (definition.low is not None and number < definition.low) or (
                definition.high is not None and number > definition.high):
            raise ValueError(value)
    elif definition.type == ConfigType.LIST:
        if any(int(item) < 0 for item in value.split(",")):
            raise ValueError(value)
    elif definition.choices and value not in definition.choices:
        raise ValueError(value)
    elif definition.check is not None:
        definition.check(value)
