"""Settings for every role, with one precedence order: defaults < TOML file < BMQ_* env < flags.

TOML keys are the field names below or Kafka's name for the setting (``KAFKA_NAMES``):
``"log.dirs"`` and ``data_dir`` are the same key, and so are ``"log.retention.ms"`` and
``log_retention_ms``.
The environment variable for a key is ``BMQ_`` plus its upper-cased name with dots as
underscores, e.g. ``BMQ_DATA_DIR`` or ``BMQ_LOG_DIRS``, ``BMQ_LOG_RETENTION_MS``.
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
# Kafka's compression.type values: keep the producer's codec, or recompress to one.
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


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
    compression_type: str = "producer"
    log_retention_check_interval_ms: int = 300_000
    log_checkpoint_interval_ms: int = 10_000
    # How often the log cleaner looks for compacted partitions to clean (on a thread of its own).
    log_cleaner_backoff_ms: int = 15_000
    # Memory of the log cleaner's offset map (key hash -> latest offset, 24 bytes a key).
    log_cleaner_dedupe_buffer_size: int = 128 << 20
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
    # KIP-848 consumer groups (group.protocol=consumer; docs/groups.md): a member is removed
    # when no heartbeat came for this long (a group's consumer.session.timeout.ms overrides).
    group_consumer_session_timeout_ms: int = 45_000
    # How often members heartbeat while their group is stable (consumer.heartbeat.interval.ms
    # overrides); while it reconciles they are asked to heartbeat every 100 ms at most.
    group_consumer_heartbeat_interval_ms: int = 5_000
    # The server-side assignors members may name (uniform, range); the first is the default.
    group_consumer_assignors: str = "uniform,range"
    # Members per KIP-848 group (GROUP_MAX_SIZE_REACHED beyond).
    group_consumer_max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # Transactions (README "Transactions"): partitions of __transaction_state, which keeps
    # each transactional id's state.
    transaction_state_log_num_partitions: int = 50
    # Segment size of __transaction_state.
    transaction_state_log_segment_bytes: int = 104_857_600
    # Share groups (docs/share-groups.md): partitions of __share_group_state, which keeps
    # each share-partition's state.
    share_coordinator_state_topic_num_partitions: int = 50
    # Segment size of __share_group_state; also how much is written between snapshots.
    share_coordinator_state_topic_segment_bytes: int = 104_857_600
    # The default of a share group's share.record.lock.duration.ms.
    group_share_record_lock_duration_ms: int = 30_000
    # The default of a share group's share.delivery.count.limit.
    group_share_delivery_count_limit: int = 5
    # KIP-1191: a share group's dead-letter topic must start with this (empty: any name), so a
    # rejected record is never written to a business topic.
    errors_deadletterqueue_topic_name_prefix: str = "dlq."
    # The longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT).
    transaction_max_timeout_ms: int = 900_000
    # How often the coordinator aborts transactions open longer than their timeout.
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    # A transactional id with no transaction for this long is forgotten (its next
    # InitProducerId starts afresh, with a new producer id).
    transactional_id_expiration_ms: int = 604_800_000
    # How often the coordinator looks for such ids.
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
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
    # Security of SSL / SASL_* listeners (bmq/security/), Kafka's names; each may be set for one
    # listener as listener.name.NAME.<setting> (``listener_overrides``).
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str = ""          # PEM file: private key and certificate chain
    ssl_keystore_key: str = ""               # or the PEM key inline ...
    ssl_keystore_certificate_chain: str = ""  # ... with its PEM chain inline
    ssl_key_password: str = ""               # if the PEM key is encrypted
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""        # PEM CA certificates to check client certificates
    ssl_truststore_certificates: str = ""    # or those CA certificates inline
    ssl_client_auth: str = "none"            # none, requested or required
    # A client certificate's subject -> its principal's name (bmq/security/principal_mapping.py).
    ssl_principal_mapping_rules: str = "DEFAULT"
    sasl_enabled_mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512"
    # OAUTHBEARER (bmq/security/oauthbearer.py): the JSON Web Key Set whose keys verify the
    # tokens' signatures, a file:// or http(s):// URL, read at start ...
    sasl_oauthbearer_jwks_endpoint_url: str = ""
    # ... and again when this old, or when a token names a key id it does not hold.
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = 3_600_000
    # Audiences a token may be for (comma-separated; one of the token's aud must be listed);
    # empty: aud is not checked.
    sasl_oauthbearer_expected_audience: str = ""
    # The iss a token must have; empty: iss is not checked.
    sasl_oauthbearer_expected_issuer: str = ""
    # The claim whose value is the principal's name (User:<value>).
    sasl_oauthbearer_sub_claim_name: str = "sub"
    # Leeway for exp, nbf and iat between the token issuer's clock and ours.
    sasl_oauthbearer_clock_skew_seconds: int = 30
    # TESTS ONLY: accept unsigned OAUTHBEARER tokens (alg none, Kafka's unsecured validator),
    # with which any client can claim to be anyone; refused together with a JWKS URL.
    sasl_oauthbearer_unsecured_validator_enable: bool = False
    # Re-authentication (KIP-368): a SASL session lasts at most this long (and an OAUTHBEARER one
    # no longer than its token), then the connection must authenticate again or is closed at its
    # next request; 0: only OAUTHBEARER sessions end (with their token), as in Kafka.
    connections_max_reauth_ms: int = 0
    # Links to other nodes' inter-broker listener (bmq/security/link.py) log in with this SASL
    # mechanism (empty: the listener's first enabled one) ...
    sasl_mechanism_inter_broker_protocol: str = ""
    # ... as the user and password of this JAAS line: ...LoginModule required username="u"
    # password="p";
    sasl_jaas_config: str = ""
    # "https": links check the other node's certificate names its host; empty: they do not.
    ssl_endpoint_identification_algorithm: str = "https"
    # ACLs (bmq/security/authorizer.py): any non-empty value turns the authorizer on (Kafka names
    # its class here; BMQ has one authorizer, with Kafka's semantics).
    authorizer_class_name: str = ""
    super_users: str = ""                    # principals allowed everything: User:a;User:b
    # With the authorizer on, a resource no ACL covers is open to everyone only if true.
    allow_everyone_if_no_acl_found: bool = False
    # Client quotas (bmq/security/quotas.py): usage is measured over this many samples ...
    quota_window_num: int = 11
    # ... of this many seconds each.
    quota_window_size_seconds: int = 1
    # listener.name.NAME.<setting> keys: listener (upper case) -> field -> value.
    listener_overrides: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)

    def listener_setting(self, listener: str, field_name: str) -> str:
        """A security setting for one listener: its listener.name.NAME. override, else the
        broker-wide value."""
        override = self.listener_overrides.get(listener.upper(), {})
        return override.get(field_name, str(getattr(self, field_name)))

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


# Kafka's name for each setting Kafka has: DescribeConfigs shows these, so Kafka UIs and scripts
# find them, and they are accepted as keys beside BMQ's own names. Settings left out are BMQ's
# alone and are shown under their own (field) name.
KAFKA_NAMES: dict[str, str] = {
    "data_dir": "log.dirs",
    "listeners": "listeners",
    "advertised_listeners": "advertised.listeners",
    "listener_security_protocol_map": "listener.security.protocol.map",
    "inter_broker_listener_name": "inter.broker.listener.name",
    "node_id": "node.id",
    "auto_create_topics_enable": "auto.create.topics.enable",
    "num_partitions": "num.partitions",
    "default_replication_factor": "default.replication.factor",
    "delete_topic_enable": "delete.topic.enable",
    "log_segment_bytes": "log.segment.bytes",
    "log_roll_ms": "log.roll.ms",
    "log_retention_ms": "log.retention.ms",
    "log_retention_bytes": "log.retention.bytes",
    "log_index_interval_bytes": "log.index.interval.bytes",
    "log_message_timestamp_type": "log.message.timestamp.type",
    "message_max_bytes": "message.max.bytes",
    "compression_type": "compression.type",
    "log_retention_check_interval_ms": "log.retention.check.interval.ms",
    # Kafka's recovery-point checkpoint, which BMQ's partition checkpoint also is.
    "log_checkpoint_interval_ms": "log.flush.offset.checkpoint.interval.ms",
    "log_cleaner_backoff_ms": "log.cleaner.backoff.ms",
    "log_cleaner_dedupe_buffer_size": "log.cleaner.dedupe.buffer.size",
    "socket_request_max_bytes": "socket.request.max.bytes",
    "group_initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
    "group_min_session_timeout_ms": "group.min.session.timeout.ms",
    "group_max_session_timeout_ms": "group.max.session.timeout.ms",
    "group_max_size": "group.max.size",
    "group_consumer_session_timeout_ms": "group.consumer.session.timeout.ms",
    "group_consumer_heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "group_consumer_assignors": "group.consumer.assignors",
    "group_consumer_max_size": "group.consumer.max.size",
    "offsets_topic_num_partitions": "offsets.topic.num.partitions",
    "offsets_topic_segment_bytes": "offsets.topic.segment.bytes",
    "offsets_retention_minutes": "offsets.retention.minutes",
    "offsets_retention_check_interval_ms": "offsets.retention.check.interval.ms",
    "offset_metadata_max_bytes": "offset.metadata.max.bytes",
    "transaction_state_log_num_partitions": "transaction.state.log.num.partitions",
    "transaction_state_log_segment_bytes": "transaction.state.log.segment.bytes",
    "share_coordinator_state_topic_num_partitions":
        "share.coordinator.state.topic.num.partitions",
    "share_coordinator_state_topic_segment_bytes": "share.coordinator.state.topic.segment.bytes",
    "group_share_record_lock_duration_ms": "group.share.record.lock.duration.ms",
    "group_share_delivery_count_limit": "group.share.delivery.count.limit",
    "errors_deadletterqueue_topic_name_prefix": "errors.deadletterqueue.topic.name.prefix",
    "transaction_max_timeout_ms": "transaction.max.timeout.ms",
    "transaction_abort_timed_out_transaction_cleanup_interval_ms":
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transactional_id_expiration_ms": "transactional.id.expiration.ms",
    "transaction_remove_expired_transaction_cleanup_interval_ms":
        "transaction.remove.expired.transaction.cleanup.interval.ms",
    "zookeeper": "zookeeper.connect",
    "zookeeper_session_timeout_ms": "zookeeper.session.timeout.ms",
    **{name: name.replace("_", ".") for name in (
        "ssl_keystore_type", "ssl_keystore_location", "ssl_keystore_key",
        "ssl_keystore_certificate_chain", "ssl_key_password", "ssl_truststore_type",
        "ssl_truststore_location", "ssl_truststore_certificates", "ssl_client_auth",
        "ssl_principal_mapping_rules", "sasl_enabled_mechanisms",
        "sasl_oauthbearer_jwks_endpoint_url",
        "sasl_oauthbearer_jwks_endpoint_refresh_ms", "sasl_oauthbearer_expected_audience",
        "sasl_oauthbearer_expected_issuer", "sasl_oauthbearer_sub_claim_name",
        "sasl_oauthbearer_clock_skew_seconds", "connections_max_reauth_ms",
        "sasl_mechanism_inter_broker_protocol", "sasl_jaas_config",
        "ssl_endpoint_identification_algorithm", "authorizer_class_name", "super_users",
        "allow_everyone_if_no_acl_found", "quota_window_num", "quota_window_size_seconds")},
}
# Kafka's other names for a setting: accepted as keys, and broker.id is also described (Kafka 4
# lists both broker.id and node.id).
KAFKA_ALIASES: dict[str, str] = {"broker.id": "node_id", "log.dir": "data_dir"}
DESCRIBED_ALIASES = ("broker.id",)
# Kafka's coarser units for a setting (server.properties ships log.retention.hours=168): accepted
# and converted; as in Kafka, the finer name wins when a source sets both.
KAFKA_SCALED: dict[str, tuple[str, int]] = {
    "log.retention.hours": ("log_retention_ms", 3_600_000),
    "log.retention.minutes": ("log_retention_ms", 60_000),
    "log.roll.hours": ("log_roll_ms", 3_600_000),
}
_SCALED_KEYS = {name.replace(".", "_"): (name, field_name, multiplier)
                for name, (field_name, multiplier) in KAFKA_SCALED.items()}
# Security settings a listener may override (listener.name.NAME.<setting>), and those whose
# values DescribeConfigs must not show (a private key, its password).
LISTENER_SETTINGS = ("ssl_keystore_type", "ssl_keystore_location", "ssl_keystore_key",
                     "ssl_keystore_certificate_chain", "ssl_key_password", "ssl_truststore_type",
                     "ssl_truststore_location", "ssl_truststore_certificates", "ssl_client_auth",
                     "ssl_principal_mapping_rules", "sasl_enabled_mechanisms", "sasl_jaas_config",
                     "ssl_endpoint_identification_algorithm")
SENSITIVE = ("ssl_keystore_key", "ssl_key_password", "sasl_jaas_config", "listener_overrides")
SSL_CLIENT_AUTH = ("none", "requested", "required")
_LISTENER_PREFIX = "listener_name_"


def _listener_override(normal: str) -> tuple[str, str] | None:
    """``listener_name_<listener>_<setting>`` (normalised) -> (LISTENER, field), else None;
    listener names may hold underscores, so the setting is matched from the end."""
    if not normal.startswith(_LISTENER_PREFIX):
        return None
    rest = normal[len(_LISTENER_PREFIX):]
    for field_name in LISTENER_SETTINGS:
        listener = rest.removesuffix("_" + field_name)
        if listener != rest and listener:
            return listener.upper(), field_name
    return None


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML's dotted keys written bare (``listener.name.ssl.ssl.client.auth = ...``) are nested
    tables: back to one dotted key each, as Kafka writes them."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _normalise(key: str) -> str:
    return key.replace(".", "_").replace("-", "_").lower()


def _keys() -> dict[str, str]:
    """Every accepted key (normalised) -> the field it sets (scaled names excluded)."""
    # listener_overrides is set through its listener.name.NAME.<setting> keys only.
    keys = {f.name: f.name for f in dataclasses.fields(Config) if f.name != "listener_overrides"}
    for field_name, kafka in KAFKA_NAMES.items():
        keys[_normalise(kafka)] = field_name
    for alias, field_name in KAFKA_ALIASES.items():
        keys[_normalise(alias)] = field_name
    return keys


def kafka_name(field_name: str) -> str:
    """The name DescribeConfigs shows for a setting: Kafka's, else BMQ's own."""
    return KAFKA_NAMES.get(field_name, field_name)


def accepted_names(field_name: str) -> list[str]:
    """Every key that sets a field: its own name first, then Kafka's names."""
    names = [field_name]
    if field_name in KAFKA_NAMES:
        names.append(KAFKA_NAMES[field_name])
    names += [alias for alias, target in KAFKA_ALIASES.items() if target == field_name]
    names += [name for name, (target, _) in KAFKA_SCALED.items() if target == field_name]
    return names


def env_name(key: str) -> str:
    return "BMQ_" + _normalise(key).upper()


def described_value(config: Config, field_name: str) -> str:
    """A setting's value as Kafka writes it: listeners (and their advertised addresses) as the
    NAME://HOST:PORT list in force, whether set so or through listen/advertise."""
    if field_name == "listeners":
        return ",".join(f"{lst.name}://{lst.host}:{lst.port}" for lst in config.listener_list)
    if field_name == "advertised_listeners":
        return ",".join(f"{lst.name}://{lst.advertised_host}:{lst.advertised_port}"
                        for lst in config.listener_list)
    value = getattr(config, field_name)
    if field_name in SENSITIVE:   # never a private key or password; say only that it is set
        return "(set, hidden)" if value else ""
    return str(value).lower() if isinstance(value, bool) else str(value)


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
        text = str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name!r}: cannot use {value!r} as {kind.__name__}") from None
    if name == "data_dir" and "," in text:
        raise ConfigError(f"setting 'data_dir' (log.dirs): BMQ keeps one data directory, "
                          f"got {text!r}")
    return text


def _read_source(items: Mapping[str, Any], origin: str, keys: Mapping[str, str],
                 hints: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    """The fields one source (the TOML file, the environment) sets; two names of one setting in
    one source are refused rather than one silently winning."""
    values: dict[str, Any] = {}
    seen: dict[str, str] = {}
    scaled: dict[str, tuple[int, str, Any]] = {}
    for key, value in items.items():
        normal = _normalise(key.removeprefix("BMQ_"))  # environment variables carry BMQ_
        scale = _SCALED_KEYS.get(normal)
        if scale is not None:
            kafka, field_name, multiplier = scale
            # Kafka's precedence: hours < minutes; the exact field below beats both.
            if field_name not in scaled or multiplier < scaled[field_name][0]:
                scaled[field_name] = (multiplier, kafka, value)
            continue
        override = _listener_override(normal)
        if override is not None:
            listener, field_name = override
            values.setdefault("listener_overrides", {}).setdefault(listener, {})[field_name] = \
                _coerce(field_name, str, value)
            continue
        target = keys.get(normal)
        if target is None:
            if strict:
                raise ConfigError(f"unknown setting {key!r} in {origin}")
            continue
        field_name = target
        if field_name in seen:
            raise ConfigError(f"setting {field_name!r} is set twice in {origin}: as "
                              f"{seen[field_name]!r} and as {key!r}")
        seen[field_name] = key
        values[field_name] = _coerce(field_name, hints[field_name], value)
    for field_name, (multiplier, kafka, value) in scaled.items():
        if field_name not in values:
            values[field_name] = _coerce(kafka, int, value) * multiplier
    return values


def load_config(
    config_file: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the config from the TOML file, then BMQ_* variables, then explicit overrides."""
    hints = get_type_hints(Config)
    keys = _keys()
    values: dict[str, Any] = {}
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("BMQ_CONFIG")
    if config_file:
        try:
            with open(config_file, "rb") as fh:
                table = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from exc
        values.update(_read_source(_flatten(table), config_file, keys, hints, strict=True))
    names = [*keys, *_SCALED_KEYS]
    env = {env_name(name): environ[env_name(name)] for name in names if env_name(name) in environ}
    env.update({name: value for name, value in environ.items()
                if name.startswith("BMQ_LISTENER_NAME_")})
    from_env = _read_source(env, "the environment", keys, hints, strict=False)
    for listener, settings in from_env.pop("listener_overrides", {}).items():
        values.setdefault("listener_overrides", {}).setdefault(listener, {}).update(settings)
    values.update(from_env)
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
    if config.compression_type not in COMPRESSION_TYPES:
        raise ConfigError(f"setting 'compression_type': expected one of "
                          f"{', '.join(COMPRESSION_TYPES)}, got {config.compression_type!r}")
    if config.default_replication_factor < 1:
        raise ConfigError("setting 'default_replication_factor': must be 1 or more, got "
                          f"{config.default_replication_factor}")
    _check_security(config)
    try:
        config.listener_list  # noqa: B018 (parsed now, so a bad listener stops the start)
    except ListenerError as error:
        raise ConfigError(str(error)) from None
    return config


def _check_security(config: Config) -> None:
    for field_name in ("connections_max_reauth_ms", "sasl_oauthbearer_clock_skew_seconds"):
        if getattr(config, field_name) < 0:
            raise ConfigError(f"setting {kafka_name(field_name)!r}: must be 0 or more")
    if config.sasl_oauthbearer_jwks_endpoint_refresh_ms <= 0:
        raise ConfigError("setting 'sasl.oauthbearer.jwks.endpoint.refresh.ms': must be more "
                          "than 0")
    for listener in ["", *config.listener_overrides]:
        where = f" (listener {listener})" if listener else ""
        for kind in ("ssl_keystore_type", "ssl_truststore_type"):
            if config.listener_setting(listener, kind).upper() != "PEM":
                raise ConfigError(f"setting {kafka_name(kind)!r}{where}: only PEM is supported")
        if config.listener_setting(listener, "ssl_client_auth").lower() not in SSL_CLIENT_AUTH:
            raise ConfigError(f"setting 'ssl.client.auth'{where}: expected one of "
                              f"{', '.join(SSL_CLIENT_AUTH)}")


def field_default(field_name: str) -> Any:
    return _DEFAULTS[field_name]


def explicitly_set(config: Config, field_name: str) -> bool:
    """Whether a setting differs from its default: Kafka's STATIC_BROKER_CONFIG source."""
    return bool(getattr(config, field_name) != _DEFAULTS[field_name])


_DEFAULTS: dict[str, Any] = {f.name: getattr(Config(), f.name) for f in dataclasses.fields(Config)}
