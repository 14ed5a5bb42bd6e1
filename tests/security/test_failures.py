"""What a client that cannot authenticate, or does not speak TLS, gets: Kafka's error, a closed
connection and nothing else; and what garbage does to the broker: nothing, others keep working."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from tests.integration.helpers import round_trip_in_a_group
from tests.integration.kwire import (
    API_VERSIONS,
    METADATA,
    KafkaWire,
    Reader,
    metadata_body,
    nbytes,
    request_frame,
    string,
)
from tests.security.conftest import Certificates, SecureBroker
from tests.security.test_clients import sasl_settings, tls_settings

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33


def _handshake(wire: KafkaWire, mechanism: str) -> tuple[int, list[str]]:
    reader = Reader(wire.request(SASL_HANDSHAKE, 1, string(mechanism)))
    error = reader.i16()
    return error, [str(name) for name in reader.array(Reader.string) or []]


def _authenticate(wire: KafkaWire, auth_bytes: bytes) -> tuple[int, str | None]:
    reader = Reader(wire.request(SASL_AUTHENTICATE, 1, nbytes(auth_bytes)))
    return reader.i16(), reader.string()


def _topics(secured: SecureBroker) -> set[str]:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    return set(admin.list_topics(timeout=10).topics)


def test_a_wrong_password_is_an_authentication_error_and_nothing_is_written(
        secured: SecureBroker, certificates: Certificates) -> None:
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": secured.bootstrap("SASL_SSL"),
                         **sasl_settings("SASL_SSL", "SCRAM-SHA-512", certificates,
                                         password="wrong"),
                         "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce("never-written", b"x")
    producer.flush(10)
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert "never-written" not in _topics(secured)


def test_a_wrong_plain_password_answers_sasl_authentication_failed_and_closes(
        secured: SecureBroker) -> None:
    with KafkaWire(secured.bootstrap("SASL_PLAINTEXT")) as wire:
        assert _handshake(wire, "PLAIN") == (0, ["PLAIN"])
        error, message = _authenticate(wire, b"\0alice\0wrong-password")
        assert error == SASL_AUTHENTICATION_FAILED and message and "PLAIN" in message
        wire.wait_disconnect()


def test_a_mechanism_not_enabled_on_the_listener_is_refused_and_closes(
        secured: SecureBroker) -> None:
    with KafkaWire(secured.bootstrap("SASL_PLAINTEXT")) as wire:
        assert _handshake(wire, "SCRAM-SHA-512") == (UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
        wire.wait_disconnect()


def test_an_unknown_scram_user_fails_on_its_first_message(secured: SecureBroker,
                                                          certificates: Certificates) -> None:
    context = ssl.create_default_context(cafile=str(certificates.ca))
    with KafkaWire(secured.bootstrap("SASL_SSL")) as wire:
        wire.sock = context.wrap_socket(wire.sock, server_hostname="localhost")
        assert _handshake(wire, "SCRAM-SHA-512") == (0, ["SCRAM-SHA-256", "SCRAM-SHA-512"])
        error, _ = _authenticate(wire, b"n,,n=mallory,r=abcdefgh")
        assert error == SASL_AUTHENTICATION_FAILED
        wire.wait_disconnect()


def test_requests_before_authentication_close_the_connection(secured: SecureBroker) -> None:
    with KafkaWire(secured.bootstrap("SASL_PLAINTEXT")) as wire:
        assert API_VERSIONS in wire.api_versions()     # served before authentication
        # Served, this Metadata request would create the topic (auto-creation is on).
        wire.send_raw(request_frame(METADATA, 1, 7, metadata_body(1, ["sneaky"])))
        assert wire.wait_disconnect() == b""
    assert "sneaky" not in _topics(secured)


def test_a_plaintext_client_on_a_tls_port_is_disconnected_and_others_keep_working(
        secured: SecureBroker, certificates: Certificates) -> None:
    with KafkaWire(secured.bootstrap("SSL")) as wire:
        wire.send_raw(struct.pack(">ihhih", 6, API_VERSIONS, 0, 1, -1))
        received = wire.wait_disconnect()
        assert received == b"" or received[0] == 0x15, received   # a TLS alert at most
    round_trip_in_a_group(secured.bootstrap("SSL"), 5, settings=tls_settings(certificates))


def test_garbage_tls_and_sasl_handshakes_do_not_hurt_the_broker(
        secured: SecureBroker, certificates: Certificates) -> None:
    silent = socket.create_connection(("127.0.0.1", secured.ports["SASL_SSL"]))  # never speaks
    try:
        for seed in range(20):
            port = secured.ports["SSL" if seed % 2 else "SASL_SSL"]
            # (1 s: a record whose random length exceeds what was sent is waited for, as
            # TLS does; the broker must not crash either way.)
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                # A TLS record header (handshake, TLS 1.2) followed by random bytes.
                sock.sendall(b"\x16\x03\x03" + os.urandom(200 + seed * 37))
                _drain(sock)
        for seed in range(20):
            with KafkaWire(secured.bootstrap("SASL_PLAINTEXT")) as wire:
                assert _handshake(wire, "PLAIN")[0] == 0
                wire.send_raw(struct.pack(">ihhih", 10 + 4 + seed, SASL_AUTHENTICATE, 1, 9, -1)
                              + struct.pack(">i", seed) + os.urandom(seed))
                wire.wait_disconnect()
        round_trip_in_a_group(secured.bootstrap("SASL_SSL"), 5,
                              settings=sasl_settings("SASL_SSL", "SCRAM-SHA-512", certificates))
    finally:
        silent.close()
    assert secured.broker.is_running()
    assert "Traceback" not in secured.broker.log_text()


def _drain(sock: socket.socket) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if not sock.recv(4096):
                return
        except (ConnectionResetError, TimeoutError):
            return
    raise AssertionError("the broker kept a garbage TLS connection open")
