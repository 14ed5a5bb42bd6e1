"""The `bmq` client commands end to end against a spawned `bmq serve`."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.cli.conftest import Bmq
from tests.conftest import free_port

FORMAT = "{partition}|{offset}|{key}|{value}|{headers}"


def parse_lines(text: str) -> list[tuple[int, int, str, str, str]]:
    rows = []
    for line in text.splitlines():
        partition, offset, key, value, headers = line.split("|")
        rows.append((int(partition), int(offset), key, value, headers))
    return rows


def test_topic_produce_consume_group_lifecycle(bmq: Bmq, topic: str) -> None:
    group = f"{topic}-g"
    bmq("topic", "create", topic, "--partitions", "3", "--config", "retention.ms=3600000")
    listed = json.loads(bmq("topic", "list", "-o", "json").out)
    assert {"topic": topic, "partitions": 3} in listed

    lines = "".join(f"k{i}:value-{i}\n" for i in range(30))
    produced = bmq("produce", topic, "--key-separator", ":", "--header", "source=test",
                   "--header", "run=1", stdin=lines)
    assert "30 messages produced" in produced.err

    described = json.loads(bmq("topic", "describe", topic, "-o", "json").out)
    assert described["partition_count"] == 3
    assert sum(p["high_watermark"] for p in described["partitions"]) == 30
    assert all(p["leader"] == 0 and p["low_watermark"] == 0 for p in described["partitions"])
    configs = {c["name"]: c for c in described["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert not configs["retention.ms"]["default"]
    table = bmq("topic", "describe", topic).out
    assert "retention.ms" in table and "LEADER" in table

    consumed = bmq("consume", topic, "--group", group, "--from-beginning", "--exit-at-end",
                   "--format", FORMAT)
    rows = parse_lines(consumed.out)
    assert sorted((key, value) for _, _, key, value, _ in rows) == sorted(
        (f"k{i}", f"value-{i}") for i in range(30))
    assert all(headers == "source=test,run=1" for *_, headers in rows)
    # Keys decide partitions: one key always lands in the same partition.
    assert len({(key, p) for p, _, key, _, _ in rows}) == 30

    state = json.loads(bmq("group", "describe", group, "-o", "json").out)
    assert state["state"] == "EMPTY"
    assert state["total_lag"] == 0
    assert sum(p["committed_offset"] for p in state["partitions"]) == 30

    bmq("produce", topic, stdin="late-1\nlate-2\nlate-3\nlate-4\n")
    state = json.loads(bmq("group", "describe", group, "-o", "json").out)
    assert state["total_lag"] == 4
    assert all(p["lag"] == p["end_offset"] - p["committed_offset"]
               for p in state["partitions"])
    assert "LAG" in bmq("group", "describe", group).out

    # A dry run changes nothing.
    plan = json.loads(bmq("group", "reset-offsets", group, "--topic", topic, "--to-earliest",
                          "-o", "json").out)
    assert not plan["executed"]
    assert all(p["new_offset"] == 0 for p in plan["partitions"])
    assert json.loads(bmq("group", "describe", group, "-o", "json").out)["total_lag"] == 4

    done = bmq("group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert "reset 3 offsets" in done.err
    assert json.loads(bmq("group", "describe", group, "-o", "json").out)["total_lag"] == 34

    again = bmq("consume", topic, "--group", group, "--exit-at-end", "--format", "{value}")
    values = again.out.splitlines()
    assert sorted(values) == sorted([f"value-{i}" for i in range(30)]
                                    + ["late-1", "late-2", "late-3", "late-4"])
    assert json.loads(bmq("group", "describe", group, "-o", "json").out)["total_lag"] == 0

    groups = json.loads(bmq("group", "list", "-o", "json").out)
    assert any(g["group"] == group for g in groups)
    bmq("group", "delete", group)
    groups = json.loads(bmq("group", "list", "-o", "json").out)
    assert all(g["group"] != group for g in groups)

    bmq("topic", "delete", topic)
    listed = json.loads(bmq("topic", "list", "-o", "json").out)
    assert all(t["topic"] != topic for t in listed)


def test_reset_offsets_to_offset_datetime_and_shift(bmq: Bmq, topic: str) -> None:
    group = f"{topic}-g"
    bmq("topic", "create", topic, "--partitions", "1")
    bmq("produce", topic, stdin="".join(f"m{i}\n" for i in range(10)))
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    bmq("produce", topic, stdin="".join(f"n{i}\n" for i in range(5)))
    bmq("consume", topic, "-g", group, "--from-beginning", "-n", "3")

    def reset(*how: str) -> int:
        doc = json.loads(bmq("group", "reset-offsets", group, "-t", f"{topic}:0", *how,
                             "--execute", "-o", "json").out)
        return int(doc["partitions"][0]["new_offset"])

    assert reset("--to-offset", "7") == 7
    assert reset("--to-offset", "1000") == 15  # kept within earliest..latest
    assert reset("--shift-by", "-5") == 10
    assert reset("--to-datetime", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(middle / 1000))
                 + f".{middle % 1000:03d}Z") == 10
    assert reset("--to-latest") == 15
    assert reset("--to-datetime", "2999-01-01T00:00:00") == 15
    out = bmq("consume", topic, "-g", group, "--exit-at-end").out
    assert out == ""


def test_consume_without_group_max_messages_and_partition(bmq: Bmq, topic: str) -> None:
    bmq("topic", "create", topic, "--partitions", "2")
    bmq("produce", topic, "--partition", "1", stdin="a\nb\nc\n")
    out = bmq("consume", topic, "--from-beginning", "-n", "2", "-F", "{partition}:{value}").out
    assert out.splitlines() == ["1:a", "1:b"]
    out = bmq("consume", topic, "--from-beginning", "-e", "-p", "0").out
    assert out == ""
    out = bmq("consume", topic, "--from-beginning", "-e", "-p", "1",
              "-F", "{offset}\\t{value}").out
    assert out.splitlines() == ["0\ta", "1\tb", "2\tc"]
    # Without a group nothing is committed, so no group shows up.
    groups = json.loads(bmq("group", "list", "-o", "json").out)
    assert not any(g["group"].startswith("bmq-cli-") for g in groups)


def test_alter_config_and_partitions(bmq: Bmq, topic: str) -> None:
    bmq("topic", "create", topic, "-p", "1", "-c", "retention.ms=100000")
    bmq("topic", "alter-config", topic, "--set", "segment.bytes=1048576",
        "--delete", "retention.ms", "--partitions", "3")
    doc = json.loads(bmq("topic", "describe", topic, "-o", "json").out)
    configs = {c["name"]: c for c in doc["configs"]}
    assert configs["segment.bytes"]["value"] == "1048576"
    assert configs["retention.ms"]["default"]
    assert doc["partition_count"] == 3
    bad = bmq("topic", "alter-config", topic, "--set", "no.such.config=1", check=False)
    assert bad.code == 1 and "error:" in bad.err


def test_cluster_info(bmq: Bmq, cli_broker: Any, topic: str) -> None:
    bmq("topic", "create", topic, "-p", "4")
    doc = json.loads(bmq("cluster", "info", "-o", "json").out)
    assert doc["controller"] == 0
    assert doc["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": cli_broker.port,
                               "rack": None, "controller": True}]
    assert doc["topics"] >= 1 and doc["partitions"] >= 4
    assert doc["internal_topics"] == 1
    assert "CONTROLLER" in bmq("cluster", "info").out


# ------------------------------------------------------------------------------- failures

def test_unknown_topic_and_group_fail_with_exit_1(bmq: Bmq, topic: str) -> None:
    for args in (("topic", "describe", topic), ("topic", "delete", topic),
                 ("consume", topic, "--exit-at-end"), ("group", "describe", f"{topic}-nogroup"),
                 ("topic", "alter-config", topic, "--set", "retention.ms=1"),
                 ("group", "reset-offsets", f"{topic}-g", "-t", topic, "--to-earliest")):
        result = bmq(*args, check=False)
        assert result.code == 1, f"{args}: {result}"
        assert "error:" in result.err and "Traceback" not in result.err, result
    assert bmq("topic", "delete", topic, "--if-exists").code == 0


def test_existing_topic_and_bad_partition(bmq: Bmq, topic: str) -> None:
    bmq("topic", "create", topic)
    again = bmq("topic", "create", topic, check=False)
    assert again.code == 1 and "TOPIC_ALREADY_EXISTS" in again.err
    assert bmq("topic", "create", topic, "--if-not-exists").code == 0
    wrong = bmq("produce", topic, "--partition", "5", stdin="x\n", check=False)
    assert wrong.code == 1 and "no partition 5" in wrong.err


def test_failed_delivery_exits_1(bmq: Bmq, topic: str) -> None:
    bmq("topic", "create", topic, "-c", "max.message.bytes=1000")
    first = bmq("produce", topic, stdin="small\n")
    # one message, in the singular (the tools count with common.counted)
    assert "1 message produced" in first.err and "1 messages" not in first.err
    result = bmq("produce", topic, stdin="x" * 5000 + "\n", check=False)
    assert result.code == 1, result
    assert "1 message not delivered" in result.err and "1 messages" not in result.err
    assert "MSG_SIZE_TOO_LARGE" in result.err or "MESSAGE_TOO_LARGE" in result.err
    out = bmq("consume", topic, "--from-beginning", "-e").out
    assert out == "small\n"


def test_lines_without_key_separator_are_rejected(bmq: Bmq, topic: str) -> None:
    result = bmq("produce", topic, "-K", "=", stdin="a=1\nnone\nb=2\n", check=False)
    assert result.code == 1
    assert "line 2" in result.err and "2 messages produced" in result.err


def test_bad_bootstrap_exits_3_within_the_timeout(bmq: Bmq) -> None:
    port = free_port()  # nobody listens there
    for args in (("topic", "list"), ("cluster", "info"), ("produce", "t"), ("consume", "t")):
        started = time.monotonic()
        result = bmq(*args, "--timeout", "1.5", bootstrap=f"127.0.0.1:{port}", stdin="x\n",
                     check=False, subprocess=args[0] == "topic")
        elapsed = time.monotonic() - started
        assert result.code == 3, f"{args}: {result}"
        assert "cannot reach the cluster" in result.err
        assert elapsed < 15, f"{args} took {elapsed:.1f} s"


def test_usage_errors_exit_2(bmq: Bmq, topic: str) -> None:
    for args in (("consume", topic, "--format", "{nope}"),
                 ("group", "reset-offsets", "g", "-t", topic),
                 ("group", "reset-offsets", "g", "-t", topic, "--to-earliest", "--to-latest"),
                 ("topic", "create", topic, "-c", "novalue"),
                 ("topic", "alter-config", topic)):
        result = bmq(*args, check=False)
        assert result.code == 2, f"{args}: {result}"


def test_reset_refused_while_the_group_has_members(bmq: Bmq, topic: str) -> None:
    group = f"{topic}-g"
    bmq("topic", "create", topic)
    bmq("produce", topic, stdin="a\nb\n")
    consumer = Consumer({"bootstrap.servers": bmq.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "broker.address.family": "v4"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        result = bmq("group", "reset-offsets", group, "-t", topic, "--to-earliest", "--execute",
                     check=False)
        assert result.code == 1 and "not empty" in result.err, result
        state = json.loads(bmq("group", "describe", group, "-o", "json").out)
        assert state["state"] == "STABLE" and state["members"] == 1
        assert state["partitions"][0]["consumer_id"]
    finally:
        consumer.close()


@pytest.mark.parametrize("args", [
    (), ("topic",), ("topic", "create"), ("produce",), ("consume",), ("group",),
    ("group", "reset-offsets"), ("cluster", "info"), ("serve",), ("txn",),
])
def test_help_has_examples(args: tuple[str, ...]) -> None:
    import subprocess

    from tests.conftest import bmq_command

    proc = subprocess.run([*bmq_command(), *args, "--help"], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Example" in proc.stdout, proc.stdout
