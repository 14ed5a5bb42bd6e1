"""The proxy's produce router keeps a partition's batches in order across an owner that turned
the first away: found by the loopback kill/freeze test (tests/faults), where librdkafka's
idempotent producer died with a FATAL "sequence desynchronization".

Batches 226 and 227 of one producer were both in flight to a partition's new owner, which
answered 226 NOT_LEADER_OR_FOLLOWER (still opening the partition) and 227, arriving once it was
open, OUT_OF_ORDER_SEQUENCE_NUMBER. The router held 226 and forwarded it again (accepted), so
the client heard "226 written" and then "227 out of order": its next expected sequence refused,
fatal. 227 must go after 226 instead, as it would on one leader.

The owner here is a scripted link (the router's unit of I/O); the Kafka side is covered by the
loopback test, where the race shows about once in twenty runs."""

from __future__ import annotations

import asyncio
from typing import Any

from bmq.client.produce import route_produce
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ProduceRequest,
    ProduceResponse,
)
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from bmq.protocol.records import read_header
from tests.integration.kwire import Record, build_record_batch

TOPIC, PID = "t", 2001


class OpeningOwner:
    """A partition's owner that refuses the first batch while it opens the partition, then
    checks sequences as a Kafka leader does."""

    host, port, closed = "owner", 9092, False

    def __init__(self) -> None:
        self.last_seq = 225
        self.opening = True
        self.written: list[int] = []

    def sibling(self) -> OpeningOwner:
        return self         # the router's probes of the owner's liveness come here too

    async def request(self, request: ProduceRequest | ApiVersionsRequest, version: int,
                      expect_response: bool = True, client_id: str | None = None
                      ) -> ProduceResponse | ApiVersionsResponse:
        if isinstance(request, ApiVersionsRequest):
            return ApiVersionsResponse()
        data = request.topic_data[0].partition_data[0]
        seq = read_header(memoryview(data.records)).base_sequence
        await asyncio.sleep(0.01)
        if self.opening:
            self.opening = False        # open from now on
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif seq == self.last_seq + 1:
            self.last_seq = seq
            self.written.append(seq)
            code = ErrorCode.NONE
        else:
            code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return ProduceResponse(responses=[TopicProduceResponse(name=TOPIC, partition_responses=[
            PartitionProduceResponse(index=0, error_code=code, base_offset=seq)])])


class OneOwnerPool:
    def __init__(self, owner: OpeningOwner) -> None:
        self.owner = owner

    def get(self, host: str, port: int) -> OpeningOwner:
        return self.owner


class Targets:
    def topic_name(self, topic_id: Any) -> str:
        return TOPIC

    def check(self, topic: str, index: int) -> None:
        pass

    def owner(self, topic: str, index: int) -> tuple[str, int]:
        return ("owner", 9092)

    def moved(self, topic: str, index: int) -> None:
        pass


def _request(seq: int) -> ProduceRequest:
    batch = build_record_batch([Record(b"k", b"v")], producer_id=PID, producer_epoch=0,
                               base_sequence=seq)
    return ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
        name=TOPIC, partition_data=[PartitionProduceData(index=0,
                                                         records=memoryview(bytearray(batch)))])])


def test_a_batch_refused_out_of_turn_goes_after_its_held_predecessor() -> None:
    async def scenario() -> list[int]:
        owner = OpeningOwner()
        links: Any = OneOwnerPool(owner)
        first = asyncio.ensure_future(route_produce(links, Targets(), _request(226), 9))
        await asyncio.sleep(0)      # both in flight before either is answered
        second = asyncio.ensure_future(route_produce(links, Targets(), _request(227), 9))
        answers = [await first, await second]
        assert owner.written == [226, 227]
        return [a.responses[0].partition_responses[0].error_code for a in answers if a]

    assert asyncio.run(scenario()) == [ErrorCode.NONE, ErrorCode.NONE]
