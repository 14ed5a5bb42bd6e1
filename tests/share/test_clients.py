"""Share groups with the real confluent-kafka (librdkafka 2.16) ShareConsumer on `bmq serve`:
several consumers on one partition, acknowledgements, retry back-off, dead letters, lock
expiry of a killed consumer, and a kill -9 of the broker."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, ShareConsumer

from bmq.protocol.messages import ShareGroupDescribeRequest
from tests.groups.wire import RawClient
from tests.integration.helpers import watermarks
from tests.metrics.scrape import scrape, value
from tests.share.helpers import (
    SHARE_ENV,
    ShareWorker,
    create_topic,
    produce,
    set_group_configs,
    unique,
    wait_for,
)

EARLIEST = {"share.auto.offset.reset": "earliest"}


def share_consumer(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    return consumer


def test_three_consumers_share_one_partition(share_broker: Any,
                                             workers: list[ShareWorker]) -> None:
    """Each consumer gets records of the one partition; together they process every record,
    each once (nothing failed, so nothing is delivered twice)."""
    topic, group = unique("share3"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, EARLIEST)
    for _ in range(3):
        workers.append(ShareWorker(share_broker.bootstrap, group, topic))
    for worker in workers:
        assert worker.ready.wait(30)
    # Every member must have joined (and be waiting in a ShareFetch) before records arrive.
    wait_for(lambda: _members(share_broker, group) == 3, 30, "three members")
    time.sleep(1)
    produce(share_broker.bootstrap, topic, 300, gap_s=0.01)
    wait_for(lambda: len({o for w in workers for o in w.acked}) == 300, 60, "300 acked")
    counts = Counter(o for w in workers for o in w.acked)
    assert set(counts) == set(range(300)) and set(counts.values()) == {1}
    assert all(w.acked for w in workers), [len(w.acked) for w in workers]


def _members(broker: Any, group: str) -> int:
    with RawClient(broker.bootstrap) as client:
        answer = client.call(ShareGroupDescribeRequest(group_ids=[group]), 1)
    return len(answer.groups[0].members)


def test_release_is_redelivered_after_the_back_off_and_later_records_flow(
        share_broker: Any) -> None:
    topic, group = unique("release"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group,
                      {**EARLIEST, "bmq.share.retry.backoff.ms": "2000,60000"})
    produce(share_broker.bootstrap, topic, 5)
    consumer = share_consumer(share_broker.bootstrap, group, topic)
    try:
        released_at = 0.0
        seen: list[tuple[int, int, float]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(o == 2 and n == 2 for o, n, _ in seen):
            for m in consumer.poll(0.2):
                assert m.error() is None, m.error()
                seen.append((m.offset(), m.delivery_count(), time.monotonic()))
                if m.offset() == 2 and m.delivery_count() == 1:
                    consumer.acknowledge(m, AcknowledgeType.RELEASE)
                    released_at = time.monotonic()    # before the broker sees the release
                else:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            consumer.commit_sync()
            if released_at and not any(o >= 5 for o, _, _ in seen):
                produce(share_broker.bootstrap, topic, 3, start=5)
        again = [(n, t) for o, n, t in seen if o == 2 and n == 2]
        assert again, seen
        assert again[0][1] - released_at >= 2.0, "redelivered before its back-off"
        later = [t for o, _, t in seen if o >= 5]
        assert later and min(later) < again[0][1], "records behind it waited"
        assert Counter(o for o, _, _ in seen) == {0: 1, 1: 1, 2: 2, 3: 1, 4: 1, 5: 1, 6: 1,
                                                  7: 1}
    finally:
        consumer.close()


def test_acknowledgements_sent_by_close_hold(share_broker: Any) -> None:
    """A consumer that acknowledges its records and closes without committing: librdkafka
    leaves the group, then sends the acknowledgements as it closes its share session. They
    hold: nothing is delivered again."""
    topic, group = unique("close"), unique("g")
    create_topic(share_broker.bootstrap, topic, 2)
    set_group_configs(share_broker.bootstrap, group, {**EARLIEST,
                                                      "bmq.share.retry.backoff.ms": "0"})
    produce(share_broker.bootstrap, topic, 50)
    first = share_consumer(share_broker.bootstrap, group, topic)
    got = 0
    deadline = time.monotonic() + 30
    while got < 50 and time.monotonic() < deadline:
        for m in first.poll(0.5):
            first.acknowledge(m, AcknowledgeType.ACCEPT)
            got += 1
    first.close()
    assert got == 50
    second = share_consumer(share_broker.bootstrap, group, topic)
    try:
        again = [m.offset() for _ in range(6) for m in second.poll(0.5)]
    finally:
        second.close()
    assert again == []


def test_implicit_acknowledgement(share_broker: Any) -> None:
    """librdkafka's default mode: a poll's records are accepted by the next poll or commit."""
    topic, group = unique("implicit"), unique("g")
    create_topic(share_broker.bootstrap, topic, 2)
    set_group_configs(share_broker.bootstrap, group, EARLIEST)
    produce(share_broker.bootstrap, topic, 200)
    consumer = ShareConsumer({"bootstrap.servers": share_broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    seen: Counter[bytes] = Counter()
    try:
        deadline = time.monotonic() + 30
        while sum(seen.values()) < 200 and time.monotonic() < deadline:
            seen.update(m.value() for m in consumer.poll(0.5) if m.error() is None)
        consumer.commit_sync()
    finally:
        consumer.close()
    assert set(seen.values()) == {1} and len(seen) == 200
    again = ShareConsumer({"bootstrap.servers": share_broker.bootstrap, "group.id": group})
    again.subscribe([topic])
    try:
        assert [m for _ in range(4) for m in again.poll(0.5)] == []
    finally:
        again.close()


def _dead_letters(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("dlq-reader"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    found: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(found) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                found.append(m)
    finally:
        consumer.close()
    return found


@pytest.mark.parametrize("sent_by", ["commit", "next poll"])
def test_reject_and_the_delivery_limit_go_to_the_dead_letter_topic(share_broker: Any,
                                                                  sent_by: str) -> None:
    """Each dead letter is written and counted once, whether the acknowledgements go in a
    ShareAcknowledge (``commit_sync``) or ride on the next ShareFetch, which waits for records
    (none come) while the broker's timers run."""
    topic, group = unique("dlq-src"), unique("g")
    dlq = f"dlq.{topic}"
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {
        **EARLIEST, "share.delivery.count.limit": "2", "bmq.share.retry.backoff.ms": "0",
        "errors.deadletterqueue.topic.name": dlq})
    produce(share_broker.bootstrap, topic, 3)
    consumer = share_consumer(share_broker.bootstrap, group, topic)
    try:
        deliveries: Counter[int] = Counter()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and deliveries[1] < 2:
            for m in consumer.poll(0.2):
                deliveries[m.offset()] += 1
                ack = {0: AcknowledgeType.REJECT, 1: AcknowledgeType.RELEASE}.get(
                    m.offset(), AcknowledgeType.ACCEPT)
                consumer.acknowledge(m, ack)
            if sent_by == "commit":
                consumer.commit_sync()
        # Nothing comes back: offset 0 was rejected, offset 1 reached the limit.
        for _ in range(5):
            for m in consumer.poll(0.2):
                deliveries[m.offset()] += 1
        assert deliveries == {0: 1, 1: 2, 2: 1}
    finally:
        consumer.close()
    letters = _dead_letters(share_broker.bootstrap, dlq, 2)
    assert [m.value() for m in letters] == [b"v0", b"v1"]
    assert watermarks(share_broker.bootstrap, dlq) == (0, 2)     # and nothing written twice
    headers = [dict(m.headers()) for m in letters]
    for offset, (h, reason, count) in enumerate(zip(
            headers, [b"rejected", b"delivery.count.limit"], [b"1", b"2"], strict=True)):
        assert h == {"bmq.dlq.topic": topic.encode(), "bmq.dlq.partition": b"0",
                     "bmq.dlq.offset": str(offset).encode(), "bmq.dlq.group": group.encode(),
                     "bmq.dlq.delivery.count": count, "bmq.dlq.reason": reason}
    samples = scrape(share_broker.metrics_port)
    assert value(samples, "bmq_share_dead_letters_total", group=group, reason="rejected") == 1
    assert value(samples, "bmq_share_dead_letters_total", group=group,
                 reason="delivery.count.limit") == 1
    assert value(samples, "bmq_share_redeliveries_total", group=group) == 1   # offset 1


def test_records_of_a_killed_consumer_come_back_after_the_lock_duration(
        share_broker: Any, workers: list[ShareWorker]) -> None:
    topic, group = unique("locked"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {
        **EARLIEST, "share.record.lock.duration.ms": "3000", "bmq.share.retry.backoff.ms": "0"})
    produce(share_broker.bootstrap, topic, 10)
    holder = ShareWorker(share_broker.bootstrap, group, topic, hold=0)
    workers.append(holder)
    wait_for(lambda: bool(holder.holding), 30, "records held")
    holder.kill()
    killed_at = time.monotonic()
    produce(share_broker.bootstrap, topic, 5, start=10)
    taker = ShareWorker(share_broker.bootstrap, group, topic)
    workers.append(taker)
    wait_for(lambda: set(holder.holding) <= set(taker.acked), 30, "held records redelivered")
    came_back = min(t for o, _, t in taker.got if o in holder.holding)
    fresh = [t for o, _, t in taker.got if o >= 10]
    assert fresh and min(fresh) < came_back, "new records waited for the lock"
    # Locked for 3 s from when they were acquired (before the holder printed them).
    assert came_back - holder.held_at >= 2.0 and came_back - killed_at > 1.0
    assert {n for o, n, _ in taker.got if o in holder.holding} == {2}
    samples = scrape(share_broker.metrics_port)
    expired = value(samples, "bmq_share_lock_expiries_total", group=group)
    assert expired >= len(holder.holding), expired
    assert value(samples, "bmq_share_redeliveries_total", group=group) >= len(holder.holding)


def test_kill_9_of_the_broker_loses_no_record_and_redelivers_no_acknowledged_one(
        broker_factory: Any, workers: list[ShareWorker]) -> None:
    """Acknowledgements answered just before the crash hold after it (group ``acks``);
    records acquired but not acknowledged are delivered again with their delivery count
    (group ``held``); none is lost."""
    broker = broker_factory(env=SHARE_ENV)
    topic, acks, held = unique("crash"), unique("acks"), unique("held")
    create_topic(broker.bootstrap, topic, 1)
    for group in (acks, held):
        set_group_configs(broker.bootstrap, group, EARLIEST)
    produce(broker.bootstrap, topic, 100)
    acker = ShareWorker(broker.bootstrap, acks, topic)
    holder = ShareWorker(broker.bootstrap, held, topic, hold=0)
    workers += [acker, holder]
    wait_for(lambda: len(acker.acked) == 100 and bool(holder.holding), 30, "acked and held")
    broker.kill()
    acker.kill()
    holder.kill()
    broker.start()
    produce(broker.bootstrap, topic, 100, start=100)
    acker2 = ShareWorker(broker.bootstrap, acks, topic)
    holder2 = ShareWorker(broker.bootstrap, held, topic)
    workers += [acker2, holder2]
    wait_for(lambda: set(acker.acked) | set(acker2.acked) == set(range(200)), 60,
             "every record acknowledged")
    assert not set(acker.acked) & set(acker2.offsets()), "acknowledged records came back"
    wait_for(lambda: set(holder2.acked) == set(range(200)), 60, "held records redelivered")
    assert {n for o, n, _ in holder2.got if o in holder.holding} == {2}
    assert {n for o, n, _ in holder2.got if o not in holder.holding} == {1}


@pytest.mark.slow
def test_kill_9_of_the_broker_while_records_are_rejected_and_released(
        broker_factory: Any) -> None:
    """Released records keep their delivery count and back-off across a crash; dead
    letters are written once the broker is back."""
    broker = broker_factory(env=SHARE_ENV)
    topic, group = unique("crash-dlq"), unique("g")
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, {
        **EARLIEST, "share.delivery.count.limit": "2", "bmq.share.retry.backoff.ms": "0",
        "errors.deadletterqueue.topic.name": f"dlq.{topic}"})
    produce(broker.bootstrap, topic, 2)
    consumer = share_consumer(broker.bootstrap, group, topic)
    got: list[tuple[int, int]] = []
    wait_for(lambda: _poll_release(consumer, got) and len(got) >= 2, 30, "released")
    broker.kill()
    broker.start()
    consumer2 = share_consumer(broker.bootstrap, group, topic)
    try:
        wait_for(lambda: _poll_release(consumer2, got) and len(got) >= 4, 30, "redelivered")
        assert sorted(got) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    finally:
        consumer2.close()
    letters = _dead_letters(broker.bootstrap, f"dlq.{topic}", 2)
    assert sorted(m.value() for m in letters) == [b"v0", b"v1"]


def _poll_release(consumer: ShareConsumer, got: list[tuple[int, int]]) -> bool:
    for m in consumer.poll(0.2):
        got.append((m.offset(), m.delivery_count()))
        consumer.acknowledge(m, AcknowledgeType.RELEASE)
    consumer.commit_sync()
    return True
