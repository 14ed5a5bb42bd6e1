"""The liveness channel's authentication, both ends over real sockets (a real ZooKeeper keeps
the credentials): the controller's ``ChannelSecurity`` admits a broker that logs in as the
inter-broker user and refuses anyone else; the broker (``authenticated``) refuses a controller
that cannot prove it is one (a certificate from another CA, a SCRAM signature it could not have
made). Settings the channel cannot be secured with stop the controller's start."""

from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from bmq.broker.membership.channel import UNANSWERED_RETRIES, ControllerChannel, authenticated
from bmq.config import Config
from bmq.controller.liveness import ChannelSecurity, Refused, channel_security
from bmq.metadata.credentials import CredentialStore
from bmq.metadata.zookeeper.documents import ZkDocuments
from bmq.metadata.zookeeper.layout import Paths
from bmq.metadata.zookeeper.liveness import read_line, send_line
from bmq.security import scram
from bmq.security.link import LinkAuthenticationError, NodeLogin
from bmq.startup import StartupError
from tests.cluster.conftest import zk, zookeeper
from tests.security.conftest import Certificates, _openssl

__all__ = ["zk", "zookeeper"]

MECHANISM, USER, PASSWORD = "SCRAM-SHA-512", "node", "node-secret"
HELLO = {"broker": 1, "reg": 42}


def _sasl_config(**settings: Any) -> Config:
    return Config(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms=MECHANISM,
                  **settings)


@pytest.fixture
def controller_security(zk: tuple[KazooClient, Paths]) -> ChannelSecurity:
    """A SASL_PLAINTEXT channel's security, the user ``node`` made in ZooKeeper."""
    client, paths = zk
    CredentialStore(ZkDocuments(client, paths)).load().alter(
        [], [(USER, scram.make_credential(MECHANISM, PASSWORD))])
    security = channel_security(_sasl_config())
    assert security is not None
    security.load(client, paths)
    return security


class Peer:
    """One end of a TCP connection served by ``serve`` on a thread; its outcome in ``result``."""

    def __init__(self, serve: Callable[[socket.socket], Any]) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = self._server.getsockname()
        self.result: Any = None
        self._serve = serve
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn, _ = self._server.accept()
        conn.settimeout(5)
        try:
            self.result = self._serve(conn)
        except Exception as error:
            self.result = error
        finally:
            conn.close()

    def outcome(self) -> Any:
        self._thread.join(10)
        self._server.close()
        return self.result


def _controller(security: ChannelSecurity) -> Peer:
    def serve(conn: socket.socket) -> Any:
        sock, hello = security.authenticate(conn)
        with sock:
            send_line(sock, {"ok": True})
            return hello
    return Peer(serve)


def _broker(address: tuple[str, int], login: NodeLogin | None) -> Any:
    """Log in, say hello: the controller's answer."""
    sock = authenticated(socket.create_connection(address, timeout=5), address[0], login)
    with sock:
        send_line(sock, HELLO)
        return read_line(sock)


def test_plaintext_leaves_the_channel_open() -> None:
    assert channel_security(Config(listeners="PLAINTEXT://127.0.0.1:0")) is None


def test_ssl_without_a_truststore_stops_the_controller(certificates: Certificates) -> None:
    """On SSL the client certificate is the only proof: the channel asks for one whatever
    ssl.client.auth says, so it needs the CA certificates to check it with."""
    config = Config(listeners="SSL://127.0.0.1:0", ssl_keystore_location=str(certificates.server))
    with pytest.raises(StartupError, match=r"ssl\.truststore\.location"):
        channel_security(config)


def test_ssl_channels_require_a_client_certificate(certificates: Certificates) -> None:
    """Even with ssl.client.auth=none: without SASL a certificate is the only proof."""
    security = channel_security(Config(
        listeners="SSL://127.0.0.1:0", ssl_keystore_location=str(certificates.server),
        ssl_truststore_location=str(certificates.ca), ssl_client_auth="none"))
    assert security is not None
    anonymous = NodeLogin(ssl.create_default_context(cafile=str(certificates.ca)))
    with_certificate = NodeLogin(ssl.create_default_context(cafile=str(certificates.ca)))
    assert with_certificate.ssl is not None
    with_certificate.ssl.load_cert_chain(str(certificates.client_cert),
                                         str(certificates.client_key))
    controller = _controller(security)
    with pytest.raises((OSError, ValueError)):
        if _broker(controller.address, anonymous) is None:
            raise ConnectionError("closed without an answer")
    assert isinstance(controller.outcome(), ssl.SSLError)
    controller = _controller(security)
    assert _broker(controller.address, with_certificate) == {"ok": True}
    assert controller.outcome() == HELLO


def test_the_inter_broker_user_is_admitted(controller_security: ChannelSecurity) -> None:
    controller = _controller(controller_security)
    assert _broker(controller.address, NodeLogin(None, MECHANISM, USER, PASSWORD)) == \
        {"ok": True}
    assert controller.outcome() == HELLO


@pytest.mark.parametrize("login", [NodeLogin(None, MECHANISM, USER, "wrong"),
                                   NodeLogin(None, MECHANISM, "nobody", PASSWORD), None],
                         ids=["wrong-password", "unknown-user", "no-login"])
def test_anyone_else_is_refused(controller_security: ChannelSecurity,
                                login: NodeLogin | None) -> None:
    controller = _controller(controller_security)
    try:
        answer = _broker(controller.address, login)
    except LinkAuthenticationError:
        answer = None
    assert answer is None or "error" in answer
    assert isinstance(controller.outcome(), Refused)


def test_the_broker_checks_the_controllers_scram_signature() -> None:
    """A controller that does not hold the user's credential cannot sign the exchange: the
    broker stops before it says hello."""
    def impostor(conn: socket.socket) -> Any:
        request = read_line(conn)
        send_line(conn, {"error": 0, "mechanisms": [request["mechanism"]]})
        exchange = scram.ScramExchange(MECHANISM)
        exchange.client_first(base64.b64decode(read_line(conn)["auth"]))
        guessed = scram.make_credential(MECHANISM, "a guess")
        send_line(conn, {"error": 0, "auth": base64.b64encode(
            exchange.server_first(guessed)).decode()})
        read_line(conn)     # the client's proof, not checked: the impostor lets anyone in
        send_line(conn, {"error": 0, "auth": base64.b64encode(b"v=" + bytes(64)).decode()})
        return read_line(conn)      # a hello, if the broker were fooled

    controller = Peer(impostor)
    with pytest.raises(LinkAuthenticationError, match="signature does not match"):
        _broker(controller.address, NodeLogin(None, MECHANISM, USER, PASSWORD))
    assert controller.outcome() is None


@pytest.fixture
def foreign_keystore(tmp_path: Path) -> Iterator[Path]:
    key, cert = tmp_path / "foreign.key", tmp_path / "foreign.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
             str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext",
             "subjectAltName=IP:127.0.0.1")
    pem = tmp_path / "foreign.pem"
    pem.write_text(key.read_text() + cert.read_text())
    yield pem


def test_the_broker_checks_the_controllers_certificate(certificates: Certificates,
                                                        foreign_keystore: Path) -> None:
    """The broker trusts the cluster's CA only: a controller with any other certificate gets
    no hello (and one of the CA's does)."""
    trusting = ssl.create_default_context(cafile=str(certificates.ca))
    for keystore, trusted in ((foreign_keystore, False), (certificates.server, True)):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(keystore))

        def serve(conn: socket.socket, context: ssl.SSLContext = context) -> Any:
            with context.wrap_socket(conn, server_side=True) as sock:
                hello = read_line(sock)
                send_line(sock, {"ok": True})
                return hello

        controller = Peer(serve)
        if trusted:
            assert _broker(controller.address, NodeLogin(trusting)) == {"ok": True}
            assert controller.outcome() == HELLO
        else:
            with pytest.raises(ssl.SSLCertVerificationError):
                _broker(controller.address, NodeLogin(trusting))
            assert isinstance(controller.outcome(), ssl.SSLError)


class Refusing:
    """A controller's channel that reads each hello and answers it with ``answer`` (None:
    closes it unanswered); published in ZooKeeper as the active controller's."""

    def __init__(self, zk: tuple[KazooClient, Paths], answer: dict[str, Any] | None) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._answer = answer
        self.hellos = 0
        client, paths = zk
        host, port = self._server.getsockname()
        client.create(paths.controller, json.dumps({"channel": f"{host}:{port}"}).encode())
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                if read_line(conn) is not None:
                    self.hellos += 1
                    if self._answer is not None:
                        send_line(conn, self._answer)

    def close(self) -> None:
        self._server.close()


@pytest.mark.parametrize(("answer", "hellos"), [
    ({"error": 31, "message": "User:x may not CLUSTER_ACTION"}, 3),
    (None, UNANSWERED_RETRIES + 3)], ids=["refused", "unanswered"])
def test_a_refusing_controller_is_reported_once_and_takes_nothing(
        zk: tuple[KazooClient, Paths], answer: dict[str, Any] | None, hellos: int,
        caplog: pytest.LogCaptureFixture) -> None:
    """A refusal is not "your registration is gone": the broker keeps its partitions (it
    did, before refusals existed, for any answer without "ok"), keeps acknowledging, tries
    again every second and says why once."""
    client, paths = zk
    controller = Refusing(zk, answer)
    gone: list[bool] = []
    channel = ControllerChannel(client, paths, 1, lambda: 42, lambda: gone.append(True))
    with caplog.at_level(logging.DEBUG, logger="bmq.broker.membership.channel"):
        channel.start()
        try:
            deadline = time.monotonic() + 20
            while controller.hellos < hellos and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            channel.stop()
            controller.close()
    assert controller.hellos >= hellos and not gone and not channel.suspended
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "cannot authenticate with the controller" in warnings[0].getMessage()
