"""Broker settings from a TOML file and BMQ_* environment variables, as clients see them."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest
from confluent_kafka import KafkaError

from . import kwire
from .helpers import admin, consume, produce_all, producer, wait_until

pytestmark = pytest.mark.timeout(60)


def test_toml_num_partitions_applies_to_auto_created_topics(broker_factory, unique_topic):
    broker = broker_factory(config={"num_partitions": 3})
    topic = unique_topic("auto")
    # A producer's metadata request auto-creates the topic with the configured default.
    produce_all(broker.bootstrap, topic, [{"value": b"x", "partition": 2}])
    md = admin(broker.bootstrap).list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 3
    got = consume(broker.bootstrap, topic, [2], expected=1)[2]
    assert got[0].value == b"x"


def test_environment_overrides_toml(broker_factory, unique_topic):
    broker = broker_factory(config={"num_partitions": 3}, env={"BMQ_NUM_PARTITIONS": 5})
    topic = unique_topic("auto")
    with kwire.KafkaWire(broker.bootstrap) as wire:
        topics = wire.metadata([topic], allow_auto_create=True)
        # Kafka may answer LEADER_NOT_AVAILABLE (5) while the new topic is being set up.
        assert topics[topic][0] in (0, 5)
        wait_until(lambda: wire.metadata([topic])[topic] == (0, 5), 10,
                   message="auto-created topic has BMQ_NUM_PARTITIONS=5 partitions")


def test_auto_create_disabled(broker_factory, unique_topic):
    broker = broker_factory(env={"BMQ_AUTO_CREATE_TOPICS_ENABLE": "false"})
    topic = unique_topic("nope")
    with kwire.KafkaWire(broker.bootstrap) as wire:
        topics = wire.metadata([topic], allow_auto_create=True)
        assert topics[topic][0] == kwire.UNKNOWN_TOPIC_OR_PARTITION
    md = admin(broker.bootstrap).list_topics(timeout=10)
    assert topic not in md.topics

    # A producer cannot deliver to the missing topic.
    errors = []
    p = producer(broker.bootstrap, message_timeout_ms=3000, linger_ms=0)
    p.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT,
                                KafkaError._UNKNOWN_TOPIC)
    assert topic not in admin(broker.bootstrap).list_topics(timeout=10).topics


def test_advertised_address_in_metadata(broker_factory, unused_port):
    port = unused_port
    broker = broker_factory(extra_args=["--advertise", f"localhost:{port}"])
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-J", "-m", "5",
                          "-X", "broker.address.family=v4"],
                         capture_output=True, timeout=30, check=False)
    # kcat bootstraps from the listen address, then learns the advertised one.
    meta = json.loads(out.stdout)
    assert [(b["id"], b["name"]) for b in meta["brokers"]] == [(0, f"localhost:{port}")]


def test_bad_settings_fail_fast(broker_factory, tmp_path):
    broker = broker_factory(config={"no_such_setting": 1}, start=False)
    with pytest.raises(RuntimeError) as excinfo:
        broker.start(timeout=15)
    assert "exited with code" in str(excinfo.value)
    assert broker.proc.returncode != 0
    assert "no_such_setting" in broker.log_text()

    broker = broker_factory(env={"BMQ_NUM_PARTITIONS": "many"}, start=False)
    with pytest.raises(RuntimeError):
        broker.start(timeout=15)
    assert broker.proc.returncode != 0
    assert "num_partitions" in broker.log_text().lower()


def test_port_in_use_exits_with_error(tmp_path, bmq_cli):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cmd = [*bmq_cli, "serve", "--data-dir", str(tmp_path / "d"),
               "--listen", f"127.0.0.1:{port}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            raise AssertionError("bmq serve kept running although its port was taken:\n"
                                 + out.decode(errors="replace")[-3000:]) from None
    assert proc.returncode != 0, out.decode(errors="replace")[-3000:]
