"""kafka-console-producer.sh, kafka-console-consumer.sh, kafka-get-offsets.sh and
kafka-delete-records.sh (Kafka 4.4) against `bmq serve`: records with keys and headers go in
and come out as written; offsets and the log start move as an operator asks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.conftest import make_topic_name
from tests.kafka_tools.tools import KafkaTools, offsets

# The console tools' properties: keys and headers parsed on input and printed on output.
READ_KEYS_AND_HEADERS = ["--reader-property", "parse.key=true",
                         "--reader-property", "parse.headers=true",
                         "--reader-property", "key.separator=|",
                         "--reader-property", "null.marker=NULL"]
PRINT_ALL = ["--formatter-property", "print.key=true",
             "--formatter-property", "print.headers=true",
             "--formatter-property", "print.partition=true",
             "--formatter-property", "print.offset=true",
             "--formatter-property", "key.separator=|"]


def test_console_round_trip_offsets_and_deleted_records(kafka: KafkaTools,
                                                        tmp_path: Path) -> None:
    topic = make_topic_name("console")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    # Input lines are HEADERS<tab>KEY|VALUE (NULL: no headers); a header may have no value.
    lines = ["trace:abc,kind:order\tk1|first", "kind:refund\tk2|second", "NULL\tk3|third",
             "empty:\tk1|fourth"]
    kafka("kafka-console-producer", "--topic", topic, "--producer-property", "acks=all",
          *READ_KEYS_AND_HEADERS, stdin="\n".join(lines) + "\n")

    consumed = kafka("kafka-console-consumer", "--topic", topic, "--from-beginning",
                     "--max-messages", "4", "--timeout-ms", "30000", *PRINT_ALL).out
    assert consumed.splitlines() == [
        "Partition:0|Offset:0|trace:abc,kind:order|k1|first",
        "Partition:0|Offset:1|kind:refund|k2|second",
        "Partition:0|Offset:2|NO_HEADERS|k3|third",
        "Partition:0|Offset:3|empty:|k1|fourth",
    ], consumed

    assert offsets(kafka("kafka-get-offsets", "--topic", topic).out) == {(topic, 0): 4}
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1,
                                "partitions": [{"topic": topic, "partition": 0, "offset": 2}]}))
    deleted = kafka("kafka-delete-records", "--offset-json-file", str(spec)).out
    assert f"partition: {topic}-0\tlow_watermark: 2" in deleted, deleted
    assert offsets(kafka("kafka-get-offsets", "--topic", topic, "--time", "earliest").out) \
        == {(topic, 0): 2}

    # From the new log start: the first two records are gone.
    rest = kafka("kafka-console-consumer", "--topic", topic, "--partition", "0",
                 "--offset", "earliest", "--max-messages", "2", "--timeout-ms", "30000",
                 *PRINT_ALL).out
    assert [line.split("|")[-1] for line in rest.splitlines()] == ["third", "fourth"]


@pytest.mark.slow
def test_offsets_by_time_and_by_partition_pattern(kafka: KafkaTools) -> None:
    topic = make_topic_name("times")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
    base = 1_700_000_000_000
    for i in range(6):
        producer.produce(topic, value=b"v", partition=i % 2, timestamp=base + i * 1000)
    producer.flush(30)
    at = offsets(kafka("kafka-get-offsets", "--topic", topic, "--time", str(base + 2500)).out)
    # Partition 0 holds the records at +0, +2 s and +4 s; partition 1 those at +1, +3, +5 s.
    assert at == {(topic, 0): 2, (topic, 1): 1}
    assert offsets(kafka("kafka-get-offsets", "--topic-partitions", f"{topic}:1",
                         "--time", "max-timestamp").out) == {(topic, 1): 2}
    assert offsets(kafka("kafka-get-offsets", "--topic", topic, "--partitions", "0",
                         "--time", "latest").out) == {(topic, 0): 3}


@pytest.mark.slow
def test_console_consumer_reads_committed_records_only(kafka: KafkaTools) -> None:
    topic = make_topic_name("committed")
    kafka("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    producer = Producer({"bootstrap.servers": kafka.bootstrap,
                         "transactional.id": make_topic_name("tx")})
    producer.init_transactions()
    for value, commit in ((b"aborted", False), (b"committed", True)):
        producer.begin_transaction()
        producer.produce(topic, value=value)
        producer.flush(30)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    committed = kafka("kafka-console-consumer", "--topic", topic, "--from-beginning",
                      "--isolation-level", "read_committed", "--max-messages", "1",
                      "--timeout-ms", "30000").out
    assert committed.split() == ["committed"]
    everything = kafka("kafka-console-consumer", "--topic", topic, "--from-beginning",
                       "--max-messages", "2", "--timeout-ms", "30000").out
    assert everything.split() == ["aborted", "committed"]
