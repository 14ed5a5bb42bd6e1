"""Other real clients through the databus's Kafka port: Kafka's Java producer (idempotent,
acks=all, its defaults for everything else) and kafka-python; what they wrote is read back from
the cluster once each. And an idempotent producer's retry, sent again on the wire, is answered
as the first time and placed once; a gap in its sequence is OUT_OF_ORDER_SEQUENCE_NUMBER."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kafka import KafkaProducer

from bmq.client.requests import ask_once
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import InitProducerIdRequest, ProduceRequest
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.record_codec import encode_record, frame_batch
from tests.conftest import BrokerProcess, make_topic_name
from tests.databus.conftest import DatabusProcess, create_topic, read_all
from tests.java.conftest import JavaClients, java_classpath, java_clients

__all__ = ["java_classpath", "java_clients"]


@pytest.mark.slow
def test_java_idempotent_producer(java_clients: JavaClients, cluster: BrokerProcess,
                                  agent: DatabusProcess) -> None:
    topic = make_topic_name("java")
    create_topic(cluster, topic, 2)
    produced = java_clients.run("ProducerScenarios", agent.bootstrap, {"idempotent": topic})
    assert produced["idempotent"]["offsets"] == [-1] * 300     # the cluster's are not known
    seen = read_all(cluster, topic, 2, 300)
    assert sorted((key, value) for _, _, key, value, _ in seen) == sorted(
        (f"k{i}".encode(), f"idempotent-{i}".encode()) for i in range(300))


@pytest.mark.slow
def test_kafka_python_producer(cluster: BrokerProcess, agent: DatabusProcess) -> None:
    topic = make_topic_name("kpy")
    create_topic(cluster, topic, 1)
    producer = KafkaProducer(bootstrap_servers=agent.bootstrap, acks="all")
    futures = [producer.send(topic, key=b"k", value=f"kp-{i}".encode()) for i in range(50)]
    producer.flush(30)
    for future in futures:
        future.get(10)
    producer.close()
    assert [value for *_, value, _ in read_all(cluster, topic, 1, 50)] == [
        f"kp-{i}".encode() for i in range(50)]


def _batch(producer_id: int, sequence: int, values: list[bytes]) -> bytes:
    now = int(time.time() * 1000)
    payload = b"".join(encode_record(i, 0, None, value) for i, value in enumerate(values))
    batch, _ = frame_batch(payload, len(values), now, now, producer_id=producer_id,
                           producer_epoch=0, base_sequence=sequence)
    return bytes(batch)


@pytest.mark.slow
def test_a_retried_batch_is_placed_once(cluster: BrokerProcess, agent: DatabusProcess) -> None:
    topic = make_topic_name("retry")
    create_topic(cluster, topic, 1)
    address = ("127.0.0.1", agent.port)

    async def exchange() -> list[Any]:
        init = await ask_once(address, InitProducerIdRequest(transactional_id=None,
                                                             transaction_timeout_ms=-1),
                              4, 10, "test")
        producer_id = init.producer_id
        answers = []
        for sequence, values in ((0, [b"a", b"b"]), (0, [b"a", b"b"]), (2, [b"c"]),
                                 (5, [b"gap"])):
            response = await ask_once(address, ProduceRequest(acks=-1, timeout_ms=10000,
                topic_data=[TopicProduceData(name=topic, partition_data=[
                    PartitionProduceData(index=0,
                                         records=_batch(producer_id, sequence, values))])]),
                9, 15, "test")
            answers.append(response.responses[0].partition_responses[0].error_code)
        return answers

    assert asyncio.run(exchange()) == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE,
                                       ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
    assert [value for *_, value, _ in read_all(cluster, topic, 1, 3)] == [b"a", b"b", b"c"]


@pytest.mark.slow
def test_a_corrupt_batch_is_refused_and_nothing_is_written(cluster: BrokerProcess,
                                                           agent: DatabusProcess) -> None:
    topic = make_topic_name("corrupt")
    create_topic(cluster, topic, 1)
    good = bytearray(_batch(-1, -1, [b"kept"]))
    bad = bytearray(_batch(-1, -1, [b"never"]))
    bad[-1] ^= 0xFF                                 # a byte the CRC-32C covers

    async def produce(records: bytes) -> Any:
        response = await ask_once(("127.0.0.1", agent.port), ProduceRequest(
            acks=-1, timeout_ms=10000, topic_data=[TopicProduceData(name=topic, partition_data=[
                PartitionProduceData(index=0, records=records)])]), 9, 15, "test")
        return response.responses[0].partition_responses[0].error_code

    assert asyncio.run(produce(bytes(bad))) == ErrorCode.CORRUPT_MESSAGE
    assert asyncio.run(produce(bytes(good))) == ErrorCode.NONE
    assert [value for *_, value, _ in read_all(cluster, topic, 1, 1)] == [b"kept"]
