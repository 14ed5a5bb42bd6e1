"""Settings for every role, with one precedence order: defaults < TOML file < BMQ_* env < flags.

TOML keys are the field names below; Kafka's dotted property names are accepted too
(``"log.retention.ms"`` and ``log_retention_ms`` are the same key). The environment variable for a
field is ``BMQ_`` plus its upper-cased name, e.g. ``BMQ_DATA_DIR`` or ``BMQ_LOG_RETENTION_MS``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_type_hints

from bmq import listeners
from bmq.listeners import Listener, ListenerError, inter_broker_listener, parse_listeners

LOG_FORMATS = ("text", "json")


class ConfigError(ValueError):
    """A setting that cannot be used, reported to the operator before anything starts."""


@dataclass(slots=True)
class Config:
    """The settings of every role (`bmq serve`, broker, controller, proxy); broker-wide log settings
    are the topics' defaults."""

    data_dir: str = "./bmq-data"
    listen: str = "127.0.0.1:9092"
    advertise: str = ""
    # Several listeners, as Kafka names them (bmq/listeners.py): NAME://HOST:PORT,... and the
    # address each advertises; when set, they replace listen/advertise.
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ""
    inter_broker_listener_name: str = ""
    node_id: int = 0
    log_level: str = "INFO"
    # "text" (one line per record) or "json" (one JSON object per line) on stderr.
    log_format: str = "text"
    # Serve Prometheus metrics at http://<listen host>:<metrics_port>/metrics; 0 = off.
    metrics_port: int = 0
    # Topics
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    # Log defaults (Kafka's log.* names); topics override them with their own configs.
    log_segment_bytes: int = 1 << 30
    log_roll_ms: int = 7 * 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_index_interval_bytes: int = 4096
    log_message_timestamp_type: str = "CreateTime"
    message_max_bytes: int = 1048588
    log_retention_check_interval_ms: int = 300_000
    log_checkpoint_interval_ms: int = 10_000
    # Object stores (S3): the least time between two flushes of one partition. Every flush is a
    # PUT (plus the manifest's), paid per request; batches arriving meanwhile go out together.
    # Adds up to this much to acks=all latency. No effect on file systems (local, HDFS).
    object_flush_interval_ms: int = 20
    # Network
    socket_request_max_bytes: int = 104_857_600
    max_inflight_requests_per_connection: int = 64
    # Producer ids handed out per allocation persisted to storage (so restarts never reuse ids).
    producer_id_block_size: int = 1000
    # Consumer groups (Kafka's group.* and offsets.* names and defaults); see docs/groups.md.
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # Cluster mode (`bmq broker` / `bmq controller`); see docs/cluster.md.
    zookeeper: str = ""                      # HOST:PORT[,HOST:PORT...]
    zookeeper_root: str = "/bmq"             # every znode of the cluster lives under it
    zookeeper_session_timeout_ms: int = 6000
    # Acks stop this long before the session could expire (the ack lease,
    # bmq/broker/membership/lease.py).
    zookeeper_lease_margin_ms: int = 500
    storage: str = ""                        # file:///dir, s3://bucket/prefix, hdfs://nn:port/p
    drain_timeout_ms: int = 30_000           # SIGTERM: longest wait for partitions to move
    # The proxy role: `bmq proxy`, and inside every broker, which answers Fetch through it.
    proxy_cache_bytes: int = 256 << 20       # recent record batches shared by all consumers
    proxy_read_ahead_bytes: int = 4 << 20    # a catch-up read from storage fetches this much

    @property
    def listen_host(self) -> str:
        """Bind address of the inter-broker listener (metrics listen there too)."""
        return self.listener_list[0].host

    @property
    def listener_list(self) -> list[Listener]:
        """The role's listeners, the inter-broker one first."""
        listeners = parse_listeners(self.listeners, self.advertised_listeners,
                                    self.listener_security_protocol_map, self.listen,
                                    self.advertise)
        first = inter_broker_listener(listeners, self.inter_broker_listener_name)
        return [first, *(listener for listener in listeners if listener is not first)]

    @property
    def advertised_endpoints(self) -> tuple[tuple[str, str, int], ...]:
        """(listener name, advertised host, port) of each listener, for the role's BrokerNode."""
        return tuple((lst.name, lst.advertised_host, lst.advertised_port)
                     for lst in self.listener_list)

    @property
    def advertised(self) -> tuple[str, int]:
        """Address other nodes and clients of the inter-broker listener are told to use."""
        first = self.listener_list[0]
        return first.advertised_host, first.advertised_port


def split_host_port(address: str) -> tuple[str, int]:
    try:
        return listeners.split_host_port(address)
    except ListenerError as error:
        raise ConfigError(str(error)) from None


def _normalise(key: str) -> str:
    return key.replace(".", "_").replace("-", "_").lower()


def _coerce(name: str, kind: Any, value: Any) -> Any:
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if kind is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name!r}: cannot use {value!r} as {kind.__name__}") from None


def load_config(
    config_file: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the config from the TOML file, then BMQ_* variables, then explicit overrides."""
    hints = get_type_hints(Config)
    fields = {f.name for f in dataclasses.fields(Config)}
    values: dict[str, Any] = {}
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("BMQ_CONFIG")
    if config_file:
        try:
            with open(config_file, "rb") as fh:
                table = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from exc
        for key, value in table.items():
            name = _normalise(key)
            if name not in fields:
                raise ConfigError(f"unknown setting {key!r} in {config_file}")
            values[name] = _coerce(name, hints[name], value)
    for name in fields:
        env_value = environ.get("BMQ_" + name.upper())
        if env_value is not None:
            values[name] = _coerce(name, hints[name], env_value)
    for key, value in (overrides or {}).items():
        if value is not None:
            name = _normalise(key)
            values[name] = _coerce(name, hints[name], value)
    config = Config(**values)
    split_host_port(config.listen)
    if config.log_format not in LOG_FORMATS:
        raise ConfigError(f"setting 'log_format': expected one of {', '.join(LOG_FORMATS)}, "
                          f"got {config.log_format!r}")
    if not 0 <= config.metrics_port <= 65535:
        raise ConfigError(f"setting 'metrics_port': {config.metrics_port} is not a port "
                          "(0 turns metrics off)")
    if config.advertise:
        split_host_port(config.advertise)
    try:
        config.listener_list  # noqa: B018 (parsed now, so a bad listener stops the start)
    except ListenerError as error:
        raise ConfigError(str(error)) from None
    return config
