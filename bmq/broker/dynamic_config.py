"""Which broker configs may change at run time (Kafka's "Dynamic Update Mode" of each broker
config: cluster-wide, or per-broker only), their types, and the checks Kafka makes on a change.

BMQ accepts, stores and describes them as Kafka does (DescribeConfigs sources
DYNAMIC_BROKER_CONFIG and DYNAMIC_DEFAULT_BROKER_CONFIG), so Kafka's tools and UIs can set them;
none changes what a running BMQ broker does yet (its settings are read at start), which each
one's documentation says. A config Kafka cannot change dynamically is refused with
INVALID_REQUEST, as Kafka refuses it.
"""

from __future__ import annotations

from bmq.broker.topic_config import ConfigType
from bmq.metadata.broker_configs import CLUSTER_DEFAULT
from bmq.protocol.errors import ErrorCode, KafkaError

CLUSTER_WIDE, PER_BROKER = "cluster-wide", "per-broker"
_I, _L, _D, _B, _S, _LIST = (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE,
                             ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST)

# name -> (update mode, type)
DYNAMIC_CONFIGS: dict[str, tuple[str, ConfigType]] = {
    **{name: (CLUSTER_WIDE, kind) for name, kind in (
        ("background.threads", _I), ("compression.type", _S),
        ("log.cleaner.backoff.ms", _L), ("log.cleaner.dedupe.buffer.size", _L),
        ("log.cleaner.delete.retention.ms", _L), ("log.cleaner.io.buffer.load.factor", _D),
        ("log.cleaner.io.buffer.size", _I), ("log.cleaner.io.max.bytes.per.second", _D),
        ("log.cleaner.max.compaction.lag.ms", _L), ("log.cleaner.min.cleanable.ratio", _D),
        ("log.cleaner.min.compaction.lag.ms", _L), ("log.cleaner.threads", _I),
        ("log.cleanup.policy", _LIST), ("log.flush.interval.messages", _L),
        ("log.flush.interval.ms", _L), ("log.index.interval.bytes", _I),
        ("log.index.size.max.bytes", _I), ("log.local.retention.bytes", _L),
        ("log.local.retention.ms", _L), ("log.message.timestamp.after.max.ms", _L),
        ("log.message.timestamp.before.max.ms", _L), ("log.message.timestamp.type", _S),
        ("log.preallocate", _B), ("log.retention.bytes", _L), ("log.retention.ms", _L),
        ("log.roll.jitter.ms", _L), ("log.roll.ms", _L), ("log.segment.bytes", _I),
        ("log.segment.delete.delay.ms", _L), ("max.connection.creation.rate", _I),
        ("max.connections", _I), ("max.connections.per.ip", _I),
        ("max.connections.per.ip.overrides", _S), ("message.max.bytes", _I),
        ("metric.reporters", _LIST), ("min.insync.replicas", _I), ("num.io.threads", _I),
        ("num.network.threads", _I), ("num.recovery.threads.per.data.dir", _I),
        ("num.replica.fetchers", _I), ("producer.id.expiration.ms", _I),
        ("transaction.partition.verification.enable", _B),
        ("unclean.leader.election.enable", _B))},
    **{name: (PER_BROKER, kind) for name, kind in (
        ("sasl.kerberos.kinit.cmd", _S), ("sasl.kerberos.min.time.before.relogin", _L),
        ("sasl.kerberos.principal.to.local.rules", _LIST), ("sasl.kerberos.service.name", _S),
        ("sasl.kerberos.ticket.renew.jitter", _D),
        ("sasl.kerberos.ticket.renew.window.factor", _D),
        ("sasl.login.refresh.buffer.seconds", _I), ("sasl.login.refresh.min.period.seconds", _I),
        ("sasl.login.refresh.window.factor", _D), ("sasl.login.refresh.window.jitter", _D))},
}
DOCUMENTATION = ("Kafka may change this broker config at run time; BMQ stores and describes it "
                 "(so Kafka's tools can set it) and does not act on it yet.")


def check_change(resource: str, configs: dict[str, str]) -> None:
    """Kafka's checks on new dynamic values for ``resource`` (a broker id, or "" for the
    cluster-wide default): every name dynamic, per-broker ones only for a broker, values of
    the config's type. Raises KafkaError."""
    static = sorted(name for name in configs if name not in DYNAMIC_CONFIGS)
    if static:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Cannot update these configs dynamically: {', '.join(static)} (BMQ's "
                         f"other broker settings are static: set them in the TOML file, "
                         f"BMQ_* variables or flags and restart)")
    per_broker = sorted(name for name in configs if DYNAMIC_CONFIGS[name][0] == PER_BROKER)
    if resource == CLUSTER_DEFAULT and per_broker:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Cannot update these configs at default cluster level, broker id "
                         f"must be specified: {', '.join(per_broker)}")
    for name, value in configs.items():
        kind = DYNAMIC_CONFIGS[name][1]
        try:
            if kind in (ConfigType.INT, ConfigType.LONG):
                int(value)
            elif kind == ConfigType.DOUBLE:
                float(value)
            elif kind == ConfigType.BOOLEAN and value.lower() not in ("true", "false"):
                raise ValueError(value)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {value} for configuration {name}") from None
