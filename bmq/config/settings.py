"""The settings dataclass of every role, and the errors a setting's value can raise."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bmq import listeners
from bmq.listeners import Listener, ListenerError, inter_broker_listener, parse_listeners

LOG_FORMATS = ("text", "json")
# Kafka's compression.type values: keep the producer's codec, or recompress to one.
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
SSL_CLIENT_AUTH = ("none", "requested", "required")


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
    # `bmq serve` runs the web console (`bmq console` in a child process) on this HOST:PORT,
    # bootstrapped to its PLAINTEXT listener; "" (or --no-console) turns it off. See console.md.
    console_listen: str = "127.0.0.1:8080"
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
    # Memory for the requests a process has read and not yet answered; past it, connections
    # stop reading until answers free some (bmq/net/memory.py). -1: no limit (Kafka's default).
    queued_max_request_bytes: int = 512 << 20
    max_inflight_requests_per_connection: int = 64
    # Old Kafka clients (issue #36): serve the API versions Kafka 4 removed (Produce v0-2, Fetch
    # v0-3, ListOffsets v0, OffsetCommit v0-1, ...) and message formats v0/v1, converted to and
    # from record batch v2. false: refuse them as Kafka 4 does (ApiVersions lists Kafka 4's
    # versions; Produce v0-2 is answered UNSUPPORTED_VERSION, the others disconnect).
    legacy_clients_enable: bool = True
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
