"""The Fetch handler on a real broker and log, without sockets, for windows clients rarely hit."""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.fetch import handle_fetch
from bmq.broker.server import standalone_broker
from bmq.config import Config
from bmq.protocol.errors import ErrorCode
from bmq.protocol.headers import RequestHeader
from bmq.protocol.messages import FetchRequest
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from tests.storage.batches import make_batch, request


async def _fetch(broker: Broker, topic: str, offset: int) -> tuple[int, bytes]:
    fetch = FetchRequest(max_wait_ms=0, min_bytes=0, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                partition_max_bytes=1 << 20)])])
    context = RequestContext(broker, RequestHeader(1, 11, 0, "test"), "/127.0.0.1",
                             bytearray(), "PLAINTEXT")
    response = await handle_fetch(context, fetch, 11)
    [partition] = response.responses[0].partitions
    return partition.error_code, bytes(partition.records or b"")  # type: ignore[arg-type]


def test_offsets_between_high_watermark_and_log_end_are_empty_not_errors(tmp_path: Path) -> None:
    async def scenario() -> None:
        with ThreadPoolExecutor(2) as executor:
            broker = standalone_broker(Config(data_dir=str(tmp_path)), executor)
            await broker.start()
            await broker.create_topic("t", 1)
            log = broker.partition("t", 0).log
            records, headers = request(make_batch([b"a", b"b"]))
            log.append(records, headers, 0)  # appended (acks=1 answered) but not flushed
            assert (log.high_watermark, log.log_end_offset) == (0, 2)
            assert await _fetch(broker, "t", 1) == (ErrorCode.NONE, b"")
            assert (await _fetch(broker, "t", 3))[0] == ErrorCode.OFFSET_OUT_OF_RANGE
            await broker.stop()  # flushes: the data becomes visible after a restart
            broker = standalone_broker(Config(data_dir=str(tmp_path)), executor)
            await broker.start()
            error, data = await _fetch(broker, "t", 1)
            assert error == ErrorCode.NONE and data.startswith(b"\x00" * 8)  # base offset 0
            await broker.stop()

    asyncio.run(scenario())
