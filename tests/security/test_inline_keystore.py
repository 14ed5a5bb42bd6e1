"""The keystore given inline (`ssl.keystore.key` and `ssl.keystore.certificate.chain`, here as
environment variables holding PEM text): clients connect over SSL, and DescribeConfigs never
shows the private key."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource

from tests.conftest import BrokerFactory, free_port
from tests.integration.helpers import round_trip_in_a_group
from tests.security.conftest import Certificates
from tests.security.test_clients import tls_settings


def test_inline_pem_keystore_serves_tls_and_is_not_described(
        broker_factory: BrokerFactory, certificates: Certificates) -> None:
    plaintext, tls = free_port(), free_port()
    broker_factory(port=plaintext, env={
        "BMQ_LISTENERS": f"PLAINTEXT://127.0.0.1:{plaintext},SSL://127.0.0.1:{tls}",
        "BMQ_SSL_KEYSTORE_KEY": certificates.server_key.read_text(),
        "BMQ_SSL_KEYSTORE_CERTIFICATE_CHAIN": certificates.server_cert.read_text(),
        "BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"})
    round_trip_in_a_group(f"127.0.0.1:{tls}", 5, settings=tls_settings(certificates))
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plaintext}"})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["ssl.keystore.key"].value == "(set, hidden)"
    assert configs["ssl.keystore.certificate.chain"].value.startswith("-----BEGIN CERTIFICATE")
    assert not any("PRIVATE KEY" in (entry.value or "") for entry in configs.values())
