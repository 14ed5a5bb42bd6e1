"""bmq.client.metadata's MetadataCache against a real `bmq serve`: what it knows matches what
confluent-kafka's AdminClient lists, route_produce through it writes records a confluent-kafka
consumer reads back where the answers said, and its answers age (metadata.max.age.ms)."""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bmq.client.metadata import MetadataCache, bootstrap_addresses
from bmq.client.produce import route_produce
from bmq.net.client import LinkPool
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import ProduceRequest
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.record_codec import build_batch
from tests.conftest import BrokerProcess

PRODUCE_VERSION = 9


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def assert_matches_admin(cache: MetadataCache, bootstrap: str, topic: str) -> None:
    """Brokers and the topic's leaders as confluent-kafka's AdminClient lists them."""
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert cache.brokers == {node: (b.host, b.port) for node, b in listed.brokers.items()}
    info = cache.topics[topic]
    assert {index: leader.node_id for index, leader in info.partitions.items()} == \
        {index: p.leader for index, p in listed.topics[topic].partitions.items()}
    assert info.topic_id.int and cache.topic_name(info.topic_id) == topic


async def produce(cache: MetadataCache, links: LinkPool, topic: str,
                  values: dict[int, bytes]) -> dict[int, tuple[int, int]]:
    """One record per partition, routed through the cache: partition -> (error, offset)."""
    request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[
            PartitionProduceData(index=index, records=bytes(build_batch(
                [(None, value)], int(time.time() * 1000))[0]))
            for index, value in values.items()])])
    response = await route_produce(links, cache, request, PRODUCE_VERSION)
    assert response is not None
    return {p.index: (p.error_code, p.base_offset)
            for p in response.responses[0].partition_responses}


def read_back(bootstrap: str, topic: str, partitions: int, count: int
              ) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of the first ``count`` records, read by confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 20
    try:
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records[(message.partition(), message.offset())] = message.value()
    finally:
        consumer.close()
    return records


def test_cache_knows_what_the_admin_client_lists_and_routes_produce(
        broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 3)

    async def run() -> None:
        links = LinkPool("test-metadata")
        cache = MetadataCache(bootstrap_addresses(f"PLAINTEXT://{broker.bootstrap}"), links)
        try:
            await cache.fresh()
            assert_matches_admin(cache, broker.bootstrap, topic)
            for round_ in range(2):
                answers = await produce(cache, links, topic,
                                        {p: f"{round_}-{p}".encode() for p in range(3)})
                assert answers == {p: (ErrorCode.NONE, round_) for p in range(3)}
            unknown = await produce(cache, links, topic, {7: b"x"})
            assert unknown == {7: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}
        finally:
            cache.close()
            links.close()

    asyncio.run(run())
    assert read_back(broker.bootstrap, topic, 3, 6) == {
        (p, round_): f"{round_}-{p}".encode() for p in range(3) for round_ in range(2)}


def test_an_answer_older_than_max_age_is_refreshed_on_use(
        broker: BrokerProcess, unique_topic: object) -> None:
    first, later = unique_topic("first"), unique_topic("later")   # type: ignore[operator]
    create_topic(broker.bootstrap, first, 1)

    async def run() -> None:
        links = LinkPool("test-metadata")
        cache = MetadataCache(bootstrap_addresses(broker.bootstrap), links, max_age_s=0.3)
        try:
            await cache.refresh()
            assert cache.owner(first, 0) is not None and cache.leader(later, 0) is None
            create_topic(broker.bootstrap, later, 1)
            deadline = asyncio.get_running_loop().time() + 5
            while cache.owner(later, 0) is None:        # no refresh asked: its age does it
                assert asyncio.get_running_loop().time() < deadline, "never refreshed"
                await asyncio.sleep(0.05)
        finally:
            cache.close()
            links.close()

    asyncio.run(run())
