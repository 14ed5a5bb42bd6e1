"""Kafka's Java client on a cluster: three `bmq broker`s on shared storage (tests/cluster) and a
`bmq proxy` before them (tests/proxy). The Java clients talk to the brokers themselves or to
the proxy; the checks read back with confluent-kafka through the proxy."""

from __future__ import annotations

import pytest

from tests.cluster.conftest import ClusterFactory, cluster_factory, zookeeper
from tests.integration.helpers import produce_all, wait_until, watermarks
from tests.java import checks
from tests.java.conftest import BROKER_ENV, JavaClients
from tests.proxy.conftest import Proxies, proxies

__all__ = ["cluster_factory", "proxies", "zookeeper"]


def test_producer_on_the_brokers_and_groups_through_a_proxy(
        java_clients: JavaClients, cluster_factory: ClusterFactory, proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=3, env=BROKER_ENV)
    proxy = proxies(cluster)
    topics = checks.producer_topics(proxy.bootstrap, ("idempotent", "transactions"),
                                    ready=cluster.wait_writable)
    produced = java_clients.run("ProducerScenarios", cluster.bootstrap, topics)
    checks.check_idempotent(proxy.bootstrap, topics["idempotent"], produced["idempotent"])
    checks.check_transactions(proxy.bootstrap, topics["transactions"], produced["transactions"])
    topic, records = checks.group_topic(proxy.bootstrap, ready=cluster.wait_writable)
    assert len(set(cluster.owners(topic).values())) > 1, "the partitions share one owner"
    consumed = java_clients.run("GroupScenarios", proxy.bootstrap, {"consumer": topic})
    checks.check_read_together(proxy.bootstrap, topic, records, consumed["consumer"])


@pytest.mark.slow
def test_every_scenario_through_a_proxy(java_clients: JavaClients,
                                        cluster_factory: ClusterFactory,
                                        proxies: Proxies) -> None:
    cluster = cluster_factory(brokers=3, env=BROKER_ENV)
    proxy = proxies(cluster)
    bootstrap = proxy.bootstrap
    topics = checks.producer_topics(bootstrap, ("codecs",), ready=cluster.wait_writable)
    produced = java_clients.run("ProducerScenarios", bootstrap, topics)
    checks.check_codecs(bootstrap, topics["codecs"], produced["codecs"])
    topic, records = checks.group_topic(bootstrap, ready=cluster.wait_writable)
    grouped = java_clients.run("GroupScenarios", bootstrap, {
        "classic": topic, "consumer": topic, "static-classic": topic, "static-consumer": topic,
        "regex": topic})
    checks.check_read_together(bootstrap, topic, records, grouped["classic"])
    checks.check_read_together(bootstrap, topic, records, grouped["consumer"])
    checks.check_static_members(grouped["static-classic"], same_generation=True)
    checks.check_static_members(grouped["static-consumer"], same_generation=False)
    checks.check_regex(topic, grouped["regex"])
    transactions = checks.OpenTransaction(bootstrap, ready=cluster.wait_writable)
    try:
        consumed = java_clients.run("ConsumerScenarios", bootstrap, {
            "offsets-for-times": topic, "read-committed": transactions.topic})
    finally:
        transactions.close()
    checks.check_offsets_for_times(records, consumed["offsets-for-times"])
    checks.check_read_committed(consumed["read-committed"])
    share = checks.share_topic(bootstrap, ready=cluster.wait_writable)
    shared = java_clients.run("ShareScenarios", bootstrap, {"acknowledge": share})
    checks.check_acknowledge(shared["acknowledge"])


@pytest.mark.slow
def test_idempotent_producer_across_the_kill_of_the_partition_owner(
        java_clients: JavaClients, cluster_factory: ClusterFactory) -> None:
    """The owner of the partition the Java producer writes is killed (-9): another broker
    takes it over from shared storage, the producer follows it, every send succeeds and each
    record is there once, in order."""
    cluster = cluster_factory(brokers=3, env=BROKER_ENV)
    topic = checks.producer_topics(cluster.bootstrap, ("steady",),
                                   ready=cluster.wait_writable)["steady"]
    run = java_clients.start("ProducerScenarios", cluster.bootstrap, {"steady": topic})
    wait_until(lambda: watermarks(cluster.bootstrap, topic)[1] >= 800, 60,
               message="800 records written")
    owner = cluster.owners(topic)[0]
    cluster.brokers[owner].kill()
    assert run.proc.poll() is None, "the producer finished before the kill"
    cluster.wait_writable(topic, owners=set(cluster.brokers) - {owner})
    checks.check_steady(cluster.bootstrap, topic, run.result()["steady"])


@pytest.mark.slow
def test_a_reader_across_the_kill_of_the_partition_owner(
        java_clients: JavaClients, cluster_factory: ClusterFactory) -> None:
    """A Java consumer reading a partition when its owner is killed (-9) goes on at the new
    owner: every record once, in order."""
    cluster = cluster_factory(brokers=3, env=BROKER_ENV)
    topic = checks.producer_topics(cluster.bootstrap, ("follow",),
                                   ready=cluster.wait_writable)["follow"]
    # Batches of 20 records, and fetches of a batch or two (ConsumerScenarios.follow): the
    # consumer fetches all along, not everything before the kill.
    produce_all(cluster.bootstrap, topic, ({"partition": 0, "value": f"v{i}".encode()}
                                           for i in range(4000)), batch_num_messages=20)
    run = java_clients.start("ConsumerScenarios", cluster.bootstrap, {"follow": topic})
    run.wait_for_output("follow: 500 read", 60)
    owner = cluster.owners(topic)[0]
    cluster.brokers[owner].kill()
    assert run.proc.poll() is None, "the consumer finished before the kill"
    cluster.wait_writable(topic, owners=set(cluster.brokers) - {owner})
    assert run.result()["follow"]["values"] == [f"v{i}" for i in range(4000)]
