"""ACLs with Kafka's semantics, enforced on real clients (confluent-kafka over SASL_PLAINTEXT):
PREFIXED ALLOW with a LITERAL DENY (deny wins), topics hidden from Metadata, group and
transactional-id ACLs, super users, CreateAcls/DescribeAcls/DeleteAcls with filters, the ACLs
surviving a restart, and an audit line for every refusal."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.conftest import BrokerFactory
from tests.security.conftest import (
    PASSWORD,
    Certificates,
    SecureBroker,
    add_user,
    secure_broker,
)

ADMIN, BOB, SECRET = "admin", "bob", "bob-secret"
ANY_HOST = "*"


@pytest.fixture(scope="module")
def acl_broker(module_broker_factory: BrokerFactory,
               certificates: Certificates) -> Iterator[SecureBroker]:
    secured = secure_broker(module_broker_factory, certificates,
                            **{"authorizer.class.name": "bmq", "super.users": "User:admin"})
    secured.broker.stop()
    for user in (ADMIN, BOB):
        add_user(secured.broker.data_dir, user, SECRET)
    secured.broker.start()
    yield secured


def conf(secured: SecureBroker, user: str, **extra: Any) -> dict[str, Any]:
    password = SECRET if user in (ADMIN, BOB) else PASSWORD
    return {"bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": password, **extra}


def allow(resource: ResourceType, name: str, operation: AclOperation, principal: str,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, ANY_HOST, operation, permission)


def produce_error(config: dict[str, Any], topic: str) -> KafkaError | None:
    """The delivery error of one message (None: delivered)."""
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    return errors[0] if errors else None


def test_acls_with_kafkas_semantics(acl_broker: SecureBroker) -> None:
    suffix = uuid.uuid4().hex[:6]
    orders, orders_eu, secret = f"orders-{suffix}", f"orders-{suffix}-eu", f"secret-{suffix}"
    admin = AdminClient(conf(acl_broker, ADMIN))
    for future in admin.create_topics([NewTopic(t, 1, 1)
                                       for t in (orders, orders_eu, secret)]).values():
        future.result(30)
    created = admin.create_acls([
        allow(ResourceType.TOPIC, f"orders-{suffix}", AclOperation.WRITE, "User:alice",
              ResourcePatternType.PREFIXED),
        allow(ResourceType.TOPIC, orders_eu, AclOperation.WRITE, "User:alice",
              permission=AclPermissionType.DENY),
        allow(ResourceType.TOPIC, orders, AclOperation.READ, "User:alice"),
        allow(ResourceType.GROUP, f"g1-{suffix}", AclOperation.READ, "User:alice"),
    ])
    for future in created.values():
        future.result(30)

    alice = conf(acl_broker, "alice")
    assert produce_error(alice, orders) is None
    # PREFIXED ALLOW, LITERAL DENY: deny wins, nothing written.
    denied = produce_error(alice, orders_eu)
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # bob has no ACL on the topic.
    bob_denied = produce_error(conf(acl_broker, BOB), orders)
    assert bob_denied is not None and bob_denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    watcher = Consumer({**conf(acl_broker, ADMIN), "group.id": "watch"})
    assert watcher.get_watermark_offsets(TopicPartition(orders_eu, 0), 10) == (0, 0)
    assert watcher.get_watermark_offsets(TopicPartition(orders, 0), 10) == (0, 1)
    watcher.close()

    # Metadata shows each principal what it may describe (WRITE and READ imply DESCRIBE).
    seen_by_alice = set(AdminClient(alice).list_topics(timeout=10).topics)
    assert {orders, orders_eu} <= seen_by_alice and secret not in seen_by_alice
    assert not {orders, orders_eu, secret} & set(
        AdminClient(conf(acl_broker, BOB)).list_topics(timeout=10).topics)

    # Group ACLs gate consuming in a group.
    consumer = Consumer({**alice, "group.id": f"g1-{suffix}", "auto.offset.reset": "earliest"})
    consumer.subscribe([orders])
    message = consumer.poll(20)
    assert message is not None and message.error() is None and message.value() == b"v"
    consumer.close()
    other = Consumer({**alice, "group.id": f"g2-{suffix}", "auto.offset.reset": "earliest"})
    other.subscribe([orders])
    refused = other.poll(10)
    assert refused is not None and refused.error() is not None
    assert refused.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    other.close()

    # Fetch needs READ on the topic: bob, who may describe it and use his group, is told
    # TOPIC_AUTHORIZATION_FAILED when he fetches.
    for future in admin.create_acls([
            allow(ResourceType.GROUP, f"bob-{suffix}", AclOperation.READ, "User:bob"),
            allow(ResourceType.TOPIC, orders, AclOperation.DESCRIBE, "User:bob")]).values():
        future.result(30)
    reader = Consumer({**conf(acl_broker, BOB), "group.id": f"bob-{suffix}"})
    reader.assign([TopicPartition(orders, 0, 0)])
    codes = set()
    deadline = time.monotonic() + 15
    while KafkaError.TOPIC_AUTHORIZATION_FAILED not in codes and time.monotonic() < deadline:
        polled = reader.poll(0.5)
        if polled is not None:
            assert polled.error() is not None, "bob read a message"
            codes.add(polled.error().code())
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in codes, codes
    reader.close()

    # Transactional ids: refused until an ACL allows WRITE on the id.
    txn_id = f"txn-{suffix}"
    with pytest.raises(KafkaException) as no_acl:
        Producer({**alice, "transactional.id": txn_id}).init_transactions(10)
    assert no_acl.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    for future in admin.create_acls([allow(ResourceType.TRANSACTIONAL_ID, txn_id,
                                           AclOperation.WRITE, "User:alice")]).values():
        future.result(30)
    transactional = Producer({**alice, "transactional.id": txn_id})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(orders, b"in-txn")
    transactional.commit_transaction(30)

    # Only the cluster's ALTER may change ACLs.
    bob_admin = AdminClient(conf(acl_broker, BOB))
    (bob_create,) = bob_admin.create_acls(
        [allow(ResourceType.TOPIC, "*", AclOperation.ALL, "User:bob")]).values()
    with pytest.raises(KafkaException) as not_admin:
        bob_create.result(30)
    assert not_admin.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # DescribeAcls and DeleteAcls filters; the ACLs are kept across a restart.
    prefixed = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.PREFIXED, None,
                                None, AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(prefixed).result(30)
    assert [(b.name, b.operation) for b in found] == [(f"orders-{suffix}", AclOperation.WRITE)]
    matching = AclBindingFilter(ResourceType.TOPIC, orders_eu, ResourcePatternType.MATCH, None,
                                None, AclOperation.ANY, AclPermissionType.ANY)
    assert len(admin.describe_acls(matching).result(30)) == 2   # the PREFIXED and the DENY
    acl_broker.broker.restart()
    admin = AdminClient(conf(acl_broker, ADMIN))
    assert len(admin.describe_acls(matching).result(30)) == 2
    deny_filter = AclBindingFilter(ResourceType.TOPIC, orders_eu, ResourcePatternType.LITERAL,
                                   None, None, AclOperation.ANY, AclPermissionType.DENY)
    (deleted,) = admin.delete_acls([deny_filter]).values()
    assert len(deleted.result(30)) == 1
    assert produce_error(alice, orders_eu) is None      # the PREFIXED ALLOW applies now

    audit = [line for line in acl_broker.broker.log_text().splitlines() if "bmq.audit" in line]
    assert any("denied principal=User:bob" in line and f"TOPIC:{orders}" in line
               for line in audit), audit[-5:]
    assert any("principal=User:alice" in line and "operation=WRITE" in line for line in audit)


def test_authorized_operations_are_the_principals(acl_broker: SecureBroker) -> None:
    """KIP-430's authorized operations come from the ACLs: bob, who may READ one topic (which
    implies DESCRIBE) and nothing on the cluster, is told exactly that; the super user is told
    everything the resource type supports."""
    topic = f"ops-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf(acl_broker, ADMIN))
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    for future in admin.create_acls([allow(ResourceType.TOPIC, topic, AclOperation.READ,
                                           f"User:{BOB}")]).values():
        future.result(30)

    def operations(user: str) -> tuple[set[AclOperation], set[AclOperation]]:
        client = AdminClient(conf(acl_broker, user))
        [described] = client.describe_topics(TopicCollection([topic]),
                                             include_authorized_operations=True).values()
        cluster = client.describe_cluster(include_authorized_operations=True).result(30)
        # As Kafka: DescribeCluster is answered to anyone, with the operations it may do.
        assert cluster.cluster_id and cluster.nodes
        return (set(described.result(30).authorized_operations),
                set(cluster.authorized_operations or []))

    topic_ops, cluster_ops = operations(BOB)
    assert topic_ops == {AclOperation.READ, AclOperation.DESCRIBE}
    assert cluster_ops == set()
    topic_ops, cluster_ops = operations(ADMIN)
    assert AclOperation.WRITE in topic_ops and len(topic_ops) == 8
    assert {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE} <= cluster_ops


def test_acl_apis_without_an_authorizer_answer_security_disabled(
        secured: SecureBroker) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    (future,) = admin.create_acls([allow(ResourceType.TOPIC, "t", AclOperation.READ,
                                         "User:alice")]).values()
    with pytest.raises(KafkaException) as disabled:
        future.result(30)
    assert disabled.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_bmq_acl_add_list_remove(acl_broker: SecureBroker) -> None:
    from tests.cli.conftest import Bmq

    bmq = Bmq(acl_broker.bootstrap("SASL_PLAINTEXT"))
    auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
            "-X", f"sasl.username={ADMIN}", "-X", f"sasl.password={SECRET}"]
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    bmq("acl", "add", "--allow", "--principal", "User:carol", "--operation", "read",
        "--topic", topic, "--prefixed", *auth)
    bmq("acl", "add", "--deny", "--principal", "User:carol", "--operation", "WRITE",
        "--group", topic, *auth)
    listed = json.loads(bmq("acl", "list", "--principal", "User:carol", "-o", "json",
                            *auth).out)
    assert sorted((a["resource"], a["name"], a["pattern"], a["operation"], a["permission"])
                  for a in listed) == [("GROUP", topic, "LITERAL", "WRITE", "DENY"),
                                       ("TOPIC", topic, "PREFIXED", "READ", "ALLOW")]
    removed = bmq("acl", "remove", "--principal", "User:carol", "--group", topic, *auth)
    assert "removed 1 ACL" in removed.err
    assert len(json.loads(bmq("acl", "list", "--principal", "User:carol", "-o", "json",
                              *auth).out)) == 1
    refused = bmq("acl", "remove", *auth, check=False)
    assert refused.code == 2
    # bob may not describe ACLs: the broker answers CLUSTER_AUTHORIZATION_FAILED, which
    # librdkafka 2.16 reports as an empty list; the refusal is audited.
    as_bob = bmq("acl", "list", "-o", "json", "-X", "security.protocol=SASL_PLAINTEXT", "-X",
                 "sasl.mechanism=PLAIN", "-X", f"sasl.username={BOB}", "-X",
                 f"sasl.password={SECRET}", check=False)
    assert json.loads(as_bob.out or "[]") == []
    assert any("denied principal=User:bob" in line and "api=DescribeAcls" in line
               for line in acl_broker.broker.log_text().splitlines())


def test_a_failed_authentication_is_audited(acl_broker: SecureBroker) -> None:
    admin = AdminClient({**conf(acl_broker, BOB), "sasl.password": "wrong"})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    audit = [line for line in acl_broker.broker.log_text().splitlines()
             if "bmq.audit" in line and "authentication-failed" in line]
    assert any("listener=SASL_PLAINTEXT" in line and "bob" in line for line in audit), audit
