"""kafka-acls.sh (Kafka 4.4's AclCommand) against `bmq serve` with its authorizer: ACLs added,
listed and removed as an operator does, and the broker enforcing what the tool set."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerFactory, make_topic_name
from tests.kafka_tools.tools import KafkaTools

# The authorizer on, everything allowed until an ACL says otherwise: the tool itself runs as
# User:ANONYMOUS over PLAINTEXT, as the librdkafka suite's do (scripts/librdkafka_suite.sh).
AUTHORIZER_ENV = {"BMQ_AUTHORIZER_CLASS_NAME": "bmq",
                  "BMQ_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true"}

Acl = tuple[str, str, str, str, str, str]  # type, name, pattern, principal, operation, permission


@pytest.fixture(scope="module")
def acl_kafka(kafka_jars: None, module_broker_factory: BrokerFactory) -> KafkaTools:
    return KafkaTools(module_broker_factory(env=AUTHORIZER_ENV).bootstrap)


def listed_acls(text: str) -> set[Acl]:
    """kafka-acls --list: each ACL under its resource pattern."""
    found: set[Acl] = set()
    resource = ("", "", "")
    for line in text.splitlines():
        pattern = re.search(r"ResourcePattern\(resourceType=(\w+), name=(.*), "
                            r"patternType=(\w+)\)", line)
        if pattern:
            resource = (pattern.group(1), pattern.group(2), pattern.group(3))
        acl = re.search(r"\(principal=(\S+), host=\S+, operation=(\w+), "
                        r"permissionType=(\w+)\)", line)
        if acl:
            found.add((*resource, acl.group(1), acl.group(2), acl.group(3)))
    return found


def produce_error(bootstrap: str, topic: str) -> KafkaError | None:
    """The error of one acks=all produce (None: it was written)."""
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 20000})
    producer.produce(topic, value=b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1
    return errors[0]


def test_acls_are_added_listed_enforced_and_removed(acl_kafka: KafkaTools) -> None:
    kafka = acl_kafka
    prefix = make_topic_name("payments")
    topic, other = f"{prefix}.eu", f"{prefix}.us"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1), NewTopic(other, 1)]).values():
        future.result(30)

    added = kafka("kafka-acls", "--add", "--allow-principal", "User:alice", "--operation",
                  "Read", "--operation", "Write", "--topic", topic).out
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, " \
           "patternType=LITERAL)`" in added
    kafka("kafka-acls", "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write",
          "--topic", prefix, "--resource-pattern-type", "prefixed")
    # The convenience option: Read and Describe on the topic, Read on the group.
    kafka("kafka-acls", "--add", "--consumer", "--allow-principal", "User:bob",
          "--topic", topic, "--group", "audit")

    mine = {acl for acl in listed_acls(kafka("kafka-acls", "--list").out)
            if acl[1] in (topic, prefix, "audit")}
    assert mine == {
        ("TOPIC", topic, "LITERAL", "User:alice", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:alice", "WRITE", "ALLOW"),
        ("TOPIC", prefix, "PREFIXED", "User:ANONYMOUS", "WRITE", "DENY"),
        ("TOPIC", topic, "LITERAL", "User:bob", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:bob", "DESCRIBE", "ALLOW"),
        ("GROUP", "audit", "LITERAL", "User:bob", "READ", "ALLOW"),
    }
    assert listed_acls(kafka("kafka-acls", "--list", "--principal", "User:bob").out) == {
        ("TOPIC", topic, "LITERAL", "User:bob", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:bob", "DESCRIBE", "ALLOW"),
        ("GROUP", "audit", "LITERAL", "User:bob", "READ", "ALLOW"),
    }

    # The prefixed DENY holds for this client (User:ANONYMOUS) on both topics ...
    for name in (topic, other):
        denied = produce_error(kafka.bootstrap, name)
        assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    kafka("kafka-acls", "--remove", "--deny-principal", "User:ANONYMOUS", "--operation",
          "Write", "--topic", prefix, "--resource-pattern-type", "prefixed", "--force")
    # ... and is gone once removed, where no ACL names the topic; where ACLs name it (only
    # other principals), "allow everyone" no longer applies, as in Kafka.
    assert produce_error(kafka.bootstrap, other) is None
    refused = produce_error(kafka.bootstrap, topic)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Every ACL that applies to the topic (MATCH): the prefixed one is gone.
    applying = listed_acls(kafka("kafka-acls", "--list", "--topic", topic,
                                 "--resource-pattern-type", "match").out)
    assert applying == {acl for acl in mine if acl[0] == "TOPIC" and acl[1] == topic}

@pytest.mark.slow
def test_producer_and_cluster_acls_and_filters(acl_kafka: KafkaTools) -> None:
    kafka = acl_kafka
    topic, txn = make_topic_name("ledger"), make_topic_name("tx")
    kafka("kafka-acls", "--add", "--producer", "--allow-principal", "User:carol",
          "--topic", topic, "--transactional-id", txn)
    # The first ACL on the cluster ends "allow everyone" there: this client keeps ALTER (which
    # adding and removing ACLs need) by an ACL of its own, added in the same request.
    kafka("kafka-acls", "--add", "--allow-principal", "User:ops", "--allow-principal",
          "User:ANONYMOUS", "--allow-host", "127.0.0.1", "--operation", "Alter", "--cluster")
    carol = listed_acls(kafka("kafka-acls", "--list", "--principal", "User:carol").out)
    assert carol == {
        ("TOPIC", topic, "LITERAL", "User:carol", operation, "ALLOW")
        for operation in ("WRITE", "DESCRIBE", "CREATE")
    } | {
        ("TRANSACTIONAL_ID", txn, "LITERAL", "User:carol", operation, "ALLOW")
        for operation in ("WRITE", "DESCRIBE")
    }
    cluster = kafka("kafka-acls", "--list", "--cluster").out
    assert "(principal=User:ops, host=127.0.0.1, operation=ALTER, permissionType=ALLOW)" \
        in cluster
    kafka("kafka-acls", "--remove", "--allow-principal", "User:ops", "--allow-host",
          "127.0.0.1", "--operation", "Alter", "--cluster", "--force")
    assert listed_acls(kafka("kafka-acls", "--list", "--cluster").out) == {
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:ANONYMOUS", "ALTER", "ALLOW")}
    kafka("kafka-acls", "--remove", "--allow-principal", "User:carol", "--topic", topic,
          "--transactional-id", txn, "--producer", "--force")
    assert listed_acls(kafka("kafka-acls", "--list", "--principal", "User:carol").out) \
        == set()
    bad = kafka("kafka-acls", "--add", "--allow-principal", "User:x", "--operation", "Alter",
                "--topic", topic, "--resource-pattern-type", "any", check=False)
    assert bad.code == 1


@pytest.mark.slow
def test_without_an_authorizer_the_tool_says_security_is_disabled(kafka: KafkaTools) -> None:
    answer = kafka("kafka-acls", "--list", check=False)
    assert answer.code == 1 and "SecurityDisabledException" in answer.out + answer.err
