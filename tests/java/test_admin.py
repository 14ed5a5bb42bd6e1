"""Kafka's Java Admin client (kafka-clients 4.4) against BMQ: topics, partitions, configs,
records deletion and listOffsets, the cluster, consumer and share groups with their offsets,
transactions and producers (AdminScenarios, AdminGroupScenarios) on `bmq serve`; SCRAM users,
quotas and ACLs enforced (AdminSecurityScenarios) over SASL_SSL on a broker with an
authorizer; the same on a cluster of brokers behind a proxy (slow). Checks in admin_checks.py;
each test is one JVM run of several scenarios."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.conftest import BrokerFactory, BrokerProcess
from tests.groups.helpers import create_topic, unique
from tests.integration.helpers import produce_all
from tests.java import admin_checks, checks
from tests.java.conftest import BROKER_CONFIG, BROKER_ENV, JavaClients
from tests.java.test_security import sasl_ssl
from tests.proxy.conftest import Proxies, proxies
from tests.security.conftest import Certificates, SecureBroker, certificates, secure_broker

__all__ = ["certificates", "cluster_factory", "proxies", "zookeeper"]


def run_admin(java_clients: JavaClients, bootstrap: str, java_bootstrap: str,
              nodes: list[str], ready: checks.Ready = checks.no_wait,
              settings: dict[str, str] | None = None) -> None:
    """AdminScenarios on its topics, with the Java client on ``java_bootstrap``."""
    config_topic = checks.new_topic(bootstrap, "java-admin-configs", 1, ready)
    offsets_topic, records = checks.group_topic(bootstrap, ready)
    argument, seventh = admin_checks.offsets_argument(offsets_topic, records)
    prefix = unique("java-admin")
    result = java_clients.run("AdminScenarios", java_bootstrap, {
        "topics": prefix, "configs": config_topic, "broker-configs": f"{prefix}-group",
        "offsets": argument, "cluster": offsets_topic}, settings)
    admin_checks.check_topics(bootstrap, prefix, result["topics"])
    admin_checks.check_configs(bootstrap, config_topic, result["configs"])
    admin_checks.check_broker_configs(result["broker-configs"])
    admin_checks.check_offsets(bootstrap, offsets_topic, records, seventh, result["offsets"])
    admin_checks.check_cluster(result["cluster"], nodes)


def run_admin_groups(java_clients: JavaClients, bootstrap: str, java_bootstrap: str,
                     ready: checks.Ready = checks.no_wait,
                     settings: dict[str, str] | None = None) -> None:
    group_topic, _ = checks.group_topic(bootstrap, ready)
    share_topic = checks.share_topic(bootstrap, ready)
    transaction_topic = checks.new_topic(bootstrap, "java-admin-txn", 1, ready)
    result = java_clients.run("AdminGroupScenarios", java_bootstrap, {
        "consumer-groups": group_topic, "classic-group": group_topic, "share-groups": share_topic,
        "transactions": transaction_topic}, settings)
    admin_checks.check_consumer_groups(bootstrap, group_topic, result["consumer-groups"])
    admin_checks.check_classic_group(result["classic-group"])
    admin_checks.check_share_groups(result["share-groups"])
    admin_checks.check_transactions(bootstrap, transaction_topic, result["transactions"])


def test_topics_configs_offsets_and_cluster(java_clients: JavaClients,
                                            java_broker: BrokerProcess) -> None:
    bootstrap = java_broker.bootstrap
    run_admin(java_clients, bootstrap, bootstrap, [bootstrap])


def test_consumer_and_share_groups_and_transactions(java_clients: JavaClients,
                                                    java_broker: BrokerProcess) -> None:
    run_admin_groups(java_clients, java_broker.bootstrap, java_broker.bootstrap)


@pytest.fixture(scope="module")
def acl_broker(module_broker_factory: BrokerFactory,
               certificates: Certificates) -> SecureBroker:
    """A broker with the authorizer: alice (the Java Admin over SASL_SSL) and the tests'
    confluent-kafka clients on the PLAINTEXT listener are super users."""
    return secure_broker(module_broker_factory, certificates, **BROKER_CONFIG, **{
        "authorizer.class.name": "bmq", "super.users": "User:alice;User:ANONYMOUS"})


def run_security(java_clients: JavaClients, bootstrap: str, java_bootstrap: str,
                 settings: dict[str, str], scenarios: tuple[str, ...]) -> dict[str, Any]:
    topic = checks.new_topic(bootstrap, "java-admin-acl", 1, checks.no_wait)
    create_topic(bootstrap, f"{topic}-other", 1)
    produce_all(bootstrap, topic, ({"value": f"v{i}".encode()} for i in range(3)))
    result = java_clients.run("AdminSecurityScenarios", java_bootstrap,
                              {name: topic for name in scenarios}, settings)
    for name in scenarios:
        if name == "acls":
            admin_checks.check_acls(result[name], 3)
        elif name == "acls-disabled":
            admin_checks.check_acls_disabled(result[name])
        elif name == "scram":
            admin_checks.check_scram(topic, result[name])
        else:
            admin_checks.check_quotas(topic, result[name])
    return result


def test_scram_users_quotas_and_acls_over_sasl_ssl(java_clients: JavaClients,
                                                   acl_broker: SecureBroker,
                                                   certificates: Certificates) -> None:
    run_security(java_clients, acl_broker.broker.bootstrap, acl_broker.bootstrap("SASL_SSL"),
                 sasl_ssl(certificates), ("acls", "scram", "quotas"))


@pytest.mark.slow
def test_acl_calls_without_an_authorizer(java_clients: JavaClients,
                                         java_broker: BrokerProcess) -> None:
    run_security(java_clients, java_broker.bootstrap, java_broker.bootstrap, {},
                 ("acls-disabled", "scram", "quotas"))


@pytest.mark.slow
def test_every_admin_scenario_over_sasl_ssl(java_clients: JavaClients, acl_broker: SecureBroker,
                                            certificates: Certificates) -> None:
    plain, secure = acl_broker.broker.bootstrap, acl_broker.bootstrap("SASL_SSL")
    settings = sasl_ssl(certificates)
    run_admin(java_clients, plain, secure, [secure], settings=settings)
    run_admin_groups(java_clients, plain, secure, settings=settings)


@pytest.mark.slow
def test_admin_on_cluster_brokers_and_through_a_proxy(java_clients: JavaClients,
                                                      cluster_factory: ClusterFactory,
                                                      proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=3, env=BROKER_ENV)
    proxy = proxies(cluster)
    # DescribeCluster names the proxy too: Metadata names it as every partition's leader.
    run_admin(java_clients, proxy.bootstrap, cluster.bootstrap,
              [*(broker.bootstrap for broker in cluster.brokers.values()), proxy.bootstrap],
              ready=cluster.wait_writable)
    run_admin_groups(java_clients, proxy.bootstrap, proxy.bootstrap,
                     ready=cluster.wait_writable)
