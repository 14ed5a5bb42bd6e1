"""Topic-level configs: every config Kafka 4 defines, with its type, default, validation and
documentation, and the LogConfig a topic's configs make.

Configs that mean something here are enforced (retention, segments, sizes, timestamps,
compression, the compaction policy and its log cleaner); the rest are accepted, stored
and described with Kafka's defaults, so tools written for Kafka can set them (their
documentation says that BMQ stores them only). A name Kafka does not define is INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from bmq.broker.view_config import check_filter
from bmq.config import COMPRESSION_TYPES, Config, explicitly_set, field_default, kafka_name
from bmq.coordinators.share.dlq import DEAD_LETTER_ENABLE
from bmq.field_index.fields import FieldSpecError, parse_fields
from bmq.metadata.mirrors import LEGAL_SOURCE_NAME
from bmq.metadata.topics import LEGAL_TOPIC as _LEGAL_NAME
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import LogConfig


class ConfigType(IntEnum):
    """DescribeConfigs v3+ config_type values."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(IntEnum):
    """DescribeConfigs config_source values."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4
    GROUP = 32


Validator = Callable[[str], bool]
STORED_ONLY = " BMQ stores this config and shows it; it has no effect here"


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    # The default as Kafka 4 ships it, or None when a BMQ setting gives it (broker_field).
    kafka_default: str | None
    validate: Validator
    doc: str
    # The broker property Kafka takes the default from (DescribeConfigs' synonym), if any.
    server_default: str | None = None
    # The BMQ setting that gives the default, for configs BMQ enforces with a broker default.
    broker_field: str | None = None
    # Whether the config changes what BMQ does (else it is stored and described only).
    enforced: bool = True

    def default(self, broker: Config) -> str:
        if self.broker_field is not None:
            value = getattr(broker, self.broker_field)
            return str(value)
        assert self.kafka_default is not None
        return self.kafka_default


def _is_int(low: int, high: int = 2**63 - 1) -> Validator:
    def check(value: str) -> bool:
        try:
            return low <= int(value) <= high
        except ValueError:
            return False

    return check


def _is_ratio(value: str) -> bool:
    try:
        return 0.0 <= float(value) <= 1.0
    except ValueError:
        return False


def _is_bool(value: str) -> bool:
    return value.lower() in ("true", "false")


def _one_of(*choices: str) -> Validator:
    return lambda value: value in choices


def _list_of(*choices: str) -> Validator:
    return lambda value: bool(value) and all(item.strip() in choices
                                             for item in value.split(","))


_THROTTLED = re.compile(r"^(\*|\s*|\d+:\d+(\s*,\s*\d+:\d+)*)$")
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)*(-IV\d+)?$")
INT32_MAX = 2**31 - 1
LONG_MAX = str(2**63 - 1)


def _broker(name: str, kind: ConfigType, broker_field: str, validate: Validator,
            doc: str) -> TopicConfigDef:
    """A config BMQ enforces, whose default is a BMQ broker setting (Kafka's log.* property)."""
    return TopicConfigDef(name, kind, None, validate, doc, kafka_name(broker_field), broker_field)


def _kafka(name: str, kind: ConfigType, default: str, validate: Validator, doc: str,
           server_default: str | None = None, enforced: bool = False) -> TopicConfigDef:
    """A config with Kafka's fixed default (no BMQ broker setting)."""
    return TopicConfigDef(name, kind, default, validate, doc, server_default, enforced=enforced)


def _index_fields(spec: str) -> bool:
    """Valid, or INVALID_CONFIG saying which field is wrong and why."""
    try:
        parse_fields(spec)
    except FieldSpecError as error:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Invalid value {spec} for config bmq.index.fields: {error}") from None
    return True


def _parses(expression: str) -> bool:
    try:
        check_filter(expression)
    except KafkaError:
        return False
    return True


_DEFINITIONS = (
    _kafka("cleanup.policy", ConfigType.LIST, "delete", _list_of("delete", "compact"),
           "delete: whole segments past retention.ms or retention.bytes are deleted. compact: "
           "records without a key are refused (INVALID_RECORD), nothing is deleted by age or "
           "size, and the log cleaner keeps only the latest record of each key (tombstones "
           "for delete.retention.ms). Both (compact,delete): the cleaner runs and retention "
           "applies.", "log.cleanup.policy", enforced=True),
    _broker("compression.type", ConfigType.STRING, "compression_type",
            _one_of(*COMPRESSION_TYPES),
            "producer keeps each batch as the producer compressed it; a codec (uncompressed, "
            "gzip, snappy, lz4, zstd) makes the broker recompress every batch sent with another "
            "codec, as Kafka does."),
    _kafka("compression.gzip.level", ConfigType.INT, "-1",
           lambda v: v == "-1" or _is_int(1, 9)(v),
           "The gzip level batches are recompressed at (compression.type=gzip); -1: zlib's "
           "default.", "compression.gzip.level", enforced=True),
    _kafka("compression.lz4.level", ConfigType.INT, "9", _is_int(1, 17),
           "The lz4 level batches are recompressed at (compression.type=lz4); 9 is lz4's fast "
           "mode, others its high-compression mode.", "compression.lz4.level", enforced=True),
    _kafka("compression.zstd.level", ConfigType.INT, "3", _is_int(-131072, 22),
           "The zstd level batches are recompressed at (compression.type=zstd).",
           "compression.zstd.level", enforced=True),
    _kafka("delete.retention.ms", ConfigType.LONG, "86400000", _is_int(0),
           "How long the log cleaner keeps delete tombstones (null values) of compacted topics, "
           "counted from the first cleaning of their segment.",
           "log.cleaner.delete.retention.ms", enforced=True),
    _kafka(DEAD_LETTER_ENABLE, ConfigType.BOOLEAN, "false", _is_bool,
           "KIP-1191: true lets share groups write their dead letters (records rejected or "
           "given up on) to this topic; a group's errors.deadletterqueue.topic.name naming a "
           "topic without it gets none written. BMQ sets it on the dead-letter topics it "
           "creates.", enforced=True),
    _kafka("file.delete.delay.ms", ConfigType.LONG, "60000", _is_int(0),
           "Wait before the files of segments the log cleaner replaced are removed (readers "
           "in other processes may still read them); retention deletes at once.",
           "log.segment.delete.delay.ms", enforced=True),
    _kafka("flush.messages", ConfigType.LONG, LONG_MAX, _is_int(1),
           "Records between forced fsyncs." + STORED_ONLY + ": every group commit is fsynced "
           "before acks=all is answered.", "log.flush.interval.messages"),
    _kafka("flush.ms", ConfigType.LONG, LONG_MAX, _is_int(0),
           "Time between forced fsyncs." + STORED_ONLY + ": every group commit is fsynced "
           "before acks=all is answered.", "log.flush.interval.ms"),
    _kafka("follower.replication.throttled.replicas", ConfigType.LIST, "",
           lambda v: bool(_THROTTLED.match(v)),
           "Replicas whose follower replication is throttled." + STORED_ONLY
           + ": storage replicates."),
    _broker("index.interval.bytes", ConfigType.INT, "log_index_interval_bytes",
            _is_int(0, INT32_MAX), "Bytes between offset index entries."),
    _kafka("leader.replication.throttled.replicas", ConfigType.LIST, "",
           lambda v: bool(_THROTTLED.match(v)),
           "Replicas whose leader-side replication is throttled." + STORED_ONLY
           + ": storage replicates."),
    _kafka("local.retention.bytes", ConfigType.LONG, "-2", _is_int(-2),
           "Tiered storage: bytes kept locally." + STORED_ONLY + ": all segments live on the "
           "shared storage.", "log.local.retention.bytes"),
    _kafka("local.retention.ms", ConfigType.LONG, "-2", _is_int(-2),
           "Tiered storage: time kept locally." + STORED_ONLY + ": all segments live on the "
           "shared storage.", "log.local.retention.ms"),
    _kafka("max.compaction.lag.ms", ConfigType.LONG, LONG_MAX, _is_int(1),
           "Longest time a record stays uncompacted: the cleaner cleans a log whose oldest dirty "
           "segment is older, whatever its dirty ratio.",
           "log.cleaner.max.compaction.lag.ms", enforced=True),
    _broker("max.message.bytes", ConfigType.INT, "message_max_bytes", _is_int(0, INT32_MAX),
            "Largest record batch accepted, in bytes (after the broker's recompression, if "
            "any): larger ones get MESSAGE_TOO_LARGE."),
    _kafka("message.downconversion.enable", ConfigType.BOOLEAN, "true", _is_bool,
           "Deprecated in Kafka 4, where down-conversion no longer exists; a no-op here too.",
           "log.message.downconversion.enable"),
    _kafka("message.format.version", ConfigType.STRING, "3.0-IV1", lambda v: bool(
           _VERSION.match(v)),
           "Deprecated (removed in Kafka 4): BMQ always writes message format v2." + STORED_ONLY
           + ".", "log.message.format.version"),
    _kafka("message.timestamp.after.max.ms", ConfigType.LONG, LONG_MAX, _is_int(0),
           "How far in the future a CreateTime timestamp may be." + STORED_ONLY + ".",
           "log.message.timestamp.after.max.ms"),
    _kafka("message.timestamp.before.max.ms", ConfigType.LONG, LONG_MAX, _is_int(0),
           "How far in the past a CreateTime timestamp may be." + STORED_ONLY + ".",
           "log.message.timestamp.before.max.ms"),
    _kafka("message.timestamp.difference.max.ms", ConfigType.LONG, LONG_MAX, _is_int(0),
           "Deprecated (removed in Kafka 4) for the two above." + STORED_ONLY + ".",
           "log.message.timestamp.difference.max.ms"),
    _broker("message.timestamp.type", ConfigType.STRING, "log_message_timestamp_type",
            _one_of("CreateTime", "LogAppendTime"),
            "CreateTime keeps producers' timestamps; LogAppendTime stamps the broker's time."),
    _kafka("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", _is_ratio,
           "Dirty share of a log (bytes never cleaned) that makes the cleaner compact it.",
           "log.cleaner.min.cleanable.ratio", enforced=True),
    _kafka("min.compaction.lag.ms", ConfigType.LONG, "0", _is_int(0),
           "Shortest time a record stays uncompacted: segments with newer records are not "
           "cleaned yet.", "log.cleaner.min.compaction.lag.ms", enforced=True),
    _kafka("min.insync.replicas", ConfigType.INT, "1", _is_int(1, INT32_MAX),
           "Replicas that must have a write before acks=all is answered. In BMQ acks=all is "
           "answered once the write is durable on the shared storage, which stands for every "
           "replica, so any value is met.", "min.insync.replicas"),
    _kafka("preallocate", ConfigType.BOOLEAN, "false", _is_bool,
           "Preallocate segment files." + STORED_ONLY + ".", "log.preallocate"),
    _kafka("remote.log.copy.disable", ConfigType.BOOLEAN, "false", _is_bool,
           "Tiered storage: stop copying segments to remote storage." + STORED_ONLY + "."),
    _kafka("remote.log.delete.on.disable", ConfigType.BOOLEAN, "false", _is_bool,
           "Tiered storage: delete remote segments when tiering is turned off." + STORED_ONLY
           + "."),
    _kafka("remote.storage.enable", ConfigType.BOOLEAN, "false", _is_bool,
           "Tiered storage." + STORED_ONLY + ": every segment is on the shared storage "
           "already."),
    _broker("retention.bytes", ConfigType.LONG, "log_retention_bytes", _is_int(-1),
            "Size per partition above which the oldest whole segments are deleted; -1: no "
            "limit."),
    _broker("retention.ms", ConfigType.LONG, "log_retention_ms", _is_int(-1),
            "Age after which whole segments are deleted; -1 keeps everything."),
    _broker("segment.bytes", ConfigType.INT, "log_segment_bytes", _is_int(4096, INT32_MAX),
            "Segment size that makes the log roll to a new segment."),
    _kafka("segment.index.bytes", ConfigType.INT, "10485760", _is_int(4, INT32_MAX),
           "Largest offset index file." + STORED_ONLY + ": BMQ's indexes grow with the "
           "segment.", "log.index.size.max.bytes"),
    _kafka("segment.jitter.ms", ConfigType.LONG, "0", _is_int(0),
           "Random jitter subtracted from segment.ms." + STORED_ONLY + ".",
           "log.roll.jitter.ms"),
    _broker("segment.ms", ConfigType.LONG, "log_roll_ms", _is_int(1),
            "Segment age that makes the log roll to a new segment."),
    _kafka("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", _is_bool,
           "Let an out-of-sync replica lead." + STORED_ONLY + ": a partition's new owner "
           "always opens the whole durable log.", "unclean.leader.election.enable"),
    # BMQ's views and lanes (bmq.metadata.views); a view's two are checked at creation
    # (bmq.broker.view_config), with the filter's error and where it is.
    _kafka("bmq.view.source", ConfigType.STRING, "", lambda v: bool(_LEGAL_NAME.fullmatch(v)),
           "BMQ: this topic is a read-only view of that topic: its partitions and offsets, "
           "only the records bmq.view.filter matches. Set at creation only.", enforced=True),
    _kafka("bmq.view.filter", ConfigType.STRING, "", _parses,
           "BMQ: the view's filter, RocketMQ's SQL-92 subset over record headers (TAG is the "
           "header bmq.tag), e.g. TAG IN ('paid','refunded') AND amount > 100.", enforced=True),
    _kafka("bmq.lanes.enable", ConfigType.BOOLEAN, "false", _is_bool,
           "BMQ: lanes. Consumers of this topic never see records with a bmq.lane header; "
           "TOPIC.lane.LANE is a view of one lane's records, made on first use.",
           enforced=True),
    # BMQ's field indexes (bmq.field_index): built in the background, read by Index Query.
    _kafka("bmq.index.fields", ConfigType.STRING, "", _index_fields,
           "BMQ: fields to index for Index Query, comma-separated: key, header:NAME or a JSON "
           "dot path into the value (order.id; value:key for a JSON field named key).",
           enforced=True),
    # BMQ's mirrored topics (bmq.metadata.mirrors): set by `bmq mirror`, deleted by promote.
    _kafka("bmq.mirror.source", ConfigType.STRING, "",
           lambda v: bool(LEGAL_SOURCE_NAME.fullmatch(v)),
           "BMQ: this topic is a read-only mirror of the same topic on that source cluster "
           "(`bmq mirror`): produce is refused with INVALID_REQUEST. `bmq mirror promote` "
           "deletes it, which makes the topic writable.", enforced=True),
    _kafka("bmq.delay.enable", ConfigType.BOOLEAN, "false", _is_bool,
           "BMQ: scheduled delivery. A record with a header bmq.deliver.at (ms since the epoch) "
           "or bmq.delay.ms is held in the partition's timer log and appended at that time.",
           enforced=True),
)
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFINITIONS}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values of configs set on a topic; None values mean 'unset'."""
    result: dict[str, str] = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            continue
        if not definition.validate(value):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for config {name}")
        result[name] = value
    return result


@dataclass(frozen=True, slots=True)
class Described:
    """One topic config as DescribeConfigs shows it: value, source and synonyms (Kafka's order:
    the one in force first)."""

    value: str
    source: ConfigSource
    synonyms: list[tuple[str, str, ConfigSource]]


def describe_topic_config(broker: Config, definition: TopicConfigDef,
                          overrides: Mapping[str, str]) -> Described:
    """As Kafka: the topic's override, else the broker's static setting, else the default."""
    synonyms = []
    if definition.name in overrides:
        synonyms.append((definition.name, overrides[definition.name], ConfigSource.TOPIC_CONFIG))
    server = definition.server_default
    if server is not None:
        if definition.broker_field is not None:
            if explicitly_set(broker, definition.broker_field):
                synonyms.append((server, definition.default(broker),
                                 ConfigSource.STATIC_BROKER_CONFIG))
            default = str(field_default(definition.broker_field))
        else:
            assert definition.kafka_default is not None
            default = definition.kafka_default
        synonyms.append((server, default, ConfigSource.DEFAULT_CONFIG))
    if definition.name in overrides:
        return Described(overrides[definition.name], ConfigSource.TOPIC_CONFIG, synonyms)
    source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
    return Described(definition.default(broker), source, synonyms)


def effective_topic_configs(broker: Config,
                            overrides: Mapping[str, str]) -> dict[str, tuple[str, ConfigSource]]:
    """Every topic config with its value and where the value comes from."""
    result = {}
    for name, definition in TOPIC_CONFIGS.items():
        described = describe_topic_config(broker, definition, overrides)
        result[name] = (described.value, described.source)
    return result


def log_config(broker: Config, overrides: Mapping[str, str]) -> LogConfig:
    def value(name: str) -> str:
        return overrides.get(name) or TOPIC_CONFIGS[name].default(broker)

    policies = {p.strip() for p in value("cleanup.policy").split(",")}
    deletes = "delete" in policies  # compact alone: Kafka deletes nothing by age or size
    compression = value("compression.type")
    level = overrides.get(f"compression.{compression}.level")
    return LogConfig(
        segment_bytes=int(value("segment.bytes")),
        segment_ms=int(value("segment.ms")),
        retention_ms=int(value("retention.ms")) if deletes else -1,
        retention_bytes=int(value("retention.bytes")) if deletes else -1,
        index_interval_bytes=int(value("index.interval.bytes")),
        max_message_bytes=int(value("max.message.bytes")),
        message_timestamp_type=value("message.timestamp.type"),
        compression_type=compression,
        compression_level=None if level is None else int(level),
        compact="compact" in policies,
        delete_retention_ms=int(value("delete.retention.ms")),
        min_cleanable_dirty_ratio=float(value("min.cleanable.dirty.ratio")),
        min_compaction_lag_ms=int(value("min.compaction.lag.ms")),
        max_compaction_lag_ms=int(value("max.compaction.lag.ms")),
        file_delete_delay_ms=int(value("file.delete.delay.ms")),
        delay_enable=value("bmq.delay.enable").lower() == "true",
    )
