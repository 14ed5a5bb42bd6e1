"""The controller's liveness channel authenticates its peers as the inter-broker listener does
(bmq/controller/liveness.py): on a cluster whose inter-broker listener is SASL_SSL or SSL,

- the brokers still hold their channels: kill -9 of one moves its partitions within about a
  second (the ZooKeeper session timeout is 6 s here, so only the channel is that fast);
- an attacker who knows a broker's id and registration (read from ZooKeeper) and says hello on
  the channel, then closes it, moves nothing: the registration stays (before the channel
  authenticated its peers this deleted the registration and moved every partition);
- a peer with a wrong password, a user without CLUSTER_ACTION, a certificate from another CA
  is refused, and the controller logs a WARN line naming its address.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bmq.broker.membership.channel import authenticated
from bmq.metadata.zookeeper.liveness import read_line, send_line
from bmq.security.link import LinkAuthenticationError, NodeLogin
from tests.cluster.conftest import Cluster, ClusterFactory, cluster_factory, zookeeper
from tests.security.conftest import Certificates, _openssl, _signed
from tests.security.test_cluster_security import (
    ADMIN,
    ALICE,
    MECHANISM,
    PASSWORD,
    _add_user,
    _sasl_ssl,
    _secure_env,
)

__all__ = ["cluster_factory", "zookeeper"]

TOPIC, PARTITIONS = "guarded", 6
# Long enough that a move within CHANNEL_BOUND_S can only come from the channel.
SESSION_TIMEOUT_MS = 6000
CHANNEL_BOUND_S = 3.0


def _topic(conf: dict[str, Any], cluster: Cluster) -> None:
    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(30)
    cluster.wait_writable(TOPIC, {1, 2})


def _registration(cluster: Cluster, broker: int) -> int:
    stat = cluster.zk.exists(cluster.paths.broker(broker))
    return 0 if stat is None else int(stat.czxid)


def _channel_address(cluster: Cluster) -> tuple[str, int]:
    data, _ = cluster.zk.get(cluster.paths.controller)
    host, _, port = str(json.loads(data)["channel"]).rpartition(":")
    return host, int(port)


def _hello(sock: socket.socket, cluster: Cluster, broker: int) -> Any:
    """Say hello for ``broker``'s current registration; the controller's answer (None: it
    closed the channel without one)."""
    try:
        send_line(sock, {"broker": broker, "reg": _registration(cluster, broker)})
        return read_line(sock)
    except (OSError, ValueError):
        return None


def _nothing_moves(cluster: Cluster, broker: int, registration: int,
                   owners: dict[int, int]) -> None:
    time.sleep(2.0)     # the controller removed a registration within ~0.1 s before
    assert _registration(cluster, broker) == registration, cluster.logs()
    assert cluster.owners(TOPIC) == owners


def _refusal_logged(cluster: Cluster, sock_name: tuple[str, int]) -> bool:
    address = f"{sock_name[0]}:{sock_name[1]}"
    text = (cluster.base / "controller0.log").read_text(errors="replace")
    return any("WARNING" in line and "liveness channel" in line and address in line
               for line in text.splitlines())


def _kill_moves_partitions(cluster: Cluster) -> float:
    """kill -9 of broker 2: the seconds until broker 1 has every partition writable."""
    cluster.brokers[2].kill()
    started = time.monotonic()
    cluster.wait_writable(TOPIC, {1}, timeout=30)
    moved = time.monotonic() - started
    print(f"kill -9 -> partitions writable on the survivor: {moved:.2f} s")
    assert moved < CHANNEL_BOUND_S, f"{moved:.2f} s: the channel did not report the death"
    return moved


# ------------------------------------------------------------------ SASL_SSL (SCRAM)
class SaslCluster:
    def __init__(self, cluster: Cluster, certificates: Certificates) -> None:
        self.cluster = cluster
        self.certificates = certificates

    def conf(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.cluster.bootstrap, "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.certificates.ca), "sasl.mechanism": MECHANISM,
                "sasl.username": user, "sasl.password": PASSWORD}

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certificates.ca))


@pytest.fixture
def sasl_cluster(cluster_factory: ClusterFactory,
                 certificates: Certificates) -> Iterator[SaslCluster]:
    env = {**_secure_env(certificates), "BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS": SESSION_TIMEOUT_MS}
    cluster = cluster_factory(brokers=0, env=env)
    for user in (ADMIN, ALICE):
        _add_user(cluster, user)
    for broker_id in (1, 2):
        _sasl_ssl(cluster.add_broker(broker_id, start=False))
        cluster.brokers[broker_id].start()
    secured = SaslCluster(cluster, certificates)
    _topic(secured.conf(ADMIN), cluster)
    yield secured


def test_an_unauthenticated_hello_moves_nothing_and_a_death_still_does(
        sasl_cluster: SaslCluster) -> None:
    cluster = sasl_cluster.cluster
    registration, owners = _registration(cluster, 2), cluster.owners(TOPIC)
    # The attacker knows broker 2's id and registration, and where the channel is.
    with socket.create_connection(_channel_address(cluster), timeout=5) as sock:
        answer = _hello(sock, cluster, 2)
        attacker = sock.getsockname()
    assert answer is None       # no answer: the channel speaks TLS first
    _nothing_moves(cluster, 2, registration, owners)
    assert _refusal_logged(cluster, attacker)
    _kill_moves_partitions(cluster)


@pytest.mark.slow
@pytest.mark.parametrize(("user", "password"), [(ADMIN, "not-the-password"), (ALICE, PASSWORD)],
                         ids=["wrong-password", "no-cluster-action"])
def test_a_peer_without_the_brokers_credentials_is_refused(
        sasl_cluster: SaslCluster, user: str, password: str) -> None:
    """Over TLS too: a wrong password fails SCRAM; alice authenticates, but only principals
    allowed CLUSTER_ACTION (the super user the brokers log in as) may hold a channel."""
    cluster = sasl_cluster.cluster
    registration, owners = _registration(cluster, 2), cluster.owners(TOPIC)
    host, port = _channel_address(cluster)
    login = NodeLogin(sasl_cluster.tls(), MECHANISM, user, password)
    with socket.create_connection((host, port), timeout=5) as plain:
        attacker = plain.getsockname()
        try:
            sock = authenticated(plain, host, login)
        except LinkAuthenticationError:
            assert user == ADMIN        # the wrong password
        else:
            answer = _hello(sock, cluster, 2)
            assert isinstance(answer, dict) and "ok" not in answer and answer["error"], answer
            sock.close()
    _nothing_moves(cluster, 2, registration, owners)
    assert _refusal_logged(cluster, attacker)


@pytest.mark.slow
def test_a_tls_peer_without_sasl_is_refused(sasl_cluster: SaslCluster) -> None:
    """TLS with the cluster's CA, then a hello without logging in."""
    cluster = sasl_cluster.cluster
    registration, owners = _registration(cluster, 2), cluster.owners(TOPIC)
    host, port = _channel_address(cluster)
    with socket.create_connection((host, port), timeout=5) as plain:
        attacker = plain.getsockname()
        with sasl_cluster.tls().wrap_socket(plain, server_hostname=host) as sock:
            answer = _hello(sock, cluster, 2)
    assert not (isinstance(answer, dict) and answer.get("ok")), answer
    _nothing_moves(cluster, 2, registration, owners)
    assert _refusal_logged(cluster, attacker)


# ------------------------------------------------------------------ SSL (client certificates)
NODE_SUBJECT = "/O=bmq/CN=node"


def _node_certificate(certificates: Certificates, directory: Path) -> Path:
    """A certificate every node serves and logs in with (both key usages), from the test CA."""
    ca_key = certificates.ca.parent / "ca.key"
    key, cert = _signed(directory, "node", NODE_SUBJECT, ca_key, certificates.ca,
                        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                        "extendedKeyUsage=serverAuth,clientAuth\n")
    pem = directory / "node.pem"
    pem.write_text(key.read_text() + cert.read_text())
    return pem


def _foreign_certificate(directory: Path) -> Path:
    """The same subject, signed by a CA the cluster does not trust."""
    key, cert = directory / "foreign.key", directory / "foreign.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
             str(cert), "-days", "2", "-subj", NODE_SUBJECT)
    pem = directory / "foreign.pem"
    pem.write_text(key.read_text() + cert.read_text())
    return pem


@pytest.mark.slow
def test_ssl_channels_need_a_trusted_certificate(cluster_factory: ClusterFactory,
                                                 certificates: Certificates,
                                                 tmp_path: Path) -> None:
    node = _node_certificate(certificates, tmp_path)
    env = {"BMQ_LISTENERS": "SSL://127.0.0.1:0",     # the controller's (each node sets its own)
           "BMQ_SSL_KEYSTORE_LOCATION": node, "BMQ_SSL_TRUSTSTORE_LOCATION": certificates.ca,
           "BMQ_SSL_CLIENT_AUTH": "required", "BMQ_AUTHORIZER_CLASS_NAME": "bmq",
           "BMQ_SUPER_USERS": "User:node",
           "BMQ_SSL_PRINCIPAL_MAPPING_RULES": "RULE:^CN=(.*?),O=bmq$/$1/",
           "BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS": SESSION_TIMEOUT_MS}
    cluster = cluster_factory(brokers=0, env=env)
    for broker_id in (1, 2):
        broker = cluster.add_broker(broker_id, start=False)
        broker.env["BMQ_LISTENERS"] = f"SSL://127.0.0.1:{broker.port}"
        broker.start()
    conf = {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(certificates.ca), "ssl.certificate.location": str(node),
            "ssl.key.location": str(node)}
    _topic(conf, cluster)
    registration, owners = _registration(cluster, 2), cluster.owners(TOPIC)
    host, port = _channel_address(cluster)
    for certificate in (_foreign_certificate(tmp_path), None):
        context = client_context_with(certificates.ca, certificate)
        with socket.create_connection((host, port), timeout=5) as plain:
            attacker = plain.getsockname()
            try:
                with context.wrap_socket(plain, server_hostname=host) as sock:
                    answer = _hello(sock, cluster, 2)
            except (ssl.SSLError, OSError):
                answer = None
        assert answer is None
        assert _refusal_logged(cluster, attacker)
    _nothing_moves(cluster, 2, registration, owners)
    _kill_moves_partitions(cluster)


def client_context_with(ca: Path, certificate: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if certificate is not None:
        context.load_cert_chain(str(certificate))
    return context



@pytest.mark.slow
def test_brokers_authenticate_with_the_next_controller(sasl_cluster: SaslCluster) -> None:
    """The active controller stops (SIGTERM): the standby, elected, loads the credentials and
    admits the brokers' channels, so a broker's death is again reported within a second."""
    cluster = sasl_cluster.cluster
    standby = cluster.start_controller()
    first = _channel_address(cluster)
    cluster.controllers[0].terminate()
    cluster.wait_for(lambda: _channel_address(cluster) != first, 30, "the standby elected")
    assert standby.poll() is None
    time.sleep(1.0)     # the brokers find the new channel at once (a watch): a margin
    _kill_moves_partitions(cluster)
    logs = cluster.logs(100_000)
    assert "Traceback" not in logs and "refused" not in logs, logs
