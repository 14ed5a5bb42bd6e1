"""Views on `bmq serve` with real clients: a view with a tag filter and one with a property
filter, each read by a consumer group that gets exactly the matching records with the source's
offsets and resumes from its committed offsets; kcat reads a view made by `bmq topic create
--view-of`; ListOffsets and offsets by time are the source's; bad filters and produce to a view
get Kafka's errors and change nothing."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from tests.conftest import bmq_command
from tests.integration.helpers import admin, consumer, create_topic, watermarks
from tests.integration.test_kcat import kcat
from tests.transactions.conftest import txn_broker
from tests.transactions.helpers import read_values, txn_producer
from tests.views.helpers import (
    committed,
    group_read,
    kafka_python_group_read,
    new_group,
    produce_with_headers,
    seen,
)

__all__ = ["txn_broker"]

pytestmark = pytest.mark.timeout(180)

TAGS = [b"paid", b"new", b"refunded", None]
PAID = "TAG IN ('paid','refunded')"


def create_view(bootstrap: str, name: str, source: str, expression: str) -> None:
    client = admin(bootstrap)
    future = client.create_topics([NewTopic(name, num_partitions=-1, config={
        "bmq.view.source": source, "bmq.view.filter": expression})])[name]
    future.result(15)


def tagged(count: int, start: int = 0) -> list[list[tuple[str, bytes]]]:
    """Headers of ``count`` records: bmq.tag cycling paid, new, refunded and none."""
    return [[("bmq.tag", tag)] if (tag := TAGS[(start + i) % len(TAGS)]) else []
            for i in range(count)]


def test_tag_view_group_gets_matching_records_with_source_offsets_and_resumes(
        module_broker, topic):
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=3)
    view = f"{topic}-paid"
    create_view(bootstrap, view, topic, PAID)
    # Compressed batches (lz4): the view decompresses, filters and serves them uncompressed.
    first = produce_with_headers(bootstrap, topic, tagged(120), 3, compression_type="lz4")
    matching = seen(first, lambda s: s.header("bmq.tag") in (b"paid", b"refunded"))
    group = new_group()
    assert group_read(bootstrap, view, group, len(matching)) == matching
    last = {p: max(o for q, o, _ in matching if q == p) for p in range(3)}
    assert all(committed(bootstrap, view, group, 3)[p] >= last[p] + 1 for p in range(3))
    # More records: the group resumes where it committed and gets only the new matching ones.
    more = produce_with_headers(bootstrap, topic, tagged(40, start=1), 3)
    new_matching = seen(more, lambda s: s.header("bmq.tag") in (b"paid", b"refunded"))
    assert new_matching and all(o > last[p] for p, o, _ in new_matching)
    assert group_read(bootstrap, view, group, len(new_matching)) == new_matching
    # The view has the source's partitions and offsets.
    for p in range(3):
        assert watermarks(bootstrap, view, p) == watermarks(bootstrap, topic, p)


def test_property_view_with_kafka_python_and_offsets_by_time(module_broker, topic):
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    view = f"{topic}-big-eu"
    create_view(bootstrap, view, topic, "amount > 100 AND region = 'eu' OR vip IS NOT NULL")
    records = [[("amount", str(i * 10).encode()), ("region", b"eu" if i % 2 else b"us")]
               + ([("vip", b"1")] if i % 7 == 0 else []) for i in range(60)]
    sent = produce_with_headers(bootstrap, topic, records, 2)

    def keep(s):
        big_eu = int(s.header("amount")) > 100 and s.header("region") == b"eu"
        return big_eu or s.header("vip") is not None

    matching = seen(sent, keep)
    assert kafka_python_group_read(bootstrap, view, new_group(), len(matching)) == matching
    # Offsets by time: the source's offset of the first record at or after the time.
    c = consumer(bootstrap)
    try:
        found = c.offsets_for_times([TopicPartition(view, 0, 0)], timeout=10)
        source = c.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
        assert found[0].offset == source[0].offset == 0
        future = int(time.time() * 1000) + 3_600_000
        assert c.offsets_for_times([TopicPartition(view, 0, future)], timeout=10)[0].offset == -1
    finally:
        c.close()


def test_kcat_reads_a_view_made_with_the_cli(module_broker, topic):
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=1)
    view = f"{topic}-refunds"
    made = subprocess.run([*bmq_command(), "topic", "create", view, "--view-of", topic,
                           "--filter", "TAG = 'refunded'", "-b", bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    sent = produce_with_headers(bootstrap, topic, tagged(30), 1)
    out, _ = kcat(module_broker, "-C", "-t", view, "-p", "0", "-o", "beginning", "-e", "-q",
                  "-f", "%o %s %h\\n")
    expected = [f"{s.offset} {s.value.decode()} bmq.tag=refunded" for s in sent
                if s.header("bmq.tag") == b"refunded"]
    assert out.splitlines() == expected


@pytest.mark.parametrize(("configs", "message"), [
    ({"bmq.view.filter": "TAG IN ('paid'"}, "expected ')' at position 15"),
    ({"bmq.view.filter": "amount > 'x'"}, "expected a number at position 10"),
    ({"bmq.view.filter": "TAG = 'a' AND"}, "at position 14, found the end"),
    ({"bmq.view.filter": "TAG = 'a' ; DROP"}, "unexpected ';' at position 11"),
    ({"bmq.view.filter": "TAG = 'a'", "bmq.view.source": "no-such-topic"}, "does not exist"),
    ({"bmq.view.filter": None}, "needs both"),
])
def test_malformed_view_is_refused_with_invalid_config(module_broker, topic, configs, message):
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=1)
    config = {"bmq.view.source": topic, **configs}
    client = admin(bootstrap)
    future = client.create_topics([NewTopic(f"{topic}-v", num_partitions=-1, config={
        k: v for k, v in config.items() if v is not None})])[f"{topic}-v"]
    with pytest.raises(KafkaException) as raised:
        future.result(15)
    error = raised.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert message in error.str()
    assert f"{topic}-v" not in client.list_topics(timeout=10).topics


def test_produce_to_a_view_is_refused_and_nothing_is_written(module_broker, topic):
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=1)
    view = f"{topic}-paid"
    create_view(bootstrap, view, topic, PAID)
    produce_with_headers(bootstrap, topic, tagged(4), 1)
    before = watermarks(bootstrap, topic)
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "message.timeout.ms": 10000})
    producer.produce(view, b"sneaky", headers=[("bmq.tag", b"paid")],
                     on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(15) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]
    assert watermarks(bootstrap, topic) == before
    assert watermarks(bootstrap, view) == before


def test_a_view_keeps_its_source_and_goes_with_it(module_broker, topic):
    """bmq.view.source is never altered (a topic does not become a view, nor a view a topic),
    a view takes no partitions of its own, and deleting the source deletes its views."""
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2, config={"bmq.lanes.enable": "true"})
    view = f"{topic}-paid"
    create_view(bootstrap, view, topic, PAID)
    client = admin(bootstrap)
    for name, configs in ((view, {"bmq.view.source": "elsewhere", "bmq.view.filter": PAID}),
                          (topic, {"bmq.view.source": view, "bmq.view.filter": PAID})):
        resource = ConfigResource("topic", name, set_config=configs)
        with pytest.raises(KafkaException) as raised:
            client.alter_configs([resource])[resource].result(15)
        assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as raised:
        client.create_partitions([NewPartitions(view, 4)])[view].result(15)
    assert raised.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    lane = f"{topic}.lane.blue"
    assert client.list_topics(lane, timeout=10).topics[lane].error is None   # made on first use
    # They grow with their source.
    client.create_partitions([NewPartitions(topic, 3)])[topic].result(15)
    grown = client.list_topics(timeout=10).topics
    assert [len(grown[name].partitions) for name in (topic, view, lane)] == [3, 3, 3]
    client.delete_topics([topic])[topic].result(15)
    left = client.list_topics(timeout=10).topics
    assert not {topic, view, lane} & set(left)


def test_read_committed_consumers_of_a_view_skip_aborted_transactions(txn_broker, topic):
    """Transaction markers pass through a view whole: a read_committed consumer of the view
    gets the committed matching records only, a read_uncommitted one the aborted ones too."""
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, topic, partitions=1)
    view = f"{topic}-paid"
    create_view(bootstrap, view, topic, PAID)
    producer = txn_producer(bootstrap, f"{topic}-txn")
    producer.init_transactions(30)
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for i, tag in enumerate((b"paid", b"new", b"refunded")):
            producer.produce(topic, f"{outcome}-{i}".encode(), headers=[("bmq.tag", tag)])
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    assert read_values(bootstrap, view, 1, "read_committed") == ["commit-0", "commit-2"]
    assert read_values(bootstrap, view, 1, "read_uncommitted") == [
        "commit-0", "commit-2", "abort-0", "abort-2"]
