"""Re-authentication (KIP-368) with connections.max.reauth.ms = 2000: SaslAuthenticate tells
the session's lifetime (the sooner of that and the token's exp); a connection that does not
re-authenticate is closed at its first request after it; one that does goes on, but not as
another principal or with another mechanism; confluent-kafka keeps producing over OAUTHBEARER
and SCRAM across several sessions without an error."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from tests.conftest import BrokerFactory
from tests.integration.kwire import (
    METADATA,
    KafkaWire,
    Reader,
    metadata_body,
    nbytes,
    request_frame,
    string,
)
from tests.security.conftest import (
    PASSWORD,
    USER,
    Certificates,
    SecureBroker,
    oauth_settings,
    secure_broker,
)
from tests.security.tokens import Issuer, client_message

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
REAUTH_MS = 2000


@pytest.fixture(scope="module")
def reauth_broker(module_broker_factory: BrokerFactory, certificates: Certificates,
                  issuer: Issuer) -> Iterator[SecureBroker]:
    yield secure_broker(module_broker_factory, certificates,
                        **oauth_settings(issuer, **{"connections.max.reauth.ms": REAUTH_MS}))


def login(wire: KafkaWire, mechanism: str, auth_bytes: bytes) -> tuple[int, str | None, int]:
    """SaslHandshake v1 and one SaslAuthenticate v1: (error, message, session_lifetime_ms)."""
    assert Reader(wire.request(SASL_HANDSHAKE, 1, string(mechanism))).i16() == 0
    reader = Reader(wire.request(SASL_AUTHENTICATE, 1, nbytes(auth_bytes)))
    error, message = reader.i16(), reader.string()
    reader.nbytes()
    return error, message, reader.i64()


def test_a_client_that_does_not_reauthenticate_is_closed_after_its_session(
        reauth_broker: SecureBroker, issuer: Issuer) -> None:
    with KafkaWire(reauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
        assert login(wire, "OAUTHBEARER", client_message(issuer.token("alice"))) == \
            (0, None, REAUTH_MS)
        wire.metadata([])                        # served within the session
        time.sleep(REAUTH_MS / 1000 + 0.3)
        wire.send_raw(request_frame(METADATA, 1, 99, metadata_body(1, [])))
        assert wire.wait_disconnect() == b""     # Metadata after the end: closed, unanswered
    assert "session-expired principal=User:alice" in reauth_broker.broker.log_text()


def test_reauthentication_extends_the_session_and_keeps_the_principal(
        reauth_broker: SecureBroker, issuer: Issuer) -> None:
    with KafkaWire(reauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
        assert login(wire, "OAUTHBEARER", client_message(issuer.token("alice")))[0] == 0
        for _ in range(3):
            time.sleep(REAUTH_MS / 1000 * 0.6)
            # A token that ends before connections.max.reauth.ms ends the session first.
            # (exp is whole seconds: 0.9 to 1.9 s from now.)
            error, _, lifetime = login(wire, "OAUTHBEARER",
                                       client_message(issuer.token("alice", lifetime_s=1.9)))
            assert error == 0 and 800 <= lifetime <= 1900
            wire.metadata([])
        # Re-authentication may also come after the end (as in Kafka), before other requests.
        time.sleep(2.0)
        assert login(wire, "OAUTHBEARER", client_message(issuer.token("alice")))[::2] == \
            (0, REAUTH_MS)
        wire.metadata([])
    assert reauth_broker.broker.log_text().count("re-authenticated User:alice") >= 4


def test_reauthentication_as_another_principal_or_mechanism_is_refused(
        reauth_broker: SecureBroker, issuer: Issuer) -> None:
    with KafkaWire(reauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
        assert login(wire, "OAUTHBEARER", client_message(issuer.token("alice")))[0] == 0
        error, message, _ = login(wire, "OAUTHBEARER", client_message(issuer.token("bob")))
        assert error == SASL_AUTHENTICATION_FAILED
        assert message == ("Cannot change principals during re-authentication from "
                           "User:alice: User:bob")
        wire.wait_disconnect()
    with KafkaWire(reauth_broker.bootstrap("SASL_PLAINTEXT")) as wire:
        assert login(wire, "PLAIN", f"\0{USER}\0{PASSWORD}".encode())[::2] == (0, REAUTH_MS)
        reader = Reader(wire.request(SASL_HANDSHAKE, 1, string("OAUTHBEARER")))
        assert reader.i16() == UNSUPPORTED_SASL_MECHANISM
        wire.wait_disconnect()
    log = reauth_broker.broker.log_text()
    assert "re-authentication as User:bob, authenticated as User:alice" in log
    assert "re-authentication with 'OAUTHBEARER', authenticated with 'PLAIN'" in log


def _produce_for(config: dict[str, Any], seconds: float) -> tuple[int, list[Any]]:
    """Produce one message every 50 ms for ``seconds``: (delivered, errors of any kind)."""
    errors: list[Any] = []
    delivered = [0]

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is None:
            delivered[0] += 1
        else:
            errors.append(error)

    producer = Producer({**config, "acks": "all", "error_cb": errors.append,
                         "message.timeout.ms": 10000})
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, f"m{sent}".encode(), on_delivery=on_delivery)
        sent += 1
        producer.poll(0.05)
    assert producer.flush(15) == 0
    assert delivered[0] + len(errors) >= sent
    return delivered[0], errors


@pytest.mark.parametrize("mechanism", ["OAUTHBEARER", "SCRAM-SHA-512"])
def test_confluent_kafka_keeps_producing_across_sessions(
        reauth_broker: SecureBroker, issuer: Issuer, certificates: Certificates,
        mechanism: str) -> None:
    def reauthentications() -> int:
        return len(re.findall(rf"re-authenticated User:alice from \S+ on listener \S+ with "
                              rf"{mechanism} ", reauth_broker.broker.log_text()))

    before = reauthentications()
    if mechanism == "OAUTHBEARER":
        config = {"bootstrap.servers": reauth_broker.bootstrap("SASL_PLAINTEXT"),
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                  "oauth_cb": lambda _: (issuer.token("alice"), time.time() + 3600)}
    else:
        config = {"bootstrap.servers": reauth_broker.bootstrap("SASL_SSL"),
                  "security.protocol": "SASL_SSL", "ssl.ca.location": str(certificates.ca),
                  "sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD}
    delivered, errors = _produce_for(config, 4 * REAUTH_MS / 1000)
    assert errors == [] and delivered > 50
    # 8 s of 2 s sessions: librdkafka re-authenticates at 90% of each, so 4 times on the
    # connection it produces on (3 leaves room for a slow start).
    assert reauthentications() - before >= 3, reauth_broker.broker.log_tail()


def test_a_consumer_group_keeps_consuming_across_sessions(reauth_broker: SecureBroker,
                                                          issuer: Issuer) -> None:
    """Fetch long polls, heartbeats and commits in flight while librdkafka re-authenticates."""
    topic, group = f"reauth-c-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": reauth_broker.bootstrap("PLAINTEXT")})
    producer.produce(topic, b"m0")   # the topic exists before the consumer subscribes
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": reauth_broker.bootstrap("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                         "oauth_cb": lambda _: (issuer.token("alice"), time.time() + 3600),
                         "group.id": group, "auto.offset.reset": "earliest",
                         "auto.commit.interval.ms": 200, "error_cb": errors.append})
    consumer.subscribe([topic])
    received: set[bytes] = set()
    sent = 1
    try:
        deadline = time.monotonic() + 4 * REAUTH_MS / 1000
        while time.monotonic() < deadline:
            producer.produce(topic, f"m{sent}".encode())
            producer.poll(0)
            sent += 1
            message = consumer.poll(0.1)
            if message is not None:
                if message.error() is None:
                    received.add(message.value())
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(message.error())
        producer.flush(10)
        expected = {f"m{i}".encode() for i in range(sent)}
        last = time.monotonic() + 20
        while received != expected and time.monotonic() < last:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.add(message.value())
    finally:
        consumer.close()
    assert errors == [] and received == expected
    assert len(re.findall(r"re-authenticated User:alice from \S+ on listener SASL_PLAINTEXT",
                          reauth_broker.broker.log_text())) >= 3
