"""WriteTxnMarkers is authorized as Kafka authorizes it: CLUSTER_ACTION on the cluster, on any
listener. An operator with it (a super user) aborts a hanging transaction with the Java
Admin's abortTransaction (`kafka-transactions.sh abort`) on a client listener; a principal
without it is refused (CLUSTER_AUTHORIZATION_FAILED) and nothing is written."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer

from bmq.net.client import BrokerLink
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import WriteTxnMarkersRequest
from bmq.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from bmq.security.link import NodeLogin
from tests.conftest import BrokerFactory
from tests.groups.helpers import create_topic, unique
from tests.integration.helpers import watermarks
from tests.security.conftest import (
    PASSWORD,
    USER,
    Certificates,
    SecureBroker,
    add_user,
    secure_broker,
)

BOB, BOB_SECRET = "bob", "bob-secret"


@pytest.fixture(scope="module")
def markers_broker(module_broker_factory: BrokerFactory,
                   certificates: Certificates) -> SecureBroker:
    secured = secure_broker(module_broker_factory, certificates, **{
        "authorizer.class.name": "bmq", "super.users": f"User:{USER};User:ANONYMOUS"})
    secured.broker.stop()
    add_user(secured.broker.data_dir, BOB, BOB_SECRET)
    secured.broker.start()
    return secured


def abort_marker(broker: SecureBroker, user: str, password: str, topic: str,
                 producer_id: int) -> int:
    """An ABORT marker for ``producer_id`` on partition 0, sent as ``user`` over the
    SASL_PLAINTEXT listener (a client listener); the partition's error code."""
    host, port = broker.bootstrap("SASL_PLAINTEXT").split(":")
    request = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=producer_id, producer_epoch=0, transaction_result=False,
        topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0])],
        coordinator_epoch=0)])

    async def send() -> int:
        link = BrokerLink(host, int(port), security=NodeLogin(None, "PLAIN", user, password))
        try:
            answer = await link.request(request, 1)
            return int(answer.markers[0].topics[0].partitions[0].error_code)
        finally:
            link.close()

    return asyncio.run(send())


def test_write_txn_markers_with_cluster_action_on_a_client_listener(
        markers_broker: SecureBroker) -> None:
    plain = markers_broker.broker.bootstrap
    topic = unique("markers")
    create_topic(plain, topic, 1)
    producer = Producer({"bootstrap.servers": plain, "transactional.id": unique("hanging")})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    assert producer.flush(15) == 0
    # (librdkafka's watermarks are read_committed ones: the end is the last stable offset.)
    assert watermarks(plain, topic) == (0, 0)
    # The hanging transaction's producer id: the first one this fresh broker gave out.
    assert abort_marker(markers_broker, BOB, BOB_SECRET, topic, 0) == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert watermarks(plain, topic) == (0, 0)
    assert abort_marker(markers_broker, USER, PASSWORD, topic, 0) == ErrorCode.NONE
    # The record and the marker: read_committed readers move on.
    assert watermarks(plain, topic) == (0, 2)
