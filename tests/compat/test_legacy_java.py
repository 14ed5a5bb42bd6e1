"""Kafka's Java clients of old eras (kafka-clients from Maven Central) against BMQ (issue #36),
both ways with today's librdkafka: what one writes the other reads, keys, values, offsets and
timestamps, and the old consumer's group commit. 0.10.2.2 speaks Produce v2 and Fetch v3
(message format v1); 0.11 to 2.8 write v2 batches with the API versions of their time."""

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


# The eras tested (scripts/setup.sh --tests builds them all); 0.10.2.2 with gzip in CI.
VERSIONS = ["0.10.2.2", "0.11.0.3", "1.1.1", "2.0.1", "2.8.2"]
PRODUCER_CASES = [
    ("0.10.2.2", "gzip"),
    *(pytest.param("0.10.2.2", codec, marks=pytest.mark.slow) for codec in ("snappy", "lz4")),
    *(pytest.param(version, "gzip", marks=pytest.mark.slow) for version in VERSIONS[1:])]


def legacy_java(version: str) -> list[str]:
    """The command that runs bmq.legacy.LegacyClient of kafka-clients ``version``."""
    classpath = subprocess.run(
        [str(REPO / "scripts" / "legacy_java_client.sh"), "classpath", version],
        capture_output=True, text=True, check=True, timeout=BUILD_TIMEOUT_S).stdout.strip()
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


@pytest.mark.parametrize(("version", "codec"), PRODUCER_CASES)
def test_old_java_producer_to_todays_consumer(module_broker: Any, topic: str, version: str,
                                              codec: str) -> None:
    create_topic(module_broker.bootstrap, topic)
    acks = _run([*legacy_java(version), "produce", module_broker.bootstrap, topic, "200", codec])
    assert acks == [f"{i} {BASE_TS + i}" for i in range(200)]
    got = consume(module_broker.bootstrap, topic, expected=200)[0]
    assert [(m.offset, m.key, m.value or b"", m.timestamp) for m in got] == [
        (i, *_record(i), BASE_TS + i) for i in range(200)]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_todays_producer_to_old_java_consumer(module_broker: Any, topic: str,
                                              version: str) -> None:
    """Idempotent lz4 batches with headers, read by the old consumer in a group that commits."""
    create_topic(module_broker.bootstrap, topic)
    items = [{"key": _record(i)[0], "value": _record(i)[1], "timestamp": BASE_TS + i,
              "headers": [("h", b"x")]} for i in range(150)]
    produce_all(module_broker.bootstrap, topic, items, compression_type="lz4",
                enable_idempotence=True)
    lines = _run([*legacy_java(version), "consume", module_broker.bootstrap, topic, "150",
                  f"java-{version}"])
    assert lines[-1] == "committed 150"
    records = [line.split(" ") for line in lines[:-1]]
    assert [(int(o), int(ts), _decoded(k), _decoded(v) or b"") for o, ts, k, v in records] == [
        (i, BASE_TS + i, *_record(i)) for i in range(150)]
