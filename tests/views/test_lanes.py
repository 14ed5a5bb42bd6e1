"""Lanes on `bmq serve` with real clients: on a topic with bmq.lanes.enable=true a trunk group
and two lane groups (``TOPIC.lane.LANE``, never created) each get exactly their records."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import KafkaError, Producer

from tests.integration.helpers import admin, create_topic, watermarks
from tests.views.helpers import group_read, new_group, produce_with_headers, seen

pytestmark = pytest.mark.timeout(180)

LANES = [None, b"feature-42", b"canary"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_trunk_and_two_lane_groups_each_get_exactly_their_records(module_broker, topic,
                                                                  protocol):
    """With either group protocol: KIP-848 members ask no Metadata before they are assigned
    a lane, which then exists from their first heartbeat."""
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2, config={"bmq.lanes.enable": "true"})
    records = [[("bmq.lane", lane)] if (lane := LANES[i % 3]) else [] for i in range(90)]
    sent = produce_with_headers(bootstrap, topic, records, 2, compression_type="zstd")
    trunk = seen(sent, lambda s: s.header("bmq.lane") is None)
    assert group_read(bootstrap, topic, new_group(), len(trunk),
                      group_protocol=protocol) == trunk
    for lane in ("feature-42", "canary"):
        mine = seen(sent, lambda s, lane=lane: s.header("bmq.lane") == lane.encode())
        assert len(mine) == 30
        assert group_read(bootstrap, f"{topic}.lane.{lane}", new_group(), len(mine),
                          group_protocol=protocol) == mine
    # The lane exists now, with the topic's partitions; nothing else was made.
    topics = admin(bootstrap).list_topics(timeout=10).topics
    assert len(topics[f"{topic}.lane.canary"].partitions) == 2
    assert watermarks(bootstrap, f"{topic}.lane.canary", 1) == watermarks(bootstrap, topic, 1)


def test_a_lane_takes_no_produce(module_broker, topic):
    bootstrap = module_broker.bootstrap
    lanes = f"{topic}-lanes"
    create_topic(bootstrap, lanes, partitions=1, config={"bmq.lanes.enable": "true"})
    before = watermarks(bootstrap, lanes)
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "message.timeout.ms": 10000})
    producer.produce(f"{lanes}.lane.x", b"into a lane", on_delivery=lambda e, _: errors.append(e))
    assert producer.flush(15) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]
    assert watermarks(bootstrap, lanes) == before


def test_aiokafka_group_reads_a_lane(module_broker, topic):
    """aiokafka (its own record parser) over a lane's batches, most of them emptied."""
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, partitions=1, config={"bmq.lanes.enable": "true"})
    records = [[("bmq.lane", b"green")] if i % 10 == 3 else [] for i in range(200)]
    sent = produce_with_headers(bootstrap, topic, records, 1, linger_ms=0, batch_num_messages=3)
    green = seen(sent, lambda s: s.header("bmq.lane") == b"green")

    async def read() -> list[tuple[int, int, bytes]]:
        consumer = AIOKafkaConsumer(f"{topic}.lane.green", bootstrap_servers=bootstrap,
                                    group_id=new_group(), auto_offset_reset="earliest")
        await consumer.start()
        got = []
        try:
            while len(got) < len(green):
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
                got += [(m.partition, m.offset, m.value) for ms in batches.values() for m in ms]
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(read()) == green
