"""Settings as Kafka knows them: its names, aliases and coarser units for each setting, and
how DescribeConfigs shows a setting (its name, its value, whether it was set)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bmq.config.settings import Config

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
    "queued_max_request_bytes": "queued.max.request.bytes",
    # BMQ's own, named as Kafka names its broker settings (issue #36).
    "legacy_clients_enable": "bmq.legacy.clients.enable",
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
# Security settings a listener may override (listener.name.NAME.<setting>), and those whose
# values DescribeConfigs must not show (a private key, its password).
LISTENER_SETTINGS = ("ssl_keystore_type", "ssl_keystore_location", "ssl_keystore_key",
                     "ssl_keystore_certificate_chain", "ssl_key_password", "ssl_truststore_type",
                     "ssl_truststore_location", "ssl_truststore_certificates", "ssl_client_auth",
                     "ssl_principal_mapping_rules", "sasl_enabled_mechanisms", "sasl_jaas_config",
                     "ssl_endpoint_identification_algorithm")
SENSITIVE = ("ssl_keystore_key", "ssl_key_password", "sasl_jaas_config", "listener_overrides")


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


def field_default(field_name: str) -> Any:
    return _DEFAULTS[field_name]


def explicitly_set(config: Config, field_name: str) -> bool:
    """Whether a setting differs from its default: Kafka's STATIC_BROKER_CONFIG source."""
    return bool(getattr(config, field_name) != _DEFAULTS[field_name])


_DEFAULTS: dict[str, Any] = {f.name: getattr(Config(), f.name) for f in dataclasses.fields(Config)}
