"""Scheduled delivery on `bmq serve` with real clients: confluent-kafka and kafka-python
producers schedule records 1-3 s ahead (``bmq.delay.ms``, ``bmq.deliver.at``); each appears
once, not before its due time, soon after it, with key, value and headers intact plus
``bmq.scheduled.at``. Bad headers get INVALID_RECORD and change nothing; a kill -9 with records
pending loses and duplicates none; transactions deliver only what they commit."""

from __future__ import annotations

import json
import random
import subprocess
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaProducer

from bmq.protocol.record_codec import CODEC_IDS
from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, free_port
from tests.integration import kwire
from tests.integration.helpers import create_topic, topic_configs, watermarks
from tests.scheduled.helpers import (
    DELAY,
    DELIVER_AT,
    SCHEDULED_AT,
    Watcher,
    confluent_schedule,
    delivered_early,
    due_of,
    lateness,
    now_ms,
    produce_errors,
)

pytestmark = pytest.mark.timeout(180)
SCHEDULED = {"bmq.delay.enable": "true"}


def test_records_arrive_at_their_time_from_two_clients(broker: BrokerProcess,
                                                       topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2, SCHEDULED)
    watcher = Watcher(broker.bootstrap, topic, 2)
    rng = random.Random(7)
    try:
        acked = confluent_schedule(broker.bootstrap, topic, [
            {"key": f"k{i}".encode(), "value": f"ck{i}".encode(), "partition": i % 2,
             "headers": [("trace", f"t{i}".encode()), (DELAY, str(rng.randint(1000, 3000))
                                                       .encode())]}
            for i in range(60)], enable_idempotence=True)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        base = now_ms()
        futures = [producer.send(topic, key=f"j{i}".encode(), value=f"kp{i}".encode(),
                                 partition=i % 2, headers=[(DELIVER_AT, str(
                                     base + rng.randint(1000, 3000)).encode())])
                   for i in range(60)]
        kp_offsets = [f.get(15).offset for f in futures]
        producer.close()
        # Acknowledged as held: nothing is in the partitions yet.
        assert sum(watermarks(broker.bootstrap, topic, p)[1] for p in (0, 1)) == 0
        pending = topic_configs(broker.bootstrap, topic)["bmq.delay.pending"]
        assert sum(int(c.split(":")[1]) for c in pending.split(",")) > 0
        arrived = watcher.wait_for(120, 20)
    finally:
        watcher.close()
    values = sorted(r.value for r in arrived)
    assert values == sorted([f"ck{i}".encode() for i in range(60)]
                            + [f"kp{i}".encode() for i in range(60)])
    # The acknowledgements carry offsets in each partition's timer log, distinct per record.
    assert len({o for _, o in acked}) <= 60 and min(o for _, o in acked) >= 0
    assert min(kp_offsets) >= 0
    for record in arrived:
        assert record.header(SCHEDULED_AT) is not None
        assert record.key is not None and record.key[1:] == record.value[2:]
        if record.value.startswith(b"ck"):
            assert record.header("trace") == b"t" + record.value[2:]
    late = lateness(arrived)
    assert late[0] >= 0, f"a record arrived {-late[0]} ms before its due time"
    # ~100 ms on an idle machine; CI shares its cores, so allow for scheduling noise.
    assert late[len(late) // 2] < 250 and late[-1] < 1500, late
    # Same partition: offsets follow due times (same-millisecond records keep produce order).
    for partition in (0, 1):
        mine = sorted((r for r in arrived if r.partition == partition), key=lambda r: r.offset)
        dues = [due_of(r) for r in mine]
        assert dues == sorted(dues)


def test_malformed_headers_are_refused_and_nothing_is_written(broker: BrokerProcess,
                                                              topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1, SCHEDULED)
    for headers in ([(DELAY, b"12a")], [(DELAY, b"-5")], [(DELAY, b"")],
                    [(DELIVER_AT, b"soon")], [(DELAY, str(41 * 24 * 3600 * 1000).encode())]):
        assert produce_errors(broker.bootstrap, topic, headers) == [KafkaError.INVALID_RECORD]
    pending = topic_configs(broker.bootstrap, topic)["bmq.delay.pending"]
    assert pending == "0:0"
    # A topic without bmq.delay.enable ignores the headers: records are appended at once.
    plain = f"{topic}-plain"
    create_topic(broker.bootstrap, plain, 1)
    confluent_schedule(broker.bootstrap, plain, [{"value": b"x", "headers": [(DELAY, b"9")]}])
    assert watermarks(broker.bootstrap, plain) == (0, 1)
    assert watermarks(broker.bootstrap, topic) == (0, 0)
    # A compacted topic refuses keyless records on the scheduled path too, holding nothing;
    # a keyed one is held and delivered.
    compacted = f"{topic}-compacted"
    create_topic(broker.bootstrap, compacted, 1, {**SCHEDULED, "cleanup.policy": "compact"})
    assert produce_errors(broker.bootstrap, compacted, [(DELAY, b"10")]) == [
        KafkaError.INVALID_RECORD]
    assert topic_configs(broker.bootstrap, compacted)["bmq.delay.pending"] == "0:0"
    confluent_schedule(broker.bootstrap, compacted,
                       [{"key": b"k", "value": b"kept", "headers": [(DELAY, b"10")]}])
    deadline = time.monotonic() + 15
    while watermarks(broker.bootstrap, compacted) != (0, 1) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert watermarks(broker.bootstrap, compacted) == (0, 1)
    # Timer logs' names are reserved.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(Exception, match="reserved"):
        admin.create_topics([NewTopic(f"__bmq_timers.{topic}", 1)])[
            f"__bmq_timers.{topic}"].result(15)


def test_kill_9_with_records_pending_delivers_each_once(broker: BrokerProcess,
                                                        topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2, SCHEDULED)
    base = now_ms()
    records = [{"value": f"r{i}".encode(), "partition": i % 2,
                "headers": [(DELIVER_AT, str(base + 500 + 15 * i).encode())]}
               for i in range(300)]        # due from 0.5 s to 5 s from now
    confluent_schedule(broker.bootstrap, topic, records, enable_idempotence=True)
    time.sleep(max(0.0, (base + 2000 - now_ms()) / 1000))
    broker.kill()                           # with some delivered and most pending
    broker.start()
    watcher = Watcher(broker.bootstrap, topic, 2)
    try:
        arrived = watcher.wait_for(300, 30)
        time.sleep(1.0)                     # anything delivered twice would show up by now
        arrived = list(watcher.arrived)
    finally:
        watcher.close()
    values = [r.value for r in arrived]
    assert sorted(values) == sorted(r["value"] for r in records), (
        f"{len(values)} arrived, {len(set(values))} distinct")
    assert not delivered_early(arrived), delivered_early(arrived)
    out = subprocess.run([*bmq_command(), "topic", "describe", topic, "-b", broker.bootstrap,
                          "--output", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    assert [p["scheduled_pending"] for p in doc["partitions"]] == [0, 0]


def test_transactions_deliver_only_what_they_commit(broker: BrokerProcess,
                                                    topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1, SCHEDULED)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "transactional.id": f"txn-{topic}"})
    producer.init_transactions(15)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{outcome}-{i}".encode(), headers=[(DELAY, b"1000")])
        producer.produce(topic, f"{outcome}-now".encode())   # a batch of its own: at once
        producer.flush(15)
        if outcome == "commit":
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)
    watcher = Watcher(broker.bootstrap, topic, 1, isolation="read_committed")
    try:
        watcher.wait_for(12, 15)
        time.sleep(1.5)
        arrived = list(watcher.arrived)
    finally:
        watcher.close()
    values = sorted(r.value for r in arrived)
    assert values == sorted([f"commit-{i}".encode() for i in range(5)] * 2
                            + [b"commit-now"] * 2), values
    assert not any(r.value.startswith(b"abort") for r in arrived)
    delayed = [r for r in arrived if r.header(DELAY)]
    assert not delivered_early(delayed), delivered_early(delayed)


def test_kcat_and_the_bmq_command_as_in_the_readme(broker_factory: BrokerFactory,
                                                    topic: str) -> None:
    metrics_port = free_port()
    broker = broker_factory(extra_args=["--metrics-port", str(metrics_port)])
    bmq = [*bmq_command(), "topic"]
    created = subprocess.run([*bmq, "create", topic, "-p", "1", "-b", broker.bootstrap,
                              "--config", "bmq.delay.enable=true"], capture_output=True,
                             text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    sent = now_ms()
    subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-H",
                    f"{DELAY}=1000"], input=b"call back", check=True, timeout=30)
    out = subprocess.run([*bmq, "describe", topic, "-b", broker.bootstrap],
                         capture_output=True, text=True, timeout=60)
    assert "SCHEDULED" in out.stdout, out.stdout + out.stderr
    read = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-c", "1",
                           "-f", "%s|%h\n"], capture_output=True, text=True, timeout=30)
    arrived = now_ms()
    value, headers = read.stdout.strip().split("|")
    assert value == "call back" and f"{DELAY}=1000" in headers and SCHEDULED_AT in headers
    assert arrived - sent >= 1000
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                     timeout=10).read().decode()
    assert f'bmq_scheduled_delivered_total{{topic="{topic}"}} 1.0' in scraped
    assert f'bmq_scheduled_pending{{topic="{topic}"}} 0.0' in scraped
    assert "bmq_scheduled_lateness_seconds_count 1.0" in scraped


def test_idempotent_producer_mixes_plain_and_scheduled_after_alter(broker: BrokerProcess,
                                                                   topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
        "bmq.delay.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    assert topic_configs(broker.bootstrap, topic)["bmq.delay.enable"] == "true"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "enable.idempotence": True})
    errors: list[KafkaError] = []
    sent = now_ms()
    for i in range(6):       # one batch each: plain, scheduled, plain, ... of one producer
        headers = [(DELAY, b"1500")] if i % 2 else []
        producer.produce(topic, f"m{i}".encode(), headers=headers,
                         on_delivery=lambda e, _: e is None or errors.append(e))
        assert producer.flush(15) == 0
    assert not errors, errors
    watcher = Watcher(broker.bootstrap, topic, 1)
    try:
        arrived = watcher.wait_for(6, 15)
    finally:
        watcher.close()
    assert sorted(r.value for r in arrived) == [f"m{i}".encode() for i in range(6)]
    plain = [r for r in arrived if r.header(DELAY) is None]
    assert all(r.seen_ms - sent < 1500 for r in plain)
    assert not delivered_early(arrived), delivered_early(arrived)


def _set_delay_enable(bootstrap: str, topic: str, enable: bool) -> None:
    value = "true" if enable else "false"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
        "bmq.delay.enable", value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    assert topic_configs(bootstrap, topic)["bmq.delay.enable"] == value


def test_an_idempotent_producer_goes_on_across_turning_scheduling_on_and_off(
        broker: BrokerProcess, topic: str) -> None:
    # With scheduling on, an idempotent producer's batches are held in the timer log (its
    # sequence numbers stay in one log); turned on or off, its next batch lands in the other
    # log, where its sequence must continue, not fail OUT_OF_ORDER_SEQUENCE_NUMBER (fatal to
    # librdkafka's idempotent producer), also after a restart.
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "enable.idempotence": True, "linger.ms": 5})
    errors: list[KafkaError] = []
    values = []
    for phase, enable in enumerate([None, True, False, True, False]):
        if phase == 4:      # the producer's newest batches are in the timer log on disk
            broker.restart()
        if enable is not None:
            _set_delay_enable(broker.bootstrap, topic, enable)
        for i in range(50):
            values.append(f"p{phase}-{i}".encode())
            producer.produce(topic, values[-1], headers=[(DELAY, b"300")] if i % 2 else [],
                             on_delivery=lambda e, _: e is None or errors.append(e))
        assert producer.flush(15) == 0
        assert not errors, errors
    watcher = Watcher(broker.bootstrap, topic, 1)
    try:
        arrived = watcher.wait_for(len(values), 30)
        time.sleep(0.5)
        arrived = list(watcher.arrived)
    finally:
        watcher.close()
    assert sorted(r.value for r in arrived) == sorted(values)     # each once


def test_turning_scheduling_off_keeps_pending_records_due(broker: BrokerProcess,
                                                          topic: str) -> None:
    """bmq.delay.enable=false stops holding new records (the header is only a header, as in
    Kafka); the records already held are still delivered at their time, across a restart."""
    create_topic(broker.bootstrap, topic, 1, SCHEDULED)
    due = now_ms() + 4000
    confluent_schedule(broker.bootstrap, topic, [
        {"key": b"k", "value": f"held{i}".encode(), "headers": [(DELIVER_AT, str(due).encode())]}
        for i in range(20)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
        "bmq.delay.enable", "false", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    broker.kill()
    broker.start()
    confluent_schedule(broker.bootstrap, topic, [{"value": b"now", "headers": [(DELAY, b"9")]}])
    watcher = Watcher(broker.bootstrap, topic, 1)
    try:
        arrived = watcher.wait_for(21, 30)
        time.sleep(0.5)
        arrived = list(watcher.arrived)
    finally:
        watcher.close()
    assert [r.value for r in arrived] == [b"now"] + [f"held{i}".encode() for i in range(20)]
    assert arrived[0].seen_ms < due and all(r.seen_ms >= due for r in arrived[1:])


@pytest.mark.parametrize("codec", ["zstd", "producer"])
def test_deliveries_follow_the_topic_compression(broker: BrokerProcess, topic: str,
                                                codec: str) -> None:
    """Delivered batches use the topic's compression.type; with ``producer`` (a delivery
    mixes many producers' records) they are uncompressed."""
    create_topic(broker.bootstrap, topic, 1, {**SCHEDULED, "compression.type": codec})
    values = [f"record {i} ".encode() * 20 for i in range(50)]
    confluent_schedule(broker.bootstrap, topic, [
        {"key": b"k", "value": v, "headers": [(DELAY, b"200")]} for v in values],
        compression_type="lz4")
    deadline = time.monotonic() + 15
    while watermarks(broker.bootstrap, topic)[1] < 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    with kwire.KafkaWire(broker.bootstrap) as wire:
        fetched = wire.fetch(topic, 0, 0, max_bytes=16 << 20)
        batches = kwire.parse_record_batches(fetched.records or b"")
    assert batches and all(b.crc_ok() for b in batches)
    assert {b.compression for b in batches} == {CODEC_IDS.get(codec, 0)}
    watcher = Watcher(broker.bootstrap, topic, 1)
    try:
        arrived = watcher.wait_for(50, 15)
    finally:
        watcher.close()
    assert [r.value for r in arrived] == values
