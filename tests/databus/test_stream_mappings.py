"""The stream mappings as the brokers keep and serve them (BmqDescribeDatabusStreams,
BmqAlterDatabusStreams): a bad one is refused with Kafka's error code and nothing is stored,
they survive a restart of `bmq serve` (its meta directory) with their version, an agent that
holds the current version is answered no streams, and only a principal with ALTER_CONFIGS on
the cluster may change them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    ApiVersionsRequest,
    BmqAlterDatabusStreamsRequest,
    BmqDescribeDatabusStreamsRequest,
)
from bmq.protocol.messages.bmq_alter_databus_streams_request import AlterableDatabusStream
from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, free_port, make_topic_name
from tests.databus.mappings import ask, described
from tests.security.conftest import add_user


def stream_entry(name: str, topic: str | None, **fields: Any) -> AlterableDatabusStream:
    return AlterableDatabusStream(name=name, topic=topic, **{
        "partitioner": "key", "compression": None, "linger_ms": -1, "batch_bytes": -1,
        **fields})


def test_a_broker_refuses_a_bad_mapping_and_stores_nothing_of_it(
        cluster: BrokerProcess) -> None:
    good, bad = make_topic_name("good"), make_topic_name("bad")
    before, _ = described(cluster)
    response = ask(cluster, BmqAlterDatabusStreamsRequest(streams=[
        stream_entry(bad, "no such name!"),
        stream_entry(f"{bad}-codec", "t", compression="brotli"),
        stream_entry(f"{bad}-linger", "t", linger_ms=-5),
        stream_entry("bad stream", "t"),
        stream_entry(good, "good-topic", partitioner="sticky", batch_bytes=4096)]))
    assert [(r.name, r.error_code) for r in response.results] == [
        (bad, ErrorCode.INVALID_TOPIC_EXCEPTION), (f"{bad}-codec", ErrorCode.INVALID_CONFIG),
        (f"{bad}-linger", ErrorCode.INVALID_CONFIG),
        ("bad stream", ErrorCode.INVALID_TOPIC_EXCEPTION), (good, ErrorCode.NONE)]
    assert "Invalid topic name" in response.results[0].error_message
    assert "compression: one of none" in response.results[1].error_message
    version, streams = described(cluster)
    assert version == response.version == before + 1
    assert not any(name.startswith(bad) or name == "bad stream" for name in streams)
    assert streams[good] == ("good-topic", "sticky", None, -1, 4096)
    # Asked by an agent that holds this version: no streams, the same version.
    assert described(cluster, version) == (version, {})


def test_mappings_survive_a_restart_of_bmq_serve(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    done = subprocess.run([*bmq_command(), "databus", "map", "kept", "--topic", "kept-v2",
                           "--linger-ms", "5", "-b", broker.bootstrap],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert described(broker) == (1, {"kept": ("kept-v2", "key", None, 5, -1)})
    broker.restart()
    # The version is the document's own: an agent that read version 1 before the restart
    # holds the current mappings.
    assert described(broker) == (1, {"kept": ("kept-v2", "key", None, 5, -1)})
    assert described(broker, 1) == (1, {})


@pytest.mark.slow      # a `bmq serve` with an authorizer and three `bmq databus map`s: 3.5 s
def test_changing_mappings_takes_alter_configs_on_the_cluster(
        broker_factory: BrokerFactory) -> None:
    plain, sasl = free_port(), free_port()
    broker = broker_factory(port=plain, start=False, config={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "authorizer.class.name": "bmq", "super.users": "User:admin"})
    for user in ("admin", "bob"):
        add_user(broker.data_dir, user, f"{user}-secret")
    broker.start()

    def login(user: str) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{sasl}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": f"{user}-secret"}

    def databus_map(user: str, stream: str) -> subprocess.CompletedProcess[str]:
        properties = [flag for key, value in login(user).items() if key != "bootstrap.servers"
                      for flag in ("-X", f"{key}={value}")]
        return subprocess.run([*bmq_command(), "databus", "map", stream, "--topic", "t",
                               "-b", f"127.0.0.1:{sasl}", *properties],
                              capture_output=True, text=True, timeout=30)

    refused = databus_map("bob", "by-bob")
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, \
        refused.stderr
    response = ask(broker, BmqDescribeDatabusStreamsRequest(known_version=-1))   # anonymous
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert databus_map("admin", "by-admin").returncode == 0
    acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                     "User:bob", "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW)
    admin = AdminClient(login("admin"))
    admin.create_acls([acl])[acl].result(10)
    allowed = databus_map("bob", "by-bob")
    assert allowed.returncode == 0, allowed.stderr
    stored = json.loads((Path(broker.data_dir) / "meta" / "databus_streams.json").read_text())
    assert set(stored["streams"]) == {"by-admin", "by-bob"}


def test_api_versions_lists_the_mapping_apis(cluster: BrokerProcess) -> None:
    listed = {api.api_key for api in ask(cluster, ApiVersionsRequest()).api_keys}
    assert {BmqDescribeDatabusStreamsRequest.API_KEY,
            BmqAlterDatabusStreamsRequest.API_KEY} <= listed
