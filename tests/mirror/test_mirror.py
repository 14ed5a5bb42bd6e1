"""`bmq mirror` between two `bmq serve`s: topics are copied with identical offsets, record by
record (transactions and their markers included); configs and new partitions follow the
source; a consumer group moves to the target after `promote` and reads the rest exactly once;
produce to a mirrored topic is refused; a kill -9 of the mirror loses nothing and writes
nothing twice."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from tests.conftest import BrokerProcess, bmq_command, make_topic_name
from tests.mirror.conftest import (
    INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    MirrorFactory,
    MirrorProcess,
    wait_until,
)
from tests.mirror.helpers import (
    ask,
    create,
    end_offsets,
    metric,
    mirrored,
    mirrored_partitions,
    partition_count,
    produce,
    producer_ids,
    raw_batches,
    records,
    topic_configs,
)

Pair = tuple[BrokerProcess, BrokerProcess, MirrorProcess]


def caught_up(pair: Pair, topic: str, partitions: int) -> bool:
    source, target, _ = pair
    return mirrored(source.bootstrap, target.bootstrap, topic, partitions)


def test_topics_are_mirrored_record_by_record_with_their_transactions(pair: Pair) -> None:
    source, target, mirror = pair
    topic = make_topic_name("m-orders")
    create(source.bootstrap, topic, 2, **{"retention.ms": "123456789"})
    produce(source.bootstrap, topic, 300, 2)
    transactional = Producer({"bootstrap.servers": source.bootstrap,
                              "transactional.id": make_topic_name("txn")})
    transactional.init_transactions(10)
    for commit, values in ((True, range(1000, 1010)), (False, range(2000, 2005))):
        transactional.begin_transaction()
        for value in values:
            transactional.produce(topic, value=str(value).encode(), partition=value % 2)
        transactional.flush(10)       # (an abort drops what is not sent yet)
        if commit:
            transactional.commit_transaction(10)
        else:
            transactional.abort_transaction(10)
    produce(source.bootstrap, topic, 50, 2, start=300)
    wait_until(lambda: caught_up(pair, topic, 2), 20, "the target has the source's offsets",
               mirror.log_text)
    everything = records(source.bootstrap, topic, 2)
    assert len(everything) == 350 + 15
    assert records(target.bootstrap, topic, 2) == everything
    committed = records(source.bootstrap, topic, 2, "read_committed")
    assert {r[3] for r in everything} - {r[3] for r in committed} == {
        str(v).encode() for v in range(2000, 2005)}
    assert records(target.bootstrap, topic, 2, "read_committed") == committed
    configs = topic_configs(target.bootstrap, topic)
    assert configs["retention.ms"] == "123456789"
    assert configs["bmq.mirror.source"] == "east"
    status = subprocess.run([*bmq_command(), "mirror", "status", "-b", target.bootstrap,
                             "--source", source.bootstrap, "--name", "east", "--metrics",
                             f"http://127.0.0.1:{mirror.metrics_port}/metrics"],
                            capture_output=True, text=True, timeout=30)
    assert status.returncode == 0, status.stderr
    rows = {tuple(line.split()[:2]): line.split() for line in status.stdout.splitlines()}
    ends = end_offsets(source.bootstrap, topic, 2)
    for partition in range(2):
        # topic, partition, source, target end, source end, lag, lag s, bytes, state
        row = rows[(topic, str(partition))]
        assert row[2:7] == ["east", str(ends[partition]), str(ends[partition]), "0", "0.0"]
        assert int(row[7]) == metric(mirror.metrics_port, "bmq_mirror_bytes_total",
                                     topic=topic, partition=str(partition)) > 0
        assert row[8] == "ok"
    # A new partition on the source, a new topic and a config change appear on the target.
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "", incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("max.message.bytes", "2000000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    later = make_topic_name("m-later")
    create(source.bootstrap, later, 1)
    produce(source.bootstrap, topic, 30, 3, start=400)
    produce(source.bootstrap, later, 10, 1)
    wait_until(lambda: caught_up(pair, topic, 3) and caught_up(pair, later, 1), 20,
               "the new partition and the new topic are mirrored", mirror.log_text)
    assert records(target.bootstrap, topic, 3) == records(source.bootstrap, topic, 3)
    wait_until(lambda: topic_configs(target.bootstrap, topic)["max.message.bytes"] == "2000000"
               and topic_configs(target.bootstrap, topic)["retention.ms"]
               == topic_configs(source.bootstrap, topic)["retention.ms"], 10,
               "the target's configs follow the source's", mirror.log_text)


def test_a_group_moves_to_the_target_after_promote_and_reads_the_rest_once(pair: Pair) -> None:
    source, target, mirror = pair
    topic, group = make_topic_name("m-moving"), make_topic_name("g-moving")
    create(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, 100, 2)
    partitions = [TopicPartition(topic, p) for p in range(2)]
    consumer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign(partitions)      # from the group's committed offsets (none yet)
    seen: list[bytes] = []
    while len(seen) < 50:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            seen.append(message.value())
    consumer.commit(asynchronous=False)
    on_source = consumer.committed([TopicPartition(topic, p) for p in range(2)], 10)
    consumer.close()

    def copied() -> bool:
        reader = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
        try:
            found = reader.committed([TopicPartition(topic, p) for p in range(2)], 10)
        finally:
            reader.close()
        return [tp.offset for tp in found] == [tp.offset for tp in on_source]

    wait_until(copied, 20, "the group's offsets are copied to the target", mirror.log_text)
    ends = end_offsets(target.bootstrap, topic, 2)
    refused: list[object] = []
    producer = Producer({"bootstrap.servers": target.bootstrap})
    producer.produce(topic, value=b"not here", on_delivery=lambda e, m: refused.append(e))
    producer.flush(10)
    assert refused and refused[0] is not None and "INVALID_REQUEST" in refused[0].name()
    assert end_offsets(target.bootstrap, topic, 2) == ends

    promoted = subprocess.run([*bmq_command(), "mirror", "promote", topic, "-b",
                               target.bootstrap], capture_output=True, text=True, timeout=30)
    assert promoted.returncode == 0, promoted.stderr
    assert "bmq.mirror.source" not in topic_configs(target.bootstrap, topic) or \
        not topic_configs(target.bootstrap, topic)["bmq.mirror.source"]
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign(partitions)      # from the offsets copied from the source
    rest: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(seen) + len(rest) < 100 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            rest.append(message.value())
    extra = consumer.poll(0.5)
    consumer.close()
    assert extra is None
    assert sorted(seen + rest) == sorted(f"value {i}".encode() for i in range(100))
    # Promoted: writable, by an idempotent producer too, whose producer id is none of the
    # source's (it would take over that producer's sequence numbers in the partition); and the
    # mirror leaves the topic alone (the source's new records stay there).
    mirrored_ids = [producer_ids(target.bootstrap, topic, p) for p in range(2)]
    produce(target.bootstrap, topic, 10, 2, start=1000)
    assert end_offsets(target.bootstrap, topic, 2) == [end + 5 for end in ends]
    for partition, before in enumerate(mirrored_ids):
        after = producer_ids(target.bootstrap, topic, partition)[len(before):]
        assert after and min(after) > max(before) >= 0
    produce(source.bootstrap, topic, 10, 2, start=100)
    time.sleep(3 * INTERVAL_MS / 1000)
    assert end_offsets(target.bootstrap, topic, 2) == [end + 5 for end in ends]


@pytest.mark.slow
def test_a_group_offset_is_never_moved_back_on_the_target(pair: Pair) -> None:
    """A group that went on on the target (it moved there) keeps its offset there, whatever
    the source says later (slow: CI time)."""
    source, target, mirror = pair
    topic, group = make_topic_name("m-back-offsets"), make_topic_name("g-back-offsets")
    create(source.bootstrap, topic, 1)
    produce(source.bootstrap, topic, 100, 1)
    wait_until(lambda: caught_up(pair, topic, 1), 20, "mirrored", mirror.log_text)

    on_source, on_target = (Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
                            for cluster in (source, target))

    def commit(consumer: Consumer, offset: int) -> None:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)

    def committed() -> int:
        return int(on_target.committed([TopicPartition(topic, 0)], 10)[0].offset)

    try:
        commit(on_source, 50)
        wait_until(lambda: committed() == 50, 20, "the offset is copied", mirror.log_text)
        commit(on_target, 80)
        commit(on_source, 60)
        time.sleep(4 * INTERVAL_MS / 1000)
        assert committed() == 80
        commit(on_source, 90)
        wait_until(lambda: committed() == 90, 20, "a later offset is copied", mirror.log_text)
    finally:
        on_source.close()
        on_target.close()


@pytest.mark.slow
def test_an_unrelated_topic_and_a_mirror_on_the_source_are_never_written(pair: Pair) -> None:
    """A target topic of the name that is not a mirror is left alone, and so is a source topic
    that is a mirror itself (of the target, say: two clusters mirroring into each other).
    (Slow: CI time; CI's refusals are test_clients_can_neither... and BmqMirrorAppend's.)"""
    source, target, mirror = pair
    unrelated, mirrored_back = make_topic_name("m-unrelated"), make_topic_name("m-back")
    create(target.bootstrap, unrelated, 1)
    create(source.bootstrap, unrelated, 1)
    create(source.bootstrap, mirrored_back, 1, **{"bmq.mirror.source": "west"})
    produce(source.bootstrap, unrelated, 20, 1)
    wait_until(lambda: all(f"topic {topic} is not mirrored" in mirror.log_text()
                           for topic in (unrelated, mirrored_back)), 20,
               "the mirror reports the topics it refuses", mirror.log_text)
    assert end_offsets(target.bootstrap, unrelated, 1) == [0]
    assert not topic_configs(target.bootstrap, unrelated).get("bmq.mirror.source")
    assert partition_count(target.bootstrap, mirrored_back) == 0


@pytest.mark.filterwarnings("ignore:alter_configs:DeprecationWarning")  # (still Kafka's API)
def test_clients_can_neither_make_a_topic_a_mirror_nor_change_a_mirrors_source(
        pair: Pair) -> None:
    """bmq.mirror.source is set by the mirror when it creates a topic and deleted only by a
    promotion: IncrementalAlterConfigs setting it (on any topic) and AlterConfigs changing or
    dropping it get INVALID_CONFIG, and nothing changes."""
    source, target, mirror = pair
    mirrored_topic, plain = make_topic_name("m-marked"), make_topic_name("plain")
    create(source.bootstrap, mirrored_topic, 1)
    create(target.bootstrap, plain, 1)
    produce(source.bootstrap, mirrored_topic, 5, 1)
    wait_until(lambda: caught_up(pair, mirrored_topic, 1), 20, "mirrored", mirror.log_text)
    admin = AdminClient({"bootstrap.servers": target.bootstrap})

    def refused(topic: str, value: str | None = None, **configs: str) -> str:
        """The error of changing ``topic``'s configs: IncrementalAlterConfigs setting the mark
        to ``value``, else AlterConfigs replacing them with ``configs``."""
        if value is None:
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=configs)
            future = admin.alter_configs([resource])[resource]
        else:
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
                ConfigEntry("bmq.mirror.source", value,
                            incremental_operation=AlterConfigOpType.SET)])
            future = admin.incremental_alter_configs([resource])[resource]
        with pytest.raises(KafkaException) as error:
            future.result(10)
        assert error.value.args[0].code() == KafkaError.INVALID_CONFIG
        return str(error.value.args[0].str())

    assert "set only by bmq mirror" in refused(plain, "east")
    assert "bmq mirror promote" in refused(mirrored_topic, "west")
    refused(mirrored_topic, "")
    assert "bmq mirror promote" in refused(mirrored_topic, **{"retention.ms": "1000"})
    assert "set only by bmq mirror" in refused(plain, **{"bmq.mirror.source": "east"})
    assert topic_configs(target.bootstrap, mirrored_topic)["bmq.mirror.source"] == "east"
    assert not topic_configs(target.bootstrap, plain).get("bmq.mirror.source")
    produce(target.bootstrap, plain, 3, 1)      # still an ordinary topic
    assert end_offsets(target.bootstrap, plain, 1) == [3]


@pytest.mark.slow
def test_kill_9_of_the_mirror_twice_mid_stream_loses_and_repeats_nothing(pair: Pair) -> None:
    """(Slow: CI time, a 3 s stream. CI keeps what makes a restart safe: an append that does
    not continue the log is refused, test_mirror_append_refuses_what_does_not_continue...)"""
    source, target, mirror = pair
    topic = make_topic_name("m-killed")
    create(source.bootstrap, topic, 2)
    done = threading.Event()

    def stream() -> None:
        producer = Producer({"bootstrap.servers": source.bootstrap,
                             "enable.idempotence": True, "linger.ms": 2})
        i = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            producer.produce(topic, key=str(i).encode(), value=b"x" * 200, partition=i % 2)
            producer.poll(0)
            i += 1
            if i % 500 == 0:
                time.sleep(0.02)
        producer.flush(20)
        done.set()

    producing = threading.Thread(target=stream)
    producing.start()
    for pause in (0.8, 0.9):
        time.sleep(pause)
        assert mirror.proc is not None and mirror.proc.poll() is None, mirror.log_text()
        mirror.kill()
        mirror.start()
    producing.join(30)
    assert done.is_set()
    wait_until(lambda: caught_up(pair, topic, 2), 30, "the target catches up after two kill -9",
               mirror.log_text)
    expected = records(source.bootstrap, topic, 2)
    assert records(target.bootstrap, topic, 2) == expected
    assert "from offset" in mirror.log_text()


@pytest.mark.slow
def test_two_mirrors_share_the_partitions_and_one_takes_over_from_a_dead_one(
        pair: Pair, module_mirror_factory: MirrorFactory) -> None:
    """(Slow: CI time, a second mirror process and a session timeout; CI's mirror is one.)"""
    source, target, mirror = pair
    other = module_mirror_factory(source, target, "--topic-regex", "m-.*",
                                  "--group-regex", "g-.*")
    topic = make_topic_name("m-shared")
    create(source.bootstrap, topic, 4)
    produce(source.bootstrap, topic, 200, 4)
    everything = {(topic, p) for p in range(4)}

    def shared() -> bool:
        """Each has some of the partitions, none has one of the other's, and together they
        have the topic's; which of them are the topic's is the assignor's choice."""
        mine, others = (mirrored_partitions(m.metrics_port) for m in (mirror, other))
        return bool(mine and others and not mine & others and everything <= mine | others)

    wait_until(lambda: shared() and caught_up(pair, topic, 4), 20,
               "the two mirrors share the partitions", lambda: other.log_text())
    dead, alive = (other, mirror) if mirrored_partitions(other.metrics_port) & everything \
        else (mirror, other)
    dead.kill()
    killed_at = time.monotonic()
    produce(source.bootstrap, topic, 200, 4, start=200)
    wait_until(lambda: caught_up(pair, topic, 4)
               and everything <= mirrored_partitions(alive.metrics_port), 20,
               "the mirror left takes the dead one's partitions over", alive.log_text)
    assert time.monotonic() - killed_at < SESSION_TIMEOUT_MS / 1000 + 10  # (a loaded CI host)
    assert records(target.bootstrap, topic, 4) == records(source.bootstrap, topic, 4)
    if dead is mirror:
        mirror.start()      # (the module's mirror, for the tests after this one)


def test_mirror_append_refuses_what_does_not_continue_a_mirror(pair: Pair) -> None:
    """BmqMirrorAppend itself: batches that do not start at the log end offset, for a topic
    that is not a mirror (or of another source), or corrupt, get Kafka's error and change
    nothing."""
    from bmq.protocol.errors import ErrorCode
    from bmq.protocol.messages import BmqMirrorAppendRequest
    from bmq.protocol.messages.bmq_mirror_append_request import MirrorPartition, MirrorTopic

    source, target, mirror = pair
    topic = make_topic_name("m-append")
    plain = make_topic_name("plain")
    create(source.bootstrap, topic, 1)
    create(target.bootstrap, plain, 1)
    produce(source.bootstrap, topic, 20, 1)
    wait_until(lambda: caught_up(pair, topic, 1), 20, "mirrored", mirror.log_text)
    end = end_offsets(target.bootstrap, topic, 1)[0]

    batches = raw_batches(source.bootstrap, topic, 0)

    def append(name: str, records: bytes, source_name: str = "east") -> tuple[int, int]:
        answer = ask(target.bootstrap, BmqMirrorAppendRequest(
            source=source_name, timeout_ms=5000, topics=[MirrorTopic(name=name, partitions=[
                MirrorPartition(partition_index=0, records=records)])]), 0)
        result = answer.topics[0].partitions[0]
        return result.error_code, result.log_end_offset

    assert append(topic, batches) == (ErrorCode.OFFSET_OUT_OF_RANGE, end)
    assert append(topic, batches, "west")[0] == ErrorCode.INVALID_REQUEST
    assert append(plain, batches)[0] == ErrorCode.INVALID_REQUEST
    assert append(make_topic_name("m-none"), batches)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert append(topic, b"")[0] == ErrorCode.CORRUPT_MESSAGE     # nor a log start to follow
    corrupt = bytearray(batches)
    corrupt[-1] ^= 0xFF
    assert append(topic, bytes(corrupt))[0] == ErrorCode.CORRUPT_MESSAGE
    assert end_offsets(target.bootstrap, topic, 1) == [end]
    assert end_offsets(target.bootstrap, plain, 1) == [0]
