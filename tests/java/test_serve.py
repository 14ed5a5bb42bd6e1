"""Kafka's Java client (kafka-clients 4.4) on `bmq serve`: the producer, consumers in groups and
with assigned partitions, and the share consumer (scenarios in src/main/java/bmq/clients, checks
in checks.py). Each test is one JVM run of several scenarios."""

from __future__ import annotations

import pytest

from tests.conftest import BrokerFactory, BrokerProcess
from tests.integration.helpers import wait_until, watermarks
from tests.java import checks
from tests.java.conftest import BROKER_CONFIG, JavaClients


def test_producer_idempotent_transactional_and_every_codec(
        java_clients: JavaClients, java_broker: BrokerProcess) -> None:
    bootstrap = java_broker.bootstrap
    topics = checks.producer_topics(bootstrap)
    result = java_clients.run("ProducerScenarios", bootstrap, topics)
    checks.check_idempotent(bootstrap, topics["idempotent"], result["idempotent"])
    checks.check_transactions(bootstrap, topics["transactions"], result["transactions"])
    checks.check_codecs(bootstrap, topics["codecs"], result["codecs"])


@pytest.mark.slow
def test_idempotent_producer_across_a_kill_9_of_the_broker(java_clients: JavaClients,
                                                           broker_factory: BrokerFactory) -> None:
    """The broker is killed (-9) and restarted while the Java producer writes: every send
    succeeds, and the partition holds each record once, in order."""
    broker = broker_factory(config=BROKER_CONFIG)
    topic = checks.producer_topics(broker.bootstrap, ("steady",))["steady"]
    run = java_clients.start("ProducerScenarios", broker.bootstrap, {"steady": topic})
    wait_until(lambda: watermarks(broker.bootstrap, topic)[1] >= 800, 60,
               message="800 records written")
    broker.kill()
    assert run.proc.poll() is None, "the producer finished before the kill"
    broker.start()
    checks.check_steady(broker.bootstrap, topic, run.result()["steady"])


def test_groups_classic_and_consumer_protocol_static_members_and_regex(
        java_clients: JavaClients, java_broker: BrokerProcess) -> None:
    bootstrap = java_broker.bootstrap
    topic, records = checks.group_topic(bootstrap)
    result = java_clients.run("GroupScenarios", bootstrap, {
        "classic": topic, "consumer": topic, "static-classic": topic, "regex": topic})
    checks.check_read_together(bootstrap, topic, records, result["classic"])
    checks.check_read_together(bootstrap, topic, records, result["consumer"])
    checks.check_static_members(result["static-classic"], same_generation=True)
    checks.check_regex(topic, result["regex"])


@pytest.mark.slow
def test_static_members_with_the_consumer_protocol(java_clients: JavaClients,
                                                    java_broker: BrokerProcess) -> None:
    topic, _ = checks.group_topic(java_broker.bootstrap)
    result = java_clients.run("GroupScenarios", java_broker.bootstrap,
                              {"static-consumer": topic})
    checks.check_static_members(result["static-consumer"], same_generation=False)


def test_seek_offsets_for_times_and_read_committed(java_clients: JavaClients,
                                                   java_broker: BrokerProcess) -> None:
    bootstrap = java_broker.bootstrap
    topic, records = checks.group_topic(bootstrap)
    transactions = checks.OpenTransaction(bootstrap)
    try:
        result = java_clients.run("ConsumerScenarios", bootstrap, {
            "seek": topic, "offsets-for-times": topic, "read-committed": transactions.topic})
    finally:
        transactions.close()
    checks.check_seek(result["seek"])
    checks.check_offsets_for_times(records, result["offsets-for-times"])
    checks.check_read_committed(result["read-committed"])


def test_share_consumer_accept_release_reject(java_clients: JavaClients,
                                              java_broker: BrokerProcess) -> None:
    topic = checks.share_topic(java_broker.bootstrap)
    result = java_clients.run("ShareScenarios", java_broker.bootstrap, {"acknowledge": topic})
    checks.check_acknowledge(result["acknowledge"])


@pytest.mark.slow
def test_share_consumer_implicit_acknowledgement_and_renew(java_clients: JavaClients,
                                                           java_broker: BrokerProcess) -> None:
    topic = checks.share_topic(java_broker.bootstrap)
    result = java_clients.run("ShareScenarios", java_broker.bootstrap,
                              {"implicit": topic, "renew": topic})
    checks.check_implicit(result["implicit"])
    checks.check_renew(result["renew"])
