"""Real clients (confluent-kafka, kafka-python, aiokafka, kcat) over SSL (with and without a
client certificate), SASL_SSL with SCRAM and SASL_PLAINTEXT with PLAIN on one `bmq serve`:
produce, consume in a group, commit."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from typing import Any

from tests.integration.helpers import round_trip_in_a_group
from tests.security.conftest import PASSWORD, USER, Certificates, SecureBroker


def tls_settings(certificates: Certificates, client_cert: bool = False) -> dict[str, Any]:
    settings: dict[str, Any] = {"security.protocol": "SSL",
                                "ssl.ca.location": str(certificates.ca)}
    if client_cert:
        settings["ssl.certificate.location"] = str(certificates.client_cert)
        settings["ssl.key.location"] = str(certificates.client_key)
    return settings


def sasl_settings(protocol: str, mechanism: str, certificates: Certificates,
                  password: str = PASSWORD, user: str = USER) -> dict[str, Any]:
    settings = {"security.protocol": protocol, "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        settings["ssl.ca.location"] = str(certificates.ca)
    return settings


def test_confluent_over_ssl_without_and_with_a_client_certificate(
        secured: SecureBroker, certificates: Certificates) -> None:
    bootstrap = secured.bootstrap("SSL")
    round_trip_in_a_group(bootstrap, 20, settings=tls_settings(certificates))
    round_trip_in_a_group(bootstrap, 20, settings=tls_settings(certificates, client_cert=True))


def test_confluent_over_sasl_ssl_with_scram_sha_512(secured: SecureBroker,
                                                    certificates: Certificates) -> None:
    round_trip_in_a_group(secured.bootstrap("SASL_SSL"), 20,
                          settings=sasl_settings("SASL_SSL", "SCRAM-SHA-512", certificates))
    assert "authenticated User:alice" in secured.broker.log_text()


def test_confluent_over_sasl_plaintext_with_plain(secured: SecureBroker,
                                                  certificates: Certificates) -> None:
    round_trip_in_a_group(secured.bootstrap("SASL_PLAINTEXT"), 20,
                          settings=sasl_settings("SASL_PLAINTEXT", "PLAIN", certificates))


def _kafka_python_round_trip(topic: str, settings: dict[str, Any]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(acks="all", **settings)
    for i in range(10):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"{topic}-group", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **settings)
    sent = {f"v{i}".encode() for i in range(10)}
    values = set()
    for record in consumer:     # until all arrived (15 s without a record: given up)
        values.add(record.value)
        if values >= sent:
            break
    consumer.close()
    assert values == sent


def test_kafka_python_over_sasl_ssl_with_scram(secured: SecureBroker,
                                               certificates: Certificates) -> None:
    _kafka_python_round_trip("kp-sasl", {
        "bootstrap_servers": secured.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
        "ssl_cafile": str(certificates.ca), "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": USER, "sasl_plain_password": PASSWORD})


def test_kafka_python_over_ssl_with_a_client_certificate(secured: SecureBroker,
                                                         certificates: Certificates) -> None:
    _kafka_python_round_trip("kp-ssl", {
        "bootstrap_servers": secured.bootstrap("SSL"), "security_protocol": "SSL",
        "ssl_cafile": str(certificates.ca), "ssl_certfile": str(certificates.client_cert),
        "ssl_keyfile": str(certificates.client_key)})


def test_kcat_over_sasl_plaintext_with_plain(secured: SecureBroker) -> None:
    sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
            "-X", f"sasl.username={USER}", "-X", f"sasl.password={PASSWORD}"]
    bootstrap = ["-b", secured.bootstrap("SASL_PLAINTEXT")]
    subprocess.run(["kcat", *bootstrap, *sasl, "-P", "-t", "kcat-sasl", "-K", ":"],
                   input="k1:one\nk2:two\n", text=True, check=True, timeout=60)
    consumed = subprocess.run(["kcat", *bootstrap, *sasl, "-C", "-t", "kcat-sasl", "-e",
                               "-f", "%k=%s\n"], capture_output=True, text=True, check=True,
                              timeout=60)
    assert sorted(consumed.stdout.split()) == ["k1=one", "k2=two"]


def _aiokafka_round_trip(topic: str, settings: dict[str, Any]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    sent = {f"a{i}".encode() for i in range(10)}

    async def round_trip() -> set[bytes]:
        producer = AIOKafkaProducer(acks="all", **settings)
        await producer.start()
        try:
            for value in sorted(sent):
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"{topic}-group",
                                    auto_offset_reset="earliest", **settings)
        await consumer.start()
        received: set[bytes] = set()
        try:
            while received != sent:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                received |= {record.value for records in batch.values() for record in records}
            await consumer.commit()
        finally:
            await consumer.stop()
        return received

    assert asyncio.run(round_trip()) == sent


def test_aiokafka_group_over_sasl_ssl_with_scram(secured: SecureBroker,
                                                 certificates: Certificates) -> None:
    _aiokafka_round_trip("aio-sasl", {
        "bootstrap_servers": secured.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
        "ssl_context": ssl.create_default_context(cafile=str(certificates.ca))})


def test_aiokafka_group_over_ssl_with_a_client_certificate(secured: SecureBroker,
                                                           certificates: Certificates) -> None:
    context = ssl.create_default_context(cafile=str(certificates.ca))
    context.load_cert_chain(str(certificates.client_cert), str(certificates.client_key))
    _aiokafka_round_trip("aio-ssl", {"bootstrap_servers": secured.bootstrap("SSL"),
                                     "security_protocol": "SSL", "ssl_context": context})
