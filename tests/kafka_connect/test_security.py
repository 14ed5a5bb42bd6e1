"""A Kafka Connect worker on BMQ over SASL_SSL (the slow set): SCRAM-SHA-512 as user alice, the
broker's certificate checked against the test CA, for the worker's own clients (its group,
its topics) and its tasks' (producer.*, consumer.*, admin.*), with the security tests'
certificates, listeners and user (tests/security/conftest.py). The checks read back on the
same broker's PLAINTEXT listener."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import BrokerFactory
from tests.kafka_connect.scenarios import copy_a_file_across_a_worker_restart
from tests.kafka_connect.worker import ConnectWorkers
from tests.security.conftest import PASSWORD, USER, Certificates, certificates, secure_broker

__all__ = ["certificates"]


def sasl_ssl(certificates: Certificates) -> dict[str, str]:
    """The client settings, for the worker and, prefixed, for its tasks' clients (Connect
    does not pass the worker's on to them)."""
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                  f'required username="{USER}" password="{PASSWORD}";',
              "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.ca)}
    settings = dict(client)
    for prefix in ("producer", "consumer", "admin"):
        settings.update({f"{prefix}.{key}": value for key, value in client.items()})
    return settings


@pytest.mark.slow
def test_a_worker_over_sasl_ssl(kafka_jars: None, broker_factory: BrokerFactory,
                                certificates: Certificates, connect_workers: ConnectWorkers,
                                tmp_path: Path) -> None:
    secured = secure_broker(broker_factory, certificates)
    copy_a_file_across_a_worker_restart(secured.broker.bootstrap, connect_workers, tmp_path,
                                        worker_bootstrap=secured.bootstrap("SASL_SSL"),
                                        worker_properties=sasl_ssl(certificates))
    assert "authenticated User:alice" in secured.broker.log_text()
