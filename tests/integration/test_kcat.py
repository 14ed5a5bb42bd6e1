"""kcat (librdkafka 2.0 from Debian) as a user would run it against `bmq serve`."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from .helpers import consume, create_topic

pytestmark = pytest.mark.timeout(90)

KCAT = shutil.which("kcat") or "/usr/bin/kcat"


def kcat(broker, *args, stdin=None, timeout=30):
    cmd = [KCAT, "-b", broker.bootstrap, "-X", "broker.address.family=v4", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, (f"{' '.join(cmd)} exited {proc.returncode}\n"
                                  f"stderr: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")


def test_list_metadata(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=3)
    out, _ = kcat(module_broker, "-L")
    assert f"broker 0 at 127.0.0.1:{module_broker.port}" in out
    assert f'topic "{topic}" with 3 partitions:' in out
    for p in range(3):
        assert f"partition {p}, leader 0, replicas: 0, isrs: 0" in out

    out, _ = kcat(module_broker, "-L", "-J", "-t", topic)
    meta = json.loads(out)
    assert [b["id"] for b in meta["brokers"]] == [0]
    assert meta["brokers"][0]["name"] == f"127.0.0.1:{module_broker.port}"
    (t,) = meta["topics"]
    assert t["topic"] == topic
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
    assert all(p["leader"] == 0 for p in t["partitions"])


def _produce_lines(broker, topic, lines, *extra):
    kcat(broker, "-P", "-t", topic, "-p", "0", "-K:", *extra,
         stdin=("\n".join(lines) + "\n").encode())


def test_produce_keyed_lines_and_consume_with_format(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    lines = [f"key{i}:value number {i}" for i in range(25)]
    _produce_lines(module_broker, topic, lines)
    out, _ = kcat(module_broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
                  "-q", "-f", "%k|%s|%o|%p\\n")
    rows = out.splitlines()
    assert rows == [f"key{i}|value number {i}|{i}|0" for i in range(25)]

    # Reading from an offset in the middle, and a bounded count.
    out, _ = kcat(module_broker, "-C", "-t", topic, "-p", "0", "-o", "20", "-e", "-q",
                  "-f", "%o:%s\\n")
    assert out.splitlines() == [f"{i}:value number {i}" for i in range(20, 25)]
    out, _ = kcat(module_broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", "3",
                  "-q", "-f", "%k\\n")
    assert out.splitlines() == ["key0", "key1", "key2"]


def test_consume_empty_partition_exits(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    out, _ = kcat(module_broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                  timeout=20)
    assert out == ""


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce(module_broker, topic, codec):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    lines = [f"k{i}:{'payload-' * (i % 17)}{i}" for i in range(200)]
    _produce_lines(module_broker, topic, lines, "-X", f"compression.codec={codec}",
                   "-X", "linger.ms=50")
    out, _ = kcat(module_broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                  "-f", "%k:%s\\n")
    assert out.splitlines() == lines
    # The same data through another client, byte for byte.
    got = consume(module_broker.bootstrap, topic, [0], expected=len(lines))[0]
    assert [(m.key + b":" + m.value).decode() for m in got] == lines
