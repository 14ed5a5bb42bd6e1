"""A source reached as a Kafka client reaches a secured cluster: `bmq mirror` logs in to a BMQ
source over SASL_SSL with SCRAM-SHA-512 (its source properties, librdkafka's names), as a user
the source's authorizer lets read. On that cluster, a user allowed to create topics but not to
CLUSTER_ACTION cannot create a mirrored one."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.conftest import BrokerFactory, make_topic_name
from tests.mirror.conftest import MirrorFactory, wait_until
from tests.mirror.helpers import records
from tests.security.conftest import (
    PASSWORD,
    USER,
    Certificates,
    certificates,  # noqa: F401 (the fixture)
    secure_broker,
)

BOB, BOB_PASSWORD = "bob", "bob-secret"


@dataclass
class Address:
    bootstrap: str


def test_a_source_reached_over_sasl_ssl_with_scram_is_mirrored(
        broker_factory: BrokerFactory, certificates: Certificates,  # noqa: F811
        mirror_factory: MirrorFactory) -> None:
    secured = secure_broker(broker_factory, certificates, **{
        "authorizer.class.name": "bmq", "super.users": f"User:{USER}"})
    login = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": USER, "sasl.password": PASSWORD,
             "ssl.ca.location": str(certificates.ca)}
    source = secured.bootstrap("SASL_SSL")
    target = broker_factory(config={"auto_create_topics_enable": False})
    topic = make_topic_name("secured")
    admin = AdminClient({"bootstrap.servers": source, **login})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": source, "enable.idempotence": True, **login})
    for i in range(100):
        producer.produce(topic, key=b"%d" % i, value=b"value %d" % i, partition=i % 2)
    assert producer.flush(20) == 0

    mirror = mirror_factory(Address(source), target, "--topic", topic, *(
        flag for key, value in login.items() for flag in ("--source-property", f"{key}={value}")))
    expected = records(source, topic, 2, **login)
    assert len(expected) == 100

    def mirrored() -> bool:
        try:
            return records(target.bootstrap, topic, 2) == expected
        except KafkaException:      # (no such topic there yet)
            return False

    wait_until(mirrored, 30, "the target has the source's records at their offsets",
               mirror.log_text)

    # bob may create topics, not CLUSTER_ACTION: not a mirrored one.
    acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                     f"User:{BOB}", "*", AclOperation.CREATE, AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(10)
    added = UserScramCredentialUpsertion(BOB, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  4096), BOB_PASSWORD.encode())
    admin.alter_user_scram_credentials([added])[BOB].result(10)
    bob = AdminClient({"bootstrap.servers": source, **login, "sasl.username": BOB,
                       "sasl.password": BOB_PASSWORD})
    marked, plain = make_topic_name("marked"), make_topic_name("plain")
    with pytest.raises(KafkaException) as refused:
        bob.create_topics([NewTopic(marked, 1, 1, config={"bmq.mirror.source": "east"})]
                          )[marked].result(10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    bob.create_topics([NewTopic(plain, 1, 1)])[plain].result(10)
    assert set(admin.list_topics(timeout=10).topics) >= {topic, plain}
    assert marked not in admin.list_topics(timeout=10).topics
