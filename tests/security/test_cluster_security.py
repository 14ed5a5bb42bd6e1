"""Security in cluster mode: brokers and a proxy serving SASL_SSL only, users made in ZooKeeper
before anything starts (`bmq user add --zookeeper`), nodes logging in to each other as the
super user, the proxy acting for its clients' principals.

- Through the proxy the same ACLs hold as on a broker: a WRITE-less principal is refused
  (TOPIC_AUTHORIZATION_FAILED) and nothing is written; a READ-less one cannot fetch (the proxy
  answers Fetch itself); Metadata hides what the principal may not describe.
- ACLs, quotas and users changed through one broker hold at once on every broker and the proxy
  (one ZooKeeper document each, followed by a watch).
- A client cannot use BMQ's internal APIs (the partition watch, acting for someone else), on a
  broker or through the proxy.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
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

from bmq.config import Config
from bmq.net.client import BrokerLink
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import BmqActAsRequest, BmqWatchPartitionsRequest
from bmq.security.link import NodeLogin, ScramClient
from bmq.security.tls import client_context
from tests.cluster.conftest import Cluster, ClusterFactory, cluster_factory, zookeeper
from tests.conftest import BrokerProcess, bmq_command
from tests.proxy.conftest import Proxies, ProxyProcess, proxies
from tests.security.conftest import Certificates

__all__ = ["cluster_factory", "proxies", "zookeeper"]

ADMIN, ALICE, PASSWORD = "admin", "alice", "s3cret-pw"
MECHANISM = "SCRAM-SHA-512"


def _secure_env(certificates: Certificates) -> dict[str, Any]:
    return {
        # The controller's: its liveness channel speaks SASL_SSL as the brokers' inter-broker
        # listener (the port is unused; brokers and proxies set their own, `_sasl_ssl`).
        "BMQ_LISTENERS": "SASL_SSL://127.0.0.1:0",
        "BMQ_SSL_KEYSTORE_LOCATION": certificates.server,
        "BMQ_SSL_TRUSTSTORE_LOCATION": certificates.ca,
        "BMQ_SASL_ENABLED_MECHANISMS": MECHANISM,
        "BMQ_SASL_JAAS_CONFIG": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                f'required username="{ADMIN}" password="{PASSWORD}";',
        "BMQ_AUTHORIZER_CLASS_NAME": "bmq",
        "BMQ_SUPER_USERS": f"User:{ADMIN}",
        "BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": 0,
    }


def _sasl_ssl(node: BrokerProcess) -> None:
    node.env["BMQ_LISTENERS"] = f"SASL_SSL://127.0.0.1:{node.port}"


def _add_user(cluster: Cluster, name: str) -> None:
    subprocess.run([*bmq_command(), "user", "add", name, "--mechanism", MECHANISM,
                    "--password-stdin", "--zookeeper", cluster.zk_server.hosts,
                    "--root", cluster.root], input=PASSWORD + "\n", text=True, check=True,
                   capture_output=True, timeout=60)


class SecureCluster:
    def __init__(self, cluster: Cluster, proxy: ProxyProcess, certificates: Certificates
                 ) -> None:
        self.cluster = cluster
        self.proxy = proxy
        self.certificates = certificates

    def conf(self, user: str, bootstrap: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": bootstrap or self.proxy.bootstrap,
                "security.protocol": "SASL_SSL", "ssl.ca.location": str(self.certificates.ca),
                "sasl.mechanism": MECHANISM, "sasl.username": user, "sasl.password": PASSWORD,
                **extra}

    def admin(self, bootstrap: str | None = None) -> AdminClient:
        return AdminClient(self.conf(ADMIN, bootstrap))


@pytest.fixture
def secure(cluster_factory: ClusterFactory, proxies: Proxies,
           certificates: Certificates) -> Iterator[SecureCluster]:
    cluster = cluster_factory(brokers=0, env=_secure_env(certificates))
    # The super user exists before any node starts, as with Kafka's --add-scram.
    for user in (ADMIN, ALICE):
        _add_user(cluster, user)
    for broker_id in (1, 2):
        _sasl_ssl(cluster.add_broker(broker_id, start=False))
        cluster.brokers[broker_id].start()
    proxy = ProxyProcess(proxies.base / f"proxy-{uuid.uuid4().hex[:6]}", cluster)
    _sasl_ssl(proxy)
    proxies.started.append(proxy)
    proxy.start()
    yield SecureCluster(cluster, proxy, certificates)


def _allow(name: str, operation: AclOperation, principal: str = f"User:{ALICE}",
           resource: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def _create(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(30)


def _produce(conf: dict[str, Any], topic: str, count: int = 1) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    producer = Producer({**conf, "message.timeout.ms": 15000, "acks": "all"})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda e, _m: results.append(e))
    producer.flush(30)
    return results


def _high_watermark(conf: dict[str, Any], topic: str) -> int:
    consumer = Consumer({**conf, "group.id": "hw-" + uuid.uuid4().hex})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1])
    finally:
        consumer.close()


def _consume(conf: dict[str, Any], topic: str, group: str, count: int,
             timeout: float = 30) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    error = None
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and error is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                error = message.error()
            else:
                values.append(message.value())
    finally:
        consumer.close()
    return values, error


def test_acls_hold_through_the_proxy(secure: SecureCluster) -> None:
    admin = secure.admin()
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in ("granted", "secret")]
                                      ).values():
        future.result(30)
    # On "secret" alice may only DESCRIBE: Metadata lets her reach the partition, so it is the
    # broker the proxy forwards her Produce to, and the proxy's own Fetch, that refuse her.
    _create(admin, _allow("granted", AclOperation.WRITE), _allow("granted", AclOperation.READ),
            _allow("secret", AclOperation.DESCRIBE),
            _allow("readers", AclOperation.READ, resource=ResourceType.GROUP))
    alice = secure.conf(ALICE)

    assert _produce(alice, "granted", 5) == [None] * 5
    values, error = _consume(alice, "granted", "readers", 5)
    assert error is None and values == [f"v{i}".encode() for i in range(5)]

    # No WRITE on "secret": refused by the broker the proxy forwards to, nothing written.
    [refused] = _produce(alice, "secret")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _high_watermark(secure.conf(ADMIN), "secret") == 0
    # The broker audits it as alice's, come through the proxy.
    logs = "".join(b.log_text() for b in secure.cluster.brokers.values())
    assert any("denied principal=User:alice client=127.0.0.1 via" in line
               and "api=Produce resource=TOPIC:secret" in line for line in logs.splitlines())
    # The admin (super user) writes it; alice still cannot read it from the proxy.
    assert _produce(secure.conf(ADMIN), "secret") == [None]
    _, error = _consume(alice, "secret", "readers", 1, timeout=20)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Metadata from the proxy lists only what alice may describe.
    for future in admin.create_topics([NewTopic("hidden", 1, 1)]).values():
        future.result(30)
    topics = AdminClient(alice).list_topics(timeout=20).topics
    assert {"granted", "secret"} <= set(topics) and "hidden" not in topics


def test_metadata_changed_on_one_broker_holds_everywhere(secure: SecureCluster) -> None:
    brokers = [b.bootstrap for b in secure.cluster.brokers.values()]
    first = secure.admin(brokers[0])
    for future in first.create_topics([NewTopic("shared", 1, 1)]).values():
        future.result(30)
    # A user made through broker 1 logs in on broker 2 and on the proxy.
    bob = "bob-" + uuid.uuid4().hex[:4]
    upsert = UserScramCredentialUpsertion(bob, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                   8192), PASSWORD.encode())
    for future in first.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    # An ACL made through broker 1 lets bob write through broker 2 and through the proxy.
    _create(first, _allow("shared", AclOperation.WRITE, principal=f"User:{bob}"))
    for bootstrap in (brokers[1], secure.proxy.bootstrap):
        assert _produce(secure.conf(bob, bootstrap), "shared") == [None], bootstrap
    # Deleted through broker 2, it stops holding through broker 1.
    second = secure.admin(brokers[1])
    bob_writes = AclBindingFilter(ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL,
                                  f"User:{bob}", "*", AclOperation.WRITE,
                                  AclPermissionType.ALLOW)
    for future in second.delete_acls([bob_writes]).values():
        assert len(future.result(30)) == 1
    deadline = time.monotonic() + 10
    while True:
        [error] = _produce(secure.conf(bob, brokers[0]), "shared")
        if error is not None or time.monotonic() > deadline:
            break
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


async def _internal_calls(secure: SecureCluster, host: str, port: int) -> list[int]:
    """As alice (not a super user): BmqWatchPartitions and BmqActAs, each on a link of its own;
    the error codes, or -1 where the node closed the connection instead."""
    config = Config(ssl_truststore_location=str(secure.certificates.ca))
    login = NodeLogin(client_context(config, "SASL_SSL"), MECHANISM, ALICE, PASSWORD)
    codes = []
    for request in (BmqWatchPartitionsRequest(max_wait_ms=0, topics=[]),
                    BmqActAsRequest(principal=f"User:{ADMIN}", client_host="127.0.0.1")):
        link = BrokerLink(host, port, "alice", login)
        try:
            codes.append((await link.request(request, 0)).error_code)
        except ConnectionError:
            codes.append(-1)
        finally:
            link.close()
    return codes


def test_clients_cannot_call_internal_apis(secure: SecureCluster) -> None:
    broker = next(iter(secure.cluster.brokers.values()))
    assert asyncio.run(_internal_calls(secure, broker.host, broker.port)) == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
    # A proxy does not serve them at all: it closes the connection.
    assert asyncio.run(_internal_calls(secure, secure.proxy.host, secure.proxy.port)) == [-1, -1]


def test_scram_client_matches_rfc_7677() -> None:
    """The SCRAM client the nodes log in with, against RFC 7677's SCRAM-SHA-256 example."""
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    client._nonce = "rOprNGfwEbeRWgbNEkqO"
    client._first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_bmq_quota_and_txn_over_sasl_ssl(secure: SecureCluster) -> None:
    """`bmq quota` and `bmq txn` speak the wire themselves: with the same -X properties as every
    command they log in over SASL_SSL; a quota set through one broker is listed by another."""
    from tests.cli.conftest import Bmq

    first, second = (b.bootstrap for b in secure.cluster.brokers.values())
    bmq = Bmq(first)
    auth = ["-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanism={MECHANISM}",
            "-X", f"sasl.username={ADMIN}", "-X", f"sasl.password={PASSWORD}",
            "-X", f"ssl.ca.location={secure.certificates.ca}"]
    bmq("quota", "set", "--client-id", "slow", "--producer-byte-rate", "1048576", *auth)
    listed = json.loads(bmq("quota", "list", "-o", "json", *auth, bootstrap=second).out)
    assert listed == [{"user": None, "client_id": "slow", "key": "producer_byte_rate",
                       "value": 1048576.0}]
    assert json.loads(bmq("txn", "list", "-o", "json", *auth).out) == []
    refused = bmq("txn", "list", "-X", "security.protocol=SASL_SSL", "-X",
                  f"sasl.mechanism={MECHANISM}", "-X", f"sasl.username={ADMIN}", "-X",
                  "sasl.password=wrong", "-X", f"ssl.ca.location={secure.certificates.ca}",
                  check=False)
    assert refused.code != 0


def test_the_readme_cluster_example_works(cluster_factory: ClusterFactory, proxies: Proxies,
                                          certificates: Certificates, tmp_path: Path) -> None:
    """The README's cluster-mode security example, as written: the first user made in
    ZooKeeper before any node starts, every node (a broker and a proxy) on its TOML."""
    from tests.security.test_readme_security import _code_blocks, _security_text

    text = _security_text().split("* **Cluster mode**", 1)[1].split("* **Not yet**", 1)[0]
    [(sh_lang, add_admin), (toml_lang, toml)] = _code_blocks(text)
    assert (sh_lang, toml_lang) == ("sh", "toml")
    cluster = cluster_factory(brokers=0)
    args = shlex.split(add_admin.split("|", 1)[1].replace("zk:2181", cluster.zk_server.hosts))
    assert args[:3] == ["bmq", "user", "add"]
    subprocess.run([*bmq_command(), *args[1:], "--root", cluster.root], check=True,
                   input=add_admin.split("'")[1] + "\n", text=True, capture_output=True,
                   timeout=60)
    broker = cluster.add_broker(1, start=False)
    proxy = ProxyProcess(proxies.base / "readme", cluster)
    proxies.started.append(proxy)
    for node in (broker, proxy):
        config = tmp_path / f"node-{node.port}.toml"
        config.write_text(toml.replace("0.0.0.0:9093", f"127.0.0.1:{node.port}")
                          .replace("node.pem", str(certificates.server))
                          .replace("ca.crt", str(certificates.ca)))
        node.extra_args += ["--config", str(config)]
        node.start()
    admin = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_SSL",
             "ssl.ca.location": str(certificates.ca), "sasl.mechanism": MECHANISM,
             "sasl.username": ADMIN, "sasl.password": "admin-secret"}
    client = AdminClient(admin)
    for future in client.create_topics([NewTopic("orders", 1, 1)]).values():
        future.result(30)
    assert _produce(admin, "orders", 3) == [None] * 3
    assert _high_watermark(admin, "orders") == 3
