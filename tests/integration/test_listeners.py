"""Several listeners (Kafka's listeners / advertised.listeners): each client is told the addresses
of the listener it connected on, so one broker serves clients inside and outside a container
network, and a listener BMQ cannot serve stops the start with one clear line."""

from __future__ import annotations

import subprocess

from confluent_kafka.admin import AdminClient

from tests.conftest import BrokerFactory, bmq_command, free_port
from tests.integration.helpers import round_trip_in_a_group


def _two_listeners(broker_factory: BrokerFactory) -> tuple[int, int]:
    internal, external = free_port(), free_port()
    broker_factory(port=internal, env={"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}, config={
        "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        # Different names for the same machine, so the answer shows which listener it is for.
        "advertised_listeners": f"INTERNAL://localhost:{internal},EXTERNAL://127.0.0.1:{external}",
        "inter_broker_listener_name": "INTERNAL",
    })
    return internal, external


def test_each_listener_advertises_its_own_address(broker_factory: BrokerFactory) -> None:
    internal, external = _two_listeners(broker_factory)
    for port, expected in ((internal, ("localhost", internal)),
                           (external, ("127.0.0.1", external))):
        metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        [node] = metadata.brokers.values()
        assert (node.host, node.port) == expected


def test_clients_of_the_second_listener_produce_and_consume_in_a_group(
        broker_factory: BrokerFactory) -> None:
    _, external = _two_listeners(broker_factory)
    bootstrap = f"127.0.0.1:{external}"
    group = round_trip_in_a_group(bootstrap, 10)
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept: its futures need it alive
    coordinator = admin.describe_consumer_groups([group])[group].result(10).coordinator
    assert (coordinator.host, coordinator.port) == ("127.0.0.1", external)


def _serve_error(tmp_path: object, *settings: str) -> subprocess.CompletedProcess[str]:
    env_args = [f"--data-dir={tmp_path}/data"]
    env = {"PATH": "/usr/bin:/bin"}
    for setting in settings:
        key, value = setting.split("=", 1)
        env[key] = value
    return subprocess.run([*bmq_command(), "serve", *env_args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_a_listener_that_cannot_be_served_stops_the_start(tmp_path: object) -> None:
    port = free_port()
    unknown = _serve_error(tmp_path, f"BMQ_LISTENERS=PLAINTEXT://127.0.0.1:{port}",
                           "BMQ_ADVERTISED_LISTENERS=EXTERNAL://example.com:9092")
    assert unknown.returncode != 0
    assert "advertised.listeners names EXTERNAL" in unknown.stderr
    tls = _serve_error(tmp_path, f"BMQ_LISTENERS=SSL://127.0.0.1:{port}")
    # An SSL listener with no key and certificate to serve TLS with.
    assert tls.returncode == 2 and "TLS needs ssl.keystore.location" in tls.stderr
    assert "Traceback" not in unknown.stderr + tls.stderr
