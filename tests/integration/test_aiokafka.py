"""aiokafka: acks=all production, consumption with headers/compression, and seeking."""

from __future__ import annotations

import asyncio
import os

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from .helpers import create_topic

pytestmark = pytest.mark.timeout(90)


async def _produce(bootstrap, topic, messages, **kw):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                request_timeout_ms=15000, **kw)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=k, value=v, headers=h, partition=0)
                   for k, v, h in messages]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return metas


async def _consume(bootstrap, topic, expected, seek=None, timeout=30):
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                request_timeout_ms=15000)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        if seek is not None:
            await seek(consumer, tp)
        out = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(out) < expected and loop.time() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=500)
            out.extend(batch.get(tp, []))
        return out
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd", "snappy"])
def test_acks_all_round_trip_with_headers(module_broker, topic, codec):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    messages = []
    for i in range(150):
        value = os.urandom(i * 5) if i % 2 else f"value-{i}-".encode() * 20
        headers = [("seq", str(i).encode()), ("dup", b"a"), ("dup", b"b")]
        key = None if i % 10 == 0 else f"key-{i}".encode()
        messages.append((key, value, headers))

    async def scenario():
        metas = await _produce(module_broker.bootstrap, topic, messages,
                               compression_type=codec, linger_ms=10)
        assert [m.offset for m in metas] == list(range(len(messages)))
        return await _consume(module_broker.bootstrap, topic, len(messages))

    records = asyncio.run(scenario())
    assert len(records) == len(messages)
    for (key, value, headers), rec in zip(messages, records, strict=True):
        assert rec.key == key
        assert rec.value == value
        assert list(rec.headers) == headers
    assert [r.offset for r in records] == list(range(len(messages)))


def test_seek_beginning_end_and_offset(module_broker, topic):
    create_topic(module_broker.bootstrap, topic, partitions=1)
    messages = [(None, f"m{i}".encode(), []) for i in range(20)]

    async def scenario():
        await _produce(module_broker.bootstrap, topic, messages)
        consumer = AIOKafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])

            consumer.seek(tp, 7)
            rec = await asyncio.wait_for(consumer.getone(tp), 10)
            assert (rec.offset, rec.value) == (7, b"m7")

            await consumer.seek_to_beginning(tp)
            rec = await asyncio.wait_for(consumer.getone(tp), 10)
            assert (rec.offset, rec.value) == (0, b"m0")

            await consumer.seek_to_end(tp)
            assert await consumer.position(tp) == 20
            assert (await consumer.end_offsets([tp]))[tp] == 20
            assert (await consumer.beginning_offsets([tp]))[tp] == 0
            # Nothing to read at the end; a new record arrives at offset 20.
            empty = await consumer.getmany(tp, timeout_ms=300)
            assert not empty.get(tp)
            await _produce(module_broker.bootstrap, topic, [(b"k", b"after-end", [])])
            rec = await asyncio.wait_for(consumer.getone(tp), 10)
            assert (rec.offset, rec.value) == (20, b"after-end")
        finally:
            await consumer.stop()

    asyncio.run(scenario())
