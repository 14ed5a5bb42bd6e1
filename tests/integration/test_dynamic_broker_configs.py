"""Dynamic broker configs as Kafka's tools set them (kafka-configs --entity-type brokers, UIs,
librdkafka's 0081): per broker or cluster-wide, described with DYNAMIC_* sources over the
static value, kept across a restart; what Kafka cannot change at run time is refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from bmq.net.client import BrokerLink
from bmq.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from bmq.protocol.messages.describe_configs_request import DescribeConfigsResource
from bmq.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from tests.conftest import BrokerFactory


def _alter(admin: AdminClient, name: str, *changes: tuple[str, str, AlterConfigOpType]) -> None:
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in changes])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _alter_cluster_default(bootstrap: str, *changes: tuple[str, str, AlterConfigOpType]
                           ) -> int:
    """The cluster-wide default (an empty broker name, which librdkafka does not send: Kafka's
    `kafka-configs --entity-default` does) over the wire; the error code."""
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=4, resource_name="", configs=[
            AlterableConfig(name=key, config_operation=int(op.value), value=value)
            for key, value, op in changes])])
    host, port = bootstrap.split(":")

    async def ask() -> int:
        link = BrokerLink(host, int(port))
        try:
            return int((await link.request(request, 1)).responses[0].error_code)
        finally:
            link.close()

    return asyncio.run(ask())


def _described_cluster_default(bootstrap: str) -> dict[str, tuple[str | None, int]]:
    """DescribeConfigs of the cluster-wide default (the empty broker name, as the Java Admin
    and `kafka-configs --entity-default` ask) over the wire: name to value and source."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=4, resource_name="", configuration_keys=None)])
    host, port = bootstrap.split(":")

    async def ask() -> dict[str, tuple[str | None, int]]:
        link = BrokerLink(host, int(port))
        try:
            [result] = (await link.request(request, 4)).results
            assert result.error_code == 0, result.error_message
            return {c.name: (c.value, c.config_source) for c in result.configs}
        finally:
            link.close()

    return asyncio.run(ask())


def _described(admin: AdminClient, name: str) -> dict[str, Any]:
    [future] = admin.describe_configs([ConfigResource(ResourceType.BROKER, name)]).values()
    return dict(future.result(30))


def _refused(admin: AdminClient, name: str, key: str, value: str) -> int:
    with pytest.raises(KafkaException) as refused:
        _alter(admin, name, (key, value, AlterConfigOpType.SET))
    return int(refused.value.args[0].code())


def test_dynamic_broker_configs(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    SET, APPEND = AlterConfigOpType.SET, AlterConfigOpType.APPEND
    _alter(admin, "0", ("background.threads", "9", SET),
           ("sasl.kerberos.min.time.before.relogin", "58000", SET))
    assert _alter_cluster_default(broker.bootstrap, ("log.retention.ms", "3600000", SET),
                                  ("log.cleanup.policy", "compact", APPEND)) == 0
    _alter(admin, "0", ("log.retention.ms", "7200000", SET))

    for _ in range(2):      # and again after a restart: they are kept
        configs = _described(admin, "0")
        assert configs["background.threads"].value == "9"
        assert configs["background.threads"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert configs["sasl.kerberos.min.time.before.relogin"].value == "58000"
        # Per broker over cluster-wide over the static setting (log.retention.ms is BMQ's too).
        retention = configs["log.retention.ms"]
        assert (retention.value, retention.source, retention.is_read_only) == (
            "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
        policy = configs["log.cleanup.policy"]
        assert (policy.value, policy.source) == (
            "compact", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        # The cluster-wide default is what was set there, not this broker's own values.
        cluster_wide = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert _described_cluster_default(broker.bootstrap) == {
            "log.retention.ms": ("3600000", cluster_wide),
            "log.cleanup.policy": ("compact", cluster_wide)}
        broker.restart()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    # What Kafka cannot change at run time, per-broker configs at cluster level, bad values.
    assert _refused(admin, "0", "log.dirs", "/elsewhere") == KafkaError.INVALID_REQUEST
    assert _alter_cluster_default(broker.bootstrap, (
        "sasl.kerberos.min.time.before.relogin", "1", SET)) == KafkaError.INVALID_REQUEST
    assert _refused(admin, "0", "background.threads", "many") == KafkaError.INVALID_CONFIG
    assert _described(admin, "0")["background.threads"].value == "9"
    # Deleted, the static value (or default) shows again.
    _alter(admin, "0", ("background.threads", "", AlterConfigOpType.DELETE))
    assert "background.threads" not in _described(admin, "0")


def test_group_configs(broker_factory: BrokerFactory) -> None:
    """Kafka 4's group configs (and KIP-1191's dead-letter topic, BMQ's retry back-off): set
    per group, described as GROUP_CONFIG over the default, checked, kept across a restart."""
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(*changes: tuple[str, str, AlterConfigOpType]) -> None:
        resource = ConfigResource(ResourceType.GROUP, "orders", incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op) for key, value, op in changes])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)

    def described() -> dict[str, Any]:
        [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, "orders")]).values()
        return dict(future.result(30))

    alter(("consumer.session.timeout.ms", "50000", AlterConfigOpType.SET),
          ("share.record.lock.duration.ms", "15000", AlterConfigOpType.SET),
          ("errors.deadletterqueue.topic.name", "orders-dlq", AlterConfigOpType.SET))
    for _ in range(2):
        configs = described()
        assert (configs["consumer.session.timeout.ms"].value,
                configs["consumer.session.timeout.ms"].source) == (
            "50000", ConfigSource.GROUP_CONFIG.value)
        assert configs["share.record.lock.duration.ms"].value == "15000"
        assert configs["errors.deadletterqueue.topic.name"].value == "orders-dlq"
        assert (configs["share.auto.offset.reset"].value,
                configs["share.auto.offset.reset"].source) == (
            "latest", ConfigSource.DEFAULT_CONFIG.value)
        broker.restart()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    for bad in (("group.unknown.config", "1"), ("share.record.lock.duration.ms", "10"),
                ("share.auto.offset.reset", "sideways"),
                ("consumer.heartbeat.interval.ms", "60000")):   # above the session timeout
        with pytest.raises(KafkaException) as refused:
            alter((*bad, AlterConfigOpType.SET))
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG, bad
    alter(("consumer.session.timeout.ms", "", AlterConfigOpType.DELETE))
    assert described()["consumer.session.timeout.ms"].value == "45000"
