"""kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh (Kafka 4.4) against `bmq serve`:
they run to the end without errors and report what they did. Small counts: no speed is
asserted here (bench/ compares BMQ with Kafka)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from tests.conftest import make_topic_name
from tests.kafka_tools.tools import KafkaTools

RECORDS, RECORD_SIZE = 20_000, 100


@dataclass(frozen=True)
class ProducerReport:
    records: int
    records_per_s: float
    mb_per_s: float
    avg_ms: float
    percentiles_ms: tuple[float, float, float, float]  # 50th, 95th, 99th, 99.9th


def producer_report(text: str) -> ProducerReport:
    """The producer perf test's last line: the totals."""
    match = re.search(
        r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
        r"latency, [\d.]+ ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms "
        r"99th, ([\d.]+) ms 99.9th\.$", text, re.MULTILINE)
    assert match, text
    numbers = [float(g) for g in match.groups()]
    return ProducerReport(int(numbers[0]), numbers[1], numbers[2], numbers[3],
                          (numbers[4], numbers[5], numbers[6], numbers[7]))


def consumer_report(text: str) -> dict[str, str]:
    """The consumer perf test's CSV: its header and the one line of figures."""
    lines = [line for line in text.splitlines() if ", " in line]
    assert len(lines) == 2 and lines[0].startswith("start.time"), text
    return dict(zip(lines[0].split(", "), lines[1].split(", "), strict=True))


def produce_and_consume(kafka: KafkaTools, topic: str, *producer_args: str,
                        consumer_properties: tuple[str, ...] = ()) -> ProducerReport:
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    produced = producer_report(kafka(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", str(RECORDS),
        "--record-size", str(RECORD_SIZE), "--throughput", "-1", *producer_args).out)
    assert produced.records == RECORDS
    assert produced.records_per_s > 0 and produced.mb_per_s > 0
    p50, p95, p99, p999 = produced.percentiles_ms
    assert 0 <= p50 <= p95 <= p99 <= p999
    consumed = consumer_report(kafka(
        "kafka-consumer-perf-test", "--topic", topic, "--num-records", str(RECORDS),
        "--timeout", "60000", *(arg for prop in consumer_properties
                                for arg in ("--command-property", prop))).out)
    assert int(consumed["data.consumed.in.nMsg"]) == RECORDS
    assert float(consumed["data.consumed.in.MB"]) == pytest.approx(
        RECORDS * RECORD_SIZE / 2**20, abs=0.001)
    assert float(consumed["MB.sec"]) > 0 and float(consumed["nMsg.sec"]) > 0
    return produced


def test_producer_and_consumer_perf_tests_complete(kafka: KafkaTools) -> None:
    produce_and_consume(kafka, make_topic_name("perf"), "--command-property", "acks=all")


@pytest.mark.slow
def test_transactional_perf_test_is_read_committed(kafka: KafkaTools) -> None:
    topic = make_topic_name("perf-txn")
    produce_and_consume(kafka, topic, "--transactional-id", f"{topic}-producer",
                        "--transaction-duration-ms", "200",
                        consumer_properties=("isolation.level=read_committed",))
