"""SASL OAUTHBEARER with real clients (confluent-kafka, its token from ``oauth_cb``) on `bmq
serve` with ACLs on: a signed token's ``sub`` is the principal ACLs see; an expired token, a
token signed by a key not in the JWKS and one for another audience fail to authenticate and
write nothing; Kafka's error challenge on the wire; unsigned tokens refused unless the unsecured
validator is on, and OAUTHBEARER without a key set refused at start."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import BrokerFactory, bmq_command, free_port
from tests.integration.kwire import KafkaWire, Reader, nbytes, string
from tests.security.conftest import Certificates, SecureBroker, oauth_settings, secure_broker
from tests.security.tokens import Issuer, client_message

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED = 58


@pytest.fixture(scope="module")
def oauth_broker(module_broker_factory: BrokerFactory, certificates: Certificates,
                 issuer: Issuer) -> Iterator[SecureBroker]:
    yield secure_broker(module_broker_factory, certificates, **oauth_settings(
        issuer, **{"authorizer.class.name": "bmq", "super.users": "User:ANONYMOUS"}))


def oauth_conf(secured: SecureBroker, token: Callable[[], str], **extra: Any) -> dict[str, Any]:
    """Client settings that log in with ``token()``; librdkafka is told the token lives an hour
    whatever its exp says (it refuses to use a token it knows is expired)."""
    return {"bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token(), time.time() + 3600), **extra}


def produce_one(config: dict[str, Any], topic: str) -> tuple[KafkaError | None, list[KafkaError]]:
    """(delivery error of one message or None, errors the client reported)."""
    delivered: list[KafkaError | None] = []
    errors: list[KafkaError] = []
    producer = Producer({**config, "message.timeout.ms": 5000, "error_cb": errors.append})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: delivered.append(err))
    producer.flush(15)
    return (delivered[0] if delivered else None), errors


def topics(secured: SecureBroker) -> set[str]:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    return set(admin.list_topics(timeout=10).topics)


def test_the_tokens_subject_is_the_principal(oauth_broker: SecureBroker,
                                             issuer: Issuer) -> None:
    topic, group = f"oauth-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": oauth_broker.bootstrap("PLAINTEXT")})
    for future in admin.create_acls([
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                   operation, AclPermissionType.ALLOW)
        for operation in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE)
    ] + [AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                    AclOperation.READ, AclPermissionType.ALLOW)]).values():
        future.result(30)

    # Signed with the EC key this time: ES256 as well as RS256 (the other tests).
    alice = oauth_conf(oauth_broker, lambda: issuer.token("alice", kid="ec-1"))
    assert produce_one(alice, topic) == (None, [])
    mallory = oauth_conf(oauth_broker, lambda: issuer.token("mallory"))
    denied, _ = produce_one(mallory, topic)
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    consumer = Consumer({**alice, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        message = None
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None and message.value() == b"v"
    finally:
        consumer.close()
    log = oauth_broker.broker.log_text()
    assert "authenticated User:alice" in log and "with OAUTHBEARER" in log
    assert "denied principal=User:mallory" in log


@pytest.mark.parametrize(("case", "reason"), [
    ("expired", "Signature has expired"),
    ("foreign key", "signature verification failed"),
    ("other audience", "Audience doesn't match"),
])
def test_a_refused_token_fails_authentication_and_writes_nothing(
        oauth_broker: SecureBroker, issuer: Issuer, case: str, reason: str) -> None:
    make: dict[str, Callable[[], str]] = {
        "expired": lambda: issuer.token("alice", lifetime_s=-300),
        "foreign key": lambda: issuer.token("alice", key=rsa.generate_private_key(65537, 2048)),
        "other audience": lambda: issuer.token("alice", aud="someone-else"),
    }
    topic = f"never-{uuid.uuid4().hex[:6]}"
    delivered, errors = produce_one(oauth_conf(oauth_broker, make[case]), topic)
    assert delivered is not None, "a message was delivered"
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert any("invalid_token" in error.str() for error in errors), errors
    assert topic not in topics(oauth_broker)
    log = oauth_broker.broker.log_text()
    assert "authentication-failed client=127.0.0.1:" in log
    assert f"mechanism=OAUTHBEARER reason=\"token refused: {reason}" in log or \
        f"mechanism=OAUTHBEARER reason='token refused: {reason}" in log


def _authenticate(wire: KafkaWire, auth_bytes: bytes) -> tuple[int, str | None, bytes | None]:
    reader = Reader(wire.request(SASL_AUTHENTICATE, 1, nbytes(auth_bytes)))
    return reader.i16(), reader.string(), reader.nbytes()


def test_the_error_challenge_on_the_wire(oauth_broker: SecureBroker, issuer: Issuer) -> None:
    """RFC 7628 3.2.2 as Kafka does it: the refused token is answered with no error and the
    JSON status as server challenge; the client's 0x01 is answered SASL_AUTHENTICATION_FAILED
    with that JSON as message, and the connection closes."""
    with KafkaWire(oauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
        assert Reader(wire.request(SASL_HANDSHAKE, 1, string("OAUTHBEARER"))).i16() == 0
        expired = client_message(issuer.token("alice", lifetime_s=-300))
        assert _authenticate(wire, expired) == (0, None, b'{"status":"invalid_token"}')
        assert _authenticate(wire, b"\x01") == (SASL_AUTHENTICATION_FAILED,
                                                '{"status":"invalid_token"}', b"")
        wire.wait_disconnect()


def test_without_max_reauth_the_session_lasts_as_long_as_the_token(
        oauth_broker: SecureBroker, issuer: Issuer) -> None:
    """Kafka's lifetime with connections.max.reauth.ms 0: the token's, for OAUTHBEARER only."""
    with KafkaWire(oauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
        assert Reader(wire.request(SASL_HANDSHAKE, 1, string("OAUTHBEARER"))).i16() == 0
        reader = Reader(wire.request(SASL_AUTHENTICATE, 1, nbytes(
            client_message(issuer.token("alice", lifetime_s=600)))))
        assert (reader.i16(), reader.string(), reader.nbytes()) == (0, None, b"")
        assert 590_000 <= reader.i64() <= 600_000
    with KafkaWire(oauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
        assert Reader(wire.request(SASL_HANDSHAKE, 1, string("PLAIN"))).i16() == 0
        reader = Reader(wire.request(SASL_AUTHENTICATE, 1, nbytes(b"\0alice\0alice-secret")))
        assert (reader.i16(), reader.string(), reader.nbytes(), reader.i64()) == \
            (0, None, b"", 0)


def test_a_malformed_message_or_a_foreign_authorization_id_fails_at_once(
        oauth_broker: SecureBroker, issuer: Issuer) -> None:
    for message in (b"n,,\x01auth=Basic YWxpY2U=\x01\x01",
                    client_message(issuer.token("alice"), authzid="admin")):
        with KafkaWire(oauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
            assert Reader(wire.request(SASL_HANDSHAKE, 1, string("OAUTHBEARER"))).i16() == 0
            error, text, _ = _authenticate(wire, message)
            assert error == SASL_AUTHENTICATION_FAILED and text
            wire.wait_disconnect()


def _unsecured_conf(bootstrap: str) -> dict[str, Any]:
    # librdkafka's own unsigned token (alg none) for principal alice: no oauth_cb.
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=alice"}


def test_unsigned_tokens_are_refused_unless_the_unsecured_validator_is_on(
        oauth_broker: SecureBroker, broker_factory: BrokerFactory,
        certificates: Certificates) -> None:
    topic = f"unsigned-{uuid.uuid4().hex[:6]}"
    delivered, errors = produce_one(_unsecured_conf(oauth_broker.bootstrap("SASL_PLAINTEXT")),
                                    topic)
    assert delivered is not None
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert "the unsecured validator" not in oauth_broker.broker.log_text()
    assert "token refused: signing algorithm 'none' is not accepted" in \
        oauth_broker.broker.log_text()
    assert topic not in topics(oauth_broker)

    unsecured = secure_broker(broker_factory, certificates, **{
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl_oauthbearer_unsecured_validator_enable": True})
    assert produce_one(_unsecured_conf(unsecured.bootstrap("SASL_PLAINTEXT")), topic) == \
        (None, [])
    log = unsecured.broker.log_text()
    assert "OAUTHBEARER accepts UNSIGNED tokens" in log and "authenticated User:alice" in log


def test_oauthbearer_without_keys_is_refused_at_start(tmp_path: Any) -> None:
    result = subprocess.run(
        [*bmq_command(), "serve", "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin",
             "BMQ_LISTENERS": f"SASL_PLAINTEXT://127.0.0.1:{free_port()}",
             "BMQ_SASL_ENABLED_MECHANISMS": "OAUTHBEARER"})
    assert result.returncode == 2, result.stderr
    assert "OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url" in result.stderr
    assert "Traceback" not in result.stderr
