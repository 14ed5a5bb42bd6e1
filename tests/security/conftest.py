"""Fixtures of the security tests: a certificate authority, server and client certificates
(made with the openssl command at the start of the session), and `bmq serve` with SSL and SASL
listeners and a SCRAM user made before it starts (`bmq user add`); an OAuth issuer whose tokens
OAUTHBEARER brokers verify."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, free_port
from tests.security.tokens import AUDIENCE, ISSUER, Issuer

USER, PASSWORD = "alice", "alice-secret"


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server: Path          # key and chain in one PEM (ssl.keystore.location)
    server_key: Path
    server_cert: Path
    client_key: Path
    client_cert: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _signed(directory: Path, name: str, subject: str, ca_key: Path, ca_cert: Path,
            extensions: str) -> tuple[Path, Path]:
    key, csr, cert = (directory / f"{name}.{ext}" for ext in ("key", "csr", "crt"))
    ext_file = directory / f"{name}.ext"
    ext_file.write_text(extensions)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
             "-subj", subject)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
             "-CAcreateserial", "-out", str(cert), "-days", "2", "-sha256",
             "-extfile", str(ext_file))
    return key, cert


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    directory = tmp_path_factory.mktemp("certs")
    ca_key, ca_cert = directory / "ca.key", directory / "ca.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
             "-out", str(ca_cert), "-days", "2", "-subj", "/CN=BMQ test CA")
    server_key, server_cert = _signed(
        directory, "server", "/CN=localhost", ca_key, ca_cert,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    client_key, client_cert = _signed(
        directory, "client", "/O=example/OU=ops/CN=alice", ca_key, ca_cert,
        "extendedKeyUsage=clientAuth\n")
    server = directory / "server.pem"
    server.write_text(server_key.read_text() + server_cert.read_text())
    return Certificates(ca_cert, server, server_key, server_cert, client_key, client_cert)


def add_user(data_dir: str, name: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    subprocess.run([*bmq_command(), "user", "add", name, "--mechanism", mechanism,
                    "--password-stdin", "--data-dir", data_dir], input=password + "\n",
                   text=True, check=True, capture_output=True, timeout=60)


@dataclass
class SecureBroker:
    broker: BrokerProcess
    ports: dict[str, int]

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def secure_broker(factory: BrokerFactory, certificates: Certificates,
                  **settings: Any) -> SecureBroker:
    """`bmq serve` with PLAINTEXT, SSL, SASL_SSL and SASL_PLAINTEXT listeners (SASL_PLAINTEXT
    with PLAIN, SASL_SSL with SCRAM, set per listener as Kafka spells it) and user alice."""
    names = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")
    ports = {name: free_port() for name in names}
    config = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.location": str(certificates.server),
        "ssl.truststore.location": str(certificates.ca),
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "group.initial.rebalance.delay.ms": 0,
        **settings,
    }
    broker = factory(config=config, port=ports["PLAINTEXT"], start=False)
    add_user(broker.data_dir, USER, PASSWORD)
    broker.start()
    return SecureBroker(broker, ports)


@pytest.fixture(scope="module")
def secured(module_broker_factory: BrokerFactory,
            certificates: Certificates) -> Iterator[SecureBroker]:
    yield secure_broker(module_broker_factory, certificates, **{"ssl.client.auth": "requested"})


@pytest.fixture(scope="session")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Issuer:
    """An OAuth issuer: signing keys and the JWKS file brokers verify its tokens with."""
    return Issuer.create(tmp_path_factory.mktemp("issuer"))


def oauth_settings(issuer: Issuer, **settings: Any) -> dict[str, Any]:
    """`secure_broker` settings for OAUTHBEARER (beside PLAIN) on the SASL_PLAINTEXT listener,
    verifying tokens with ``issuer``'s keys, for its audience and from it only."""
    return {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
            "sasl.oauthbearer.jwks.endpoint.url": issuer.url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER, **settings}
