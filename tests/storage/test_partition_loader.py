"""`bmq serve` serves before it has opened its partitions (bmq.broker.partition_loader): after a
restart with thousands of partitions, clients use any partition at once, with Metadata naming the
broker as every partition's leader, while the loader still works through the rest; a topic
deleted before the loader reached it takes its data with it.

The topics acted on sort last, so the loader (which goes by topic name) reaches them last; the
test checks the loader had not finished when it acted, or it would prove nothing."""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from tests.conftest import BrokerProcess
from tests.integration.helpers import (
    admin,
    consume,
    create_topic,
    produce_all,
    wait_until,
    watermarks,
)

FILL_TOPICS = 60
PER_TOPIC = 100
LOADED = "opened the partitions of"        # the loader's last log line


def loaded(broker: BrokerProcess) -> bool:
    """Whether the broker's current run has opened every partition (BrokerProcess marks each
    start in the log)."""
    return LOADED in broker.log_text().rsplit("===== start", 1)[-1]


def test_partitions_are_served_before_the_loader_reaches_them(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    fill = [f"fill-{n:03d}" for n in range(FILL_TOPICS)]
    for start in range(0, FILL_TOPICS, 20):
        for future in client.create_topics([NewTopic(name, PER_TOPIC, 1)
                                            for name in fill[start:start + 20]]).values():
            future.result(120)
    kept, doomed = "zz-kept", "zz-doomed"
    create_topic(broker.bootstrap, kept, partitions=PER_TOPIC)
    create_topic(broker.bootstrap, doomed, partitions=1)
    produce_all(broker.bootstrap, kept, [{"value": b"before", "partition": PER_TOPIC - 1}])
    produce_all(broker.bootstrap, doomed, [{"value": b"old", "partition": 0}])

    broker.restart()
    # Every partition has this broker as its leader, opened or not.
    topics = client.list_topics(timeout=10).topics
    assert {(p.leader, p.error) for p in topics[kept].partitions.values()} == {(0, None)}
    # The last partition of the last topic: produced to, read back, at once.
    produce_all(broker.bootstrap, kept, [{"value": b"after", "partition": PER_TOPIC - 1}])
    got = consume(broker.bootstrap, kept, [PER_TOPIC - 1], expected=2)
    assert [(m.offset, m.value) for m in got[PER_TOPIC - 1]] == [(0, b"before"), (1, b"after")]
    # Deleted and made again: the new topic is empty (the old data went with the old one).
    client.delete_topics([doomed])[doomed].result(30)
    wait_until(lambda: doomed not in client.list_topics(timeout=10).topics, 15,
               message="the topic gone")
    assert not loaded(broker), \
        "the loader finished before the test acted: more partitions needed"
    create_topic(broker.bootstrap, doomed, partitions=1)
    assert watermarks(broker.bootstrap, doomed, 0) == (0, 0)

    wait_until(lambda: loaded(broker), 120, message="every partition opened")
    assert watermarks(broker.bootstrap, fill[0], 0) == (0, 0)
