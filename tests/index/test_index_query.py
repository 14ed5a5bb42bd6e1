"""Index Query on `bmq serve`: JSON records produced by confluent-kafka are found by field, by
header and by key, through `bmq query` and the HTTP endpoint, across segments and after a
restart (and a kill -9 mid-build); malformed values are skipped and counted; bad input gets
clear errors and changes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, free_port
from tests.index.helpers import (
    MALFORMED,
    http_get,
    positions,
    produce_orders,
    progress,
    query,
    wait_indexed,
)

FIELDS = ["order_id", "user.id", "header:trace", "key"]


def start_broker(broker_factory: BrokerFactory) -> tuple[BrokerProcess, int]:
    port = free_port()
    broker = broker_factory(config={"metrics_port": port, "log_segment_bytes": 65536})
    return broker, port


def bmq(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
    proc = subprocess.run([*bmq_command(), *args], capture_output=True, text=True, env=env,
                          timeout=60)
    assert not check or proc.returncode == 0, proc.stderr
    return proc


def make_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(15)
    args = [arg for field in FIELDS for arg in ("--field", field)]
    bmq("index", "create", topic, *args, "-b", bootstrap)


def cli_query(port: int, topic: str, *where: str) -> list[dict[str, Any]]:
    args = [arg for term in where for arg in ("--where", term)]
    out = bmq("query", topic, *args, "--limit", "10000", "--http", f"http://127.0.0.1:{port}")
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_found_by_field_header_and_key_across_segments_and_restarts(
        broker_factory: BrokerFactory, topic: str) -> None:
    broker, port = start_broker(broker_factory)
    make_topic(broker.bootstrap, topic)
    sent = produce_orders(broker.bootstrap, topic, range(3000), malformed=4)
    parts = wait_indexed(port, topic, len(sent))
    assert sum(p["malformed_values"] for p in parts) == 4
    assert sum(p["records_indexed"] for p in parts) == len(sent)
    segments = [p for p in (Path(broker.data_dir) / "topics" / topic).glob("*/*.log")]
    assert len(segments) > 3, "the test means to cross segments"

    def check(numbers: range, cli: bool = False) -> None:
        """Found over HTTP (and through `bmq query`, which starts a process per query)."""
        by_header = cli_query if cli else query
        for i in (numbers[0], numbers[1], numbers[len(numbers) // 2], numbers[-1]):
            where = sent[i].partition, sent[i].offset
            # the id as text matches the number 43 and the string "42" alike
            found = query(port, topic, f"order_id={i}")
            assert positions(found) == {where}
            assert json.loads(found[0]["value"])["order_id"] in (i, str(i))
            assert found[0]["headers"] == [["trace", f"t{i}"]]
            assert positions(by_header(port, topic, f"header:trace=t{i}")) == {where}
        keyed = {(s.partition, s.offset) for s in sent.values() if s.number % 50 == 7
                 and s.number >= 0}
        assert positions(by_header(port, topic, "key=k7")) == keyed
        both = {(s.partition, s.offset) for s in sent.values() if s.number >= 0
                and s.number % 50 == 7 and s.number % 13 == 3}
        assert positions(query(port, topic, "key=k7", "user.id=3")) == both
        assert query(port, topic, "order_id=no-such-order") == []

    check(range(3000), cli=True)
    assert query(port, topic, "key=k7", limit=5) == query(port, topic, "key=k7")[:5]

    broker.stop()
    broker.start()
    check(range(3000))               # from the chunks on disk
    sent.update(produce_orders(broker.bootstrap, topic, range(3000, 3400)))
    check(range(3000, 3400))         # the new tail: scanned or indexed, found either way
    wait_indexed(port, topic, len(sent))
    check(range(3000, 3400))


def test_kill_9_mid_build_resumes_without_wrong_answers(
        broker_factory: BrokerFactory, topic: str) -> None:
    broker, port = start_broker(broker_factory)
    make_topic(broker.bootstrap, topic, partitions=2)
    sent = produce_orders(broker.bootstrap, topic, range(20_000))
    time.sleep(0.5)                  # the builder is at work: its first chunks, or in a worker
    os.killpg(broker.pid, signal.SIGKILL)
    broker.proc.wait(10)    # type: ignore[union-attr]
    broker.start()
    wait_indexed(port, topic, len(sent))
    for i in range(0, 20_000, 997):
        assert positions(query(port, topic, f"order_id={i}")) == \
            {(sent[i].partition, sent[i].offset)}
    assert len(query(port, topic, "key=k3")) == 400
    assert not list((Path(broker.data_dir) / "topics" / topic).glob("*/field-index/*/*.tmp.*"))


def test_bad_input_clear_errors_nothing_changed(broker_factory: BrokerFactory,
                                                topic: str) -> None:
    broker, port = start_broker(broker_factory)
    make_topic(broker.bootstrap, topic, partitions=1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for spec in ["order..id", "header:", "a,a", "key,wat ever"]:
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("bmq.index.fields", spec, incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as failure:
            admin.incremental_alter_configs([resource])[resource].result(15)
        assert failure.value.args[0].name() == "INVALID_CONFIG"
        assert "bmq.index.fields" in failure.value.args[0].str()
    described = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([described])[described].result(15)
    assert configs["bmq.index.fields"].value == ",".join(FIELDS)
    refused = bmq("index", "create", topic, "--field", "a b", "-b", broker.bootstrap,
                  check=False)
    assert refused.returncode == 1 and "INVALID_CONFIG" in refused.stderr

    produce_orders(broker.bootstrap, topic, range(10), malformed=1)
    for params, why in [([("where", "order_id")], "FIELD=VALUE"),
                        ([("where", "price=3")], "not an indexed field"),
                        ([], "at least one"),
                        ([("where", "order_id=1"), ("limit", "-1")], "limit"),
                        ([("where", "order_id=1"), ("from", "soon")], "ISO-8601"),
                        ([("where", "order_id=1"), ("x", "1")], "unknown parameter")]:
        status, body = http_get(port, f"/topics/{topic}/query", params)
        assert status == 400 and why in json.loads(body)["error"], body
    status, body = http_get(port, "/topics/no-such-topic/query", [("where", "key=1")])
    assert status == 404 and "unknown topic" in json.loads(body)["error"]
    malformed = bmq("query", topic, "--where", "nope=1", "--http",
                    f"http://127.0.0.1:{port}", check=False)
    assert malformed.returncode == 2 and "not an indexed field" in malformed.stderr
    # the malformed value is counted, and queries still answer around it
    assert sum(p["malformed_values"] for p in wait_indexed(port, topic, 11)) == 1
    assert [r["value"] for r in query(port, topic, "key=bad")] == [MALFORMED.decode()]
    assert len(query(port, topic, "order_id=3")) == 1

    bmq("index", "drop", topic, "--field", "key", "-b", broker.bootstrap)
    time.sleep(2)
    assert [p["indexed_up_to"] for p in progress(port, topic)] == [11]
    dirs = list((Path(broker.data_dir) / "topics" / topic / "0" / "field-index").iterdir())
    assert len(dirs) == len(FIELDS) - 1
    # Dropping every field leaves the config, empty: the topic had an index (see the builder).
    bmq("index", "drop", topic, "-b", broker.bootstrap)
    configs = admin.describe_configs([described])[described].result(15)
    assert configs["bmq.index.fields"].value in ("", None)
    assert not configs["bmq.index.fields"].is_default


@pytest.mark.slow
def test_deleted_records_leave_the_index(broker_factory: BrokerFactory, topic: str) -> None:
    broker, port = start_broker(broker_factory)
    make_topic(broker.bootstrap, topic, partitions=1)
    sent = produce_orders(broker.bootstrap, topic, range(3000))
    wait_indexed(port, topic, len(sent))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cut = TopicPartition(topic, 0, 2000)
    admin.delete_records([cut])[cut].result(15)
    assert query(port, topic, "order_id=1999") == []          # below the log start: gone
    assert positions(query(port, topic, "order_id=2000")) == {(0, 2000)}
    chunks = Path(broker.data_dir) / "topics" / topic / "0" / "field-index"

    def ends() -> list[int]:
        return [int(p.name.split("-")[1].split(".")[0]) for p in chunks.glob("*/*.fidx")]

    deadline = time.monotonic() + 30
    while any(e <= 2000 for e in ends()):   # chunks of deleted data only: removed
        assert time.monotonic() < deadline, sorted(ends())
        time.sleep(0.2)
    assert progress(port, topic)[0]["log_start_offset"] == 2000


def test_http_queries_are_refused_while_acls_are_on(broker_factory: BrokerFactory) -> None:
    port = free_port()
    broker_factory(config={"metrics_port": port, "authorizer_class_name": "acls",
                           "allow_everyone_if_no_acl_found": True})
    status, body = http_get(port, "/topics/any/query", [("where", "key=1")])
    assert status == 403 and "ACLs are on" in json.loads(body)["error"]
