"""Kafka's Java client of 0.10.2 (kafka-clients 0.10.2.2 from Maven Central: Produce v2 and
Fetch v3, message format v1, a consumer group's commit) against BMQ (issue #36), both ways with
today's librdkafka: what one writes the other reads, keys, values, offsets and timestamps."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import consume, create_topic, produce_all

REPO = Path(__file__).resolve().parents[2]
# A first build fetches kafka-clients 0.10.2.2 and its codecs (about 2 MB) with Maven.
BUILD_TIMEOUT_S = 600.0
JVM = ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx128m"]
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def legacy_java() -> list[str]:
    """The command that runs bmq.legacy.LegacyClient (built once: scripts/setup.sh --tests)."""
    classpath = subprocess.run([str(REPO / "scripts" / "legacy_java_client.sh"), "classpath"],
                               capture_output=True, text=True, check=True,
                               timeout=BUILD_TIMEOUT_S).stdout.strip()
    return [*JVM, "-cp", classpath, "bmq.legacy.LegacyClient"]


def _run(command: list[str]) -> list[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def _record(i: int) -> tuple[bytes, bytes]:
    """Record i as LegacyClient produces it."""
    return f"key-{i}".encode(), (f"value-{i}" * (i % 50)).encode()


def _decoded(text: str) -> bytes | None:
    return None if text == "-" else base64.b64decode(text)


@pytest.mark.parametrize("codec", ["gzip", pytest.param("snappy", marks=pytest.mark.slow),
                                   pytest.param("lz4", marks=pytest.mark.slow)])
def test_java_0_10_producer_to_todays_consumer(module_broker: Any, topic: str,
                                               legacy_java: list[str], codec: str) -> None:
    create_topic(module_broker.bootstrap, topic)
    acks = _run([*legacy_java, "produce", module_broker.bootstrap, topic, "200", codec])
    assert acks == [f"{i} {BASE_TS + i}" for i in range(200)]
    got = consume(module_broker.bootstrap, topic, expected=200)[0]
    assert [(m.offset, m.key, m.value or b"", m.timestamp) for m in got] == [
        (i, *_record(i), BASE_TS + i) for i in range(200)]


@pytest.mark.slow
def test_todays_producer_to_java_0_10_consumer(module_broker: Any, topic: str,
                                               legacy_java: list[str]) -> None:
    """Idempotent lz4 batches with headers, read by the 0.10 consumer in a group that commits."""
    create_topic(module_broker.bootstrap, topic)
    items = [{"key": _record(i)[0], "value": _record(i)[1], "timestamp": BASE_TS + i,
              "headers": [("h", b"x")]} for i in range(150)]
    produce_all(module_broker.bootstrap, topic, items, compression_type="lz4",
                enable_idempotence=True)
    lines = _run([*legacy_java, "consume", module_broker.bootstrap, topic, "150", "java-010"])
    assert lines[-1] == "committed 150"
    records = [line.split(" ") for line in lines[:-1]]
    assert [(int(o), int(ts), _decoded(k), _decoded(v) or b"") for o, ts, k, v in records] == [
        (i, BASE_TS + i, *_record(i)) for i in range(150)]
