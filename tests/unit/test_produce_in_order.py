"""A connection's produce requests are appended in the order they came, also when one of them
waits (a partition opened on first use, a transaction verification): an idempotent producer's
later batch must not reach the log before its earlier one. Found by
tests/cluster/test_cluster.py's scale-out, drain and rolling restart (2 runs of 14): with
partitions taken on first use, librdkafka's idempotent producer died on a FATAL
OUT_OF_ORDER_SEQUENCE_NUMBER ("sequence desynchronization") from the new owner.

Run on a real broker and log, without sockets: the first produce's partition lookup is slowed
as an open on first use is, the second comes meanwhile on the same connection."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.produce import handle_produce
from bmq.broker.server import standalone_broker
from bmq.config import Config
from bmq.protocol.errors import ErrorCode
from bmq.protocol.headers import RequestHeader
from bmq.protocol.messages import ProduceRequest
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.writepath.partitions import Partition
from tests.storage.batches import make_batch

PRODUCER_ID = 4000


def _produce(sequence: int) -> ProduceRequest:
    batch = make_batch([f"v{sequence}".encode()], producer_id=PRODUCER_ID, producer_epoch=0,
                       base_sequence=sequence)
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="t", partition_data=[PartitionProduceData(index=0,
                                                       records=memoryview(bytearray(batch)))])])


def test_a_produce_that_waits_is_not_overtaken_by_the_next_on_its_connection(
        tmp_path: Path) -> None:
    async def scenario() -> list[int]:
        with ThreadPoolExecutor(2) as executor:
            broker = standalone_broker(Config(data_dir=str(tmp_path)), executor)
            await broker.start()
            await broker.create_topic("t", 1)
            looked_up = broker.local_partition
            slowed = [True]

            async def opened_on_first_use(topic: str, index: int) -> Partition | None:
                if slowed:
                    slowed.clear()
                    await asyncio.sleep(0.2)
                return await looked_up(topic, index)

            broker.local_partition = opened_on_first_use  # type: ignore[method-assign]
            connection = asyncio.Lock()

            def context() -> RequestContext:
                return RequestContext(broker, RequestHeader(0, 9, 0, "test"), "/127.0.0.1",
                                      bytearray(), "PLAINTEXT", None, connection)

            first = asyncio.create_task(handle_produce(context(), _produce(0), 9))
            await asyncio.sleep(0.05)
            second = asyncio.create_task(handle_produce(context(), _produce(1), 9))
            answers = [await first, await second]
            await broker.stop()
            return [answer.responses[0].partition_responses[0].error_code
                    for answer in answers if answer is not None]

    assert asyncio.run(scenario()) == [ErrorCode.NONE, ErrorCode.NONE]
