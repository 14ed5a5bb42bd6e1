"""Kafka's Java client over SASL_SSL on `bmq serve`: SCRAM-SHA-512 as user alice, the broker's
certificate checked against the test CA (a PEM trust store, host name verified), with the
security tests' certificates, listeners and user (tests/security/conftest.py); and over SSL
with a client certificate (a PEM key store). The checks read back with confluent-kafka on the
same broker's PLAINTEXT listener."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import BrokerFactory
from tests.java import checks
from tests.java.conftest import BROKER_CONFIG, JavaClients
from tests.security.conftest import (
    PASSWORD,
    USER,
    Certificates,
    SecureBroker,
    certificates,
    secure_broker,
)

__all__ = ["certificates"]


@pytest.fixture(scope="module")
def java_secured(module_broker_factory: BrokerFactory,
                 certificates: Certificates) -> SecureBroker:
    # SSL clients must show a certificate; SASL_SSL ones are not asked for one (as Kafka).
    return secure_broker(module_broker_factory, certificates, **BROKER_CONFIG,
                         **{"ssl.client.auth": "required"})


def sasl_ssl(certificates: Certificates) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                f'required username="{USER}" password="{PASSWORD}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.ca)}


def produce_and_consume_in_a_group(java_clients: JavaClients, broker: SecureBroker,
                                   listener: str, settings: dict[str, str],
                                   protocol: str) -> None:
    """The idempotent producer, then two consumers in a group of ``protocol``, on
    ``listener``; checked on the PLAINTEXT one."""
    plain, secure = broker.broker.bootstrap, broker.bootstrap(listener)
    topics = checks.producer_topics(plain, ("idempotent",))
    produced = java_clients.run("ProducerScenarios", secure, topics, settings)
    checks.check_idempotent(plain, topics["idempotent"], produced["idempotent"])
    topic, records = checks.group_topic(plain)
    consumed = java_clients.run("GroupScenarios", secure, {protocol: topic}, settings)
    checks.check_read_together(plain, topic, records, consumed[protocol])


def test_producer_and_consumer_group_over_sasl_ssl(java_clients: JavaClients,
                                                   java_secured: SecureBroker,
                                                   certificates: Certificates) -> None:
    produce_and_consume_in_a_group(java_clients, java_secured, "SASL_SSL",
                                   sasl_ssl(certificates), "consumer")
    assert "authenticated User:alice" in java_secured.broker.log_text()


@pytest.mark.slow
def test_transactions_codecs_seek_and_share_consumer_over_sasl_ssl(
        java_clients: JavaClients, java_secured: SecureBroker,
        certificates: Certificates) -> None:
    plain, secure = java_secured.broker.bootstrap, java_secured.bootstrap("SASL_SSL")
    settings = sasl_ssl(certificates)
    topics = checks.producer_topics(plain, ("transactions", "codecs"))
    produced = java_clients.run("ProducerScenarios", secure, topics, settings)
    checks.check_transactions(plain, topics["transactions"], produced["transactions"])
    checks.check_codecs(plain, topics["codecs"], produced["codecs"])
    topic, records = checks.group_topic(plain)
    transactions = checks.OpenTransaction(plain)
    try:
        consumed = java_clients.run("ConsumerScenarios", secure, {
            "seek": topic, "offsets-for-times": topic, "read-committed": transactions.topic},
            settings)
    finally:
        transactions.close()
    checks.check_seek(consumed["seek"])
    checks.check_offsets_for_times(records, consumed["offsets-for-times"])
    checks.check_read_committed(consumed["read-committed"])
    share = checks.share_topic(plain)
    shared = java_clients.run("ShareScenarios", secure, {"acknowledge": share}, settings)
    checks.check_acknowledge(shared["acknowledge"])


@pytest.mark.slow
def test_producer_and_consumer_over_ssl_with_a_client_certificate(
        java_clients: JavaClients, java_secured: SecureBroker, certificates: Certificates,
        tmp_path: Path) -> None:
    key_store = tmp_path / "client.pem"
    key_store.write_text(certificates.client_key.read_text()
                         + certificates.client_cert.read_text())
    settings = {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(key_store), "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certificates.ca)}
    produce_and_consume_in_a_group(java_clients, java_secured, "SSL", settings, "classic")
