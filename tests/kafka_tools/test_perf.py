"""kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh (Kafka 4.4) against `bmq serve`:
they run to the end without errors and report what they did. Small counts: no speed is
asserted here (bench/ compares BMQ with Kafka)."""

from __future__ import annotations

import pytest

from bench.java_perf import ProducerReport, consumer_report, producer_report
from tests.conftest import make_topic_name
from tests.kafka_tools.tools import KafkaTools

RECORDS, RECORD_SIZE = 20_000, 100


def produce_and_consume(kafka: KafkaTools, topic: str, *producer_args: str,
                        consumer_properties: tuple[str, ...] = ()) -> ProducerReport:
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    produced = producer_report(kafka(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", str(RECORDS),
        "--record-size", str(RECORD_SIZE), "--throughput", "-1", *producer_args).out)
    assert produced.records == RECORDS
    assert produced.records_per_s > 0 and produced.mib_per_s > 0
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
