"""Consumer groups with real clients: confluent-kafka (librdkafka), kafka-python, aiokafka, kcat.

Consumers run as separate processes (tests/groups/worker.py), so they can be killed for real.
Every worker commits synchronously after each message and reports a message as processed only
once that commit succeeded; "exactly once" then means no (partition, offset) is reported twice
and none is missing, whatever the rebalances in between.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections import Counter
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import NoError
from kafka.protocol.consumer import OffsetSpec

from bmq.protocol.messages import DescribeGroupsRequest

from .conftest import GROUP_ENV
from .helpers import create_topic, produce, unique, wait_for
from .wire import RawClient
from .workers import Worker, workers

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 8
KCAT = shutil.which("kcat") or "/usr/bin/kcat"


def describe_raw(client: RawClient, group: str) -> Any:
    return client.call(DescribeGroupsRequest(groups=[group]), 5).groups[0]


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def all_processed(*group: Worker) -> list[tuple[int, int]]:
    return [po for worker in group for po in worker.processed()]


def assert_exactly_once(processed: list[tuple[int, int]], per_partition: int) -> None:
    counts = Counter(processed)
    duplicates = {po: n for po, n in counts.items() if n > 1}
    assert not duplicates, f"processed more than once: {sorted(duplicates)[:20]}"
    expected = {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}
    missing = expected - set(counts)
    assert not missing, f"never processed: {sorted(missing)[:20]}"
    assert set(counts) == expected


def test_mixed_clients_share_a_topic_exactly_once(group_broker: Any) -> None:
    """confluent-kafka, kafka-python and aiokafka in one group; one leaves, another joins."""
    bootstrap = group_broker.bootstrap
    topic, group = unique("mixed"), unique("mixed-group")
    per_partition = 100
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, per_partition)
    total = PARTITIONS * per_partition
    slow = ("--delay", "0.02")
    with workers() as start:
        confluent = start("confluent", bootstrap, group, topic, *slow)
        kpython = start("kafka-python", bootstrap, group, topic, *slow)
        aio = start("aiokafka", bootstrap, group, topic, *slow)
        first = (confluent, kpython, aio)
        # All three share the partitions and each makes progress.
        wait_for(lambda: all(len(w.processed()) >= 10 for w in first) and
                 sum(len(w.assignment()) for w in first) == PARTITIONS and
                 all(w.assignment() for w in first), 60, "three members sharing the topic")
        shares = [len(w.assignment()) for w in first]
        assert sorted(shares) == [2, 3, 3], shares
        before_leave = len(all_processed(*first))
        kpython.stop()  # leaves the group cleanly
        wait_for(lambda: len(all_processed(*first)) >= before_leave + 80, 60,
                 "progress after a member left")
        assert confluent.assignment() | aio.assignment() == set(range(PARTITIONS))
        joiner = start("kafka-python", bootstrap, group, topic, *slow)
        wait_for(lambda: joiner.processed(), 60, "the new member processing")
        everyone = (*first, joiner)
        wait_for(lambda: len(set(all_processed(*everyone))) >= total, 90,
                 "every message processed")
        time.sleep(0.5)  # anything processed twice would show up now
        for worker in (confluent, aio, joiner):
            worker.stop()
        assert_exactly_once(all_processed(*everyone), per_partition)
        for worker in everyone:
            assert worker.processed(), f"{worker} processed nothing"
        assert committed(bootstrap, group, topic, PARTITIONS) == dict.fromkeys(
            range(PARTITIONS), per_partition)


def test_killed_consumer_partitions_move_after_session_timeout(group_broker: Any) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kill"), unique("kill-group")
    per_partition = 60
    session_ms = 2000
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, per_partition)
    options = ("--delay", "0.03", "--session-ms", str(session_ms), "--heartbeat-ms", "200")
    with workers() as start:
        survivor = start("kafka-python", bootstrap, group, topic, *options)
        victim = start("confluent", bootstrap, group, topic, *options)
        wait_for(lambda: survivor.assignment() and victim.assignment() and
                 len(survivor.assignment() | victim.assignment()) == PARTITIONS and
                 len(victim.processed()) >= 5, 60, "two members consuming")
        lost = victim.assignment()
        victim.kill()
        killed_at = time.monotonic()
        wait_for(lambda: survivor.assignment() == set(range(PARTITIONS)), 30,
                 "the survivor owning every partition")
        moved_at = next(t for t, e in reversed(survivor.snapshot())
                        if e["event"] == "assigned")
        elapsed = moved_at - killed_at
        # Not before the session timeout (less one heartbeat of slack), not much after it.
        assert session_ms / 1000 - 0.5 <= elapsed <= session_ms / 1000 + 4, elapsed
        assert lost <= survivor.assignment()
        # Killed between processing a message and reporting its commit: if the commit got
        # through, the survivor resumes right after that message, and it was processed once.
        in_flight = victim.in_flight()

        def processed() -> list[tuple[int, int]]:
            done = all_processed(survivor, victim)
            if in_flight is not None and in_flight not in done:
                p, o = in_flight
                resumed = [oo for pp, oo in survivor.processed() if pp == p and oo > o]
                if resumed and min(resumed) == o + 1:
                    done.append(in_flight)
            return done
        wait_for(lambda: len(set(processed())) >= PARTITIONS * per_partition, 60,
                 "every message processed")
        survivor.stop()
        assert_exactly_once(processed(), per_partition)


# ------------------------------------------------------------------------------ restarts

def test_restart_resumes_from_committed_offsets(broker_factory: Any) -> None:
    """Offsets and their metadata strings survive a clean restart and a kill -9."""
    from confluent_kafka import Consumer
    from kafka import OffsetAndMetadata
    from kafka.admin import KafkaAdminClient

    broker = broker_factory(env=GROUP_ENV)
    bootstrap = broker.bootstrap
    topic, group = unique("restart"), unique("restart-group")
    partitions, per_partition, half = 4, 20, 10
    create_topic(bootstrap, topic, partitions)
    produce(bootstrap, topic, partitions, per_partition)

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    done: set[int] = set()
    deadline = time.monotonic() + 30
    while len(done) < partitions and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=200).items():
            for record in records:
                if record.offset < half:
                    consumer.commit({tp: OffsetAndMetadata(
                        record.offset + 1, f"meta-{tp.partition}-{record.offset}", -1)})
                if record.offset == half - 1:
                    done.add(tp.partition)
    consumer.close()
    assert done == set(range(partitions))
    expected = {p: (half, f"meta-{p}-{half - 1}") for p in range(partitions)}

    def stored() -> dict[int, tuple[int, str]]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            offsets = admin.list_group_offsets(group)[group]
            described = admin.describe_groups([group])[group]
        finally:
            admin.close()
        assert described["group_state"] == "Empty"
        assert described["protocol_type"] == "consumer"
        return {tp.partition: (om.offset, om.metadata) for tp, om in offsets.items()
                if tp.topic == topic}

    assert stored() == expected
    broker.restart()
    assert stored() == expected
    broker.kill()
    broker.start()
    assert stored() == expected

    resumed = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                        "group.id": group, "auto.offset.reset": "earliest"})
    resumed.subscribe([topic])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    while len(seen) < partitions * (per_partition - half) and time.monotonic() < deadline:
        msg = resumed.poll(0.2)
        if msg is not None and not msg.error():
            seen.append((msg.partition(), msg.offset()))
    resumed.close()
    assert sorted(seen) == [(p, o) for p in range(partitions)
                            for o in range(half, per_partition)]


def test_stable_group_survives_broker_restart_without_rebalance(broker_factory: Any) -> None:
    """Group metadata is replayed: after a restart the member keeps its id and generation."""
    broker = broker_factory(env=GROUP_ENV)
    bootstrap = broker.bootstrap
    topic, group = unique("survive"), unique("survive-group")
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, 5)
    with workers() as start:
        worker = start("confluent", bootstrap, group, topic, "--session-ms", "10000")
        wait_for(lambda: len(worker.processed()) == PARTITIONS * 5, 30, "first messages")
        with RawClient(bootstrap) as raw:
            before = describe_raw(raw, group)
        assert before.group_state == "Stable"
        broker.restart()
        with RawClient(bootstrap) as raw:
            after = describe_raw(raw, group)
        assert after.group_state == "Stable"
        assert [(m.member_id, m.member_assignment) for m in after.members] == [
            (m.member_id, m.member_assignment) for m in before.members]
        callbacks = worker.callbacks()
        produce(bootstrap, topic, PARTITIONS, 5)
        wait_for(lambda: len(worker.processed()) == PARTITIONS * 10, 30,
                 "messages after the restart")
        assert worker.callbacks() == callbacks, "the restart caused a rebalance"
        assert_exactly_once(worker.processed(), 10)
        worker.stop()


# ------------------------------------------------------------------------------ tools

def test_kcat_balanced_consumer(group_broker: Any) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kcat"), unique("kcat-group")
    create_topic(bootstrap, topic, 4)
    produce(bootstrap, topic, 4, 25)

    def kcat_group() -> list[str]:
        proc = subprocess.run(
            [KCAT, "-b", bootstrap, "-X", "broker.address.family=v4", "-G", group, "-q", "-e",
             "-X", "auto.offset.reset=earliest", "-f", "%p:%o\\n", topic],
            capture_output=True, timeout=60, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    first = kcat_group()
    assert sorted(first) == sorted(f"{p}:{o}" for p in range(4) for o in range(25))
    assert committed(bootstrap, group, topic, 4) == dict.fromkeys(range(4), 25)
    produce(bootstrap, topic, 4, 2)
    assert sorted(kcat_group()) == sorted(f"{p}:{o}" for p in range(4) for o in (25, 26))


def test_admin_client_lists_describes_lags_and_deletes(group_broker: Any) -> None:
    from confluent_kafka import Consumer
    from kafka.admin import KafkaAdminClient

    bootstrap = group_broker.bootstrap
    topic, group = unique("admin"), unique("admin-group")
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, 3, 10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "admin-test-client"})
    consumer.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + 30
    while consumed < 15 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            consumer.commit(msg, asynchronous=False)
            consumed += 1
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer"
        stable = {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group in stable
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        (member,) = described["members"]
        assert member["client_id"] == "admin-test-client"
        assigned = member["member_assignment"]["assigned_partitions"]
        assert [(t["topic"], sorted(t["partitions"])) for t in assigned] == [(topic, [0, 1, 2])]

        offsets = admin.list_group_offsets(group)[group]
        ends = admin.list_partition_offsets(
            {TopicPartition(topic, p): OffsetSpec.LATEST for p in range(3)})
        # A partition without a commit lags by all of it (the group starts at the earliest).
        lag = {tp.partition: ends[tp].offset - (offsets[tp].offset if tp in offsets else 0)
               for tp in ends}
        assert sum(lag.values()) == 30 - 15
        assert all(end.offset == 10 for end in ends.values())

        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        consumer.close()
        wait_for(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", 10,
                 "the group to be empty")
        deleted = admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
        assert deleted == {TopicPartition(topic, 0): NoError}
        assert TopicPartition(topic, 0) not in admin.list_group_offsets(group)[group]
        assert admin.delete_groups([group]) == {group: "OK"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets(group)[group] == {}
    finally:
        admin.close()
        consumer.close()


# ------------------------------------------------------------------------------ protocols

def test_cooperative_sticky_rebalances_incrementally(group_broker: Any) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("coop"), unique("coop-group")
    create_topic(bootstrap, topic, PARTITIONS)
    everything = set(range(PARTITIONS))
    options = ("--strategy", "cooperative-sticky")
    with workers() as start:
        first = start("confluent", bootstrap, group, topic, *options)
        wait_for(lambda: first.assignment() == everything, 30, "the first member owning all")
        second = start("confluent", bootstrap, group, topic, *options)
        wait_for(lambda: len(first.assignment()) == len(second.assignment()) == 4 and
                 first.assignment() | second.assignment() == everything, 30, "a 4/4 split")
        # The first member gave up exactly the partitions the second got, nothing else.
        assert first.callbacks() == [("assigned", sorted(everything)),
                                     ("revoked", sorted(second.assignment()))]
        kept = first.assignment()
        second.stop()
        wait_for(lambda: first.assignment() == everything, 30, "the partitions coming back")
        assert first.callbacks()[2:] == [("assigned", sorted(everything - kept))]
        first.stop()


def test_static_member_restart_does_not_rebalance(group_broker: Any) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("static"), unique("static-group")
    create_topic(bootstrap, topic, PARTITIONS)
    with workers() as start, RawClient(bootstrap) as raw:
        one = start("confluent", bootstrap, group, topic, "--instance", "one")
        two = start("confluent", bootstrap, group, topic, "--instance", "two")
        wait_for(lambda: one.assignment() and two.assignment() and
                 one.assignment() | two.assignment() == set(range(PARTITIONS)) and
                 describe_raw(raw, group).group_state == "Stable", 30, "two static members")
        owned = two.assignment()
        callbacks = one.callbacks()
        old_ids = {m.member_id for m in describe_raw(raw, group).members}
        two.stop()  # a static member does not leave the group on close
        assert describe_raw(raw, group).group_state == "Stable"
        again = start("confluent", bootstrap, group, topic, "--instance", "two")
        wait_for(lambda: again.assignment(), 30, "the restarted member's assignment")
        assert again.assignment() == owned
        described = describe_raw(raw, group)
        assert described.group_state == "Stable"
        new_ids = {m.member_id for m in described.members}
        assert len(new_ids) == 2 and len(new_ids & old_ids) == 1
        time.sleep(1)
        assert one.callbacks() == callbacks, "the other member saw a rebalance"
