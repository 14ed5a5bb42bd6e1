"""What a broker asks other brokers for the sake of transactions, in cluster mode:

* the transaction coordinator writes the markers of a transaction into partitions other
  brokers own with WriteTxnMarkers, sent to each owner (Kafka's inter-broker path);
* a partition's owner verifies a producer's first transactional batch to the partition with
  the transaction's coordinator (AddPartitionsToTxn v4+, verify-only: KIP-890 part 1).

One connection per broker, shared by every request (``LinkPool``); an owner or coordinator
that cannot be reached is reported with a retriable error code.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from bmq.broker.membership import Membership
from bmq.coordinators.transactions import TRANSACTION_TOPIC
from bmq.metadata.topics import TopicPartition
from bmq.net.client import LinkError, LinkPool, LinkSecurity
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import AddPartitionsToTxnRequest, WriteTxnMarkersRequest
from bmq.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from bmq.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
VERIFY_VERSION = 4   # AddPartitionsToTxn's batched form, with verify_only


class TxnPeers:
    def __init__(self, membership: Membership, txn_partition_for: Callable[[str], int],
                 link_security: LinkSecurity | None = None) -> None:
        self._membership = membership
        self._links = LinkPool(f"bmq-broker-{membership.node.node_id}", link_security)
        self._txn_partition_for = txn_partition_for
        # One verification in flight per (producer, epoch, partition): later produces of the
        # same batches' successors wait on the same answer, so they are appended in order.
        self._verifying: dict[tuple[int, int, TopicPartition], asyncio.Future[ErrorCode]] = {}

    def close(self) -> None:
        self._links.close()

    # ------------------------------------------------------------------ markers
    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: Iterable[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        """Write a COMMIT or ABORT marker into each of ``partitions`` (owned by other brokers)
        through its owner; every partition's outcome (NONE once durable)."""
        by_owner: dict[tuple[str, int], list[TopicPartition]] = {}
        results: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            owner = self._membership.owner_node(*tp)
            if owner is None or owner.node_id == self._membership.node.node_id:
                results[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_owner.setdefault((owner.host, owner.port), []).append(tp)

        async def send(address: tuple[str, int], tps: list[TopicPartition]) -> None:
            topics: dict[str, list[int]] = {}
            for topic, index in tps:
                topics.setdefault(topic, []).append(index)
            request = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
                producer_id=producer_id, producer_epoch=producer_epoch,
                transaction_result=commit, coordinator_epoch=coordinator_epoch,
                topics=[WritableTxnMarkerTopic(name=t, partition_indexes=i)
                        for t, i in topics.items()])])
            try:
                response = await self._links.get(*address).request(
                    request, WRITE_TXN_MARKERS_VERSION)
            except (LinkError, OSError) as error:
                log.info("markers of producer %d: %s:%d not reachable (%s)", producer_id,
                         *address, error)
                results.update(dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER))
                return
            for marker in response.markers:
                for topic in marker.topics:
                    for answer in topic.partitions:
                        results[(topic.name, answer.partition_index)] = \
                            ErrorCode(answer.error_code)

        await asyncio.gather(*(send(address, tps) for address, tps in by_owner.items()))
        return {tp: results.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions}

    # ------------------------------------------------------------------ verification
    def verification(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     tp: TopicPartition) -> asyncio.Future[ErrorCode]:
        """Ask the transaction's coordinator whether ``tp`` is part of the producer's ongoing
        transaction; concurrent asks for the same batch sequence share one answer."""
        key = (producer_id, producer_epoch, tp)
        future = self._verifying.get(key)
        if future is None:
            future = asyncio.ensure_future(self._verify(transactional_id, producer_id,
                                                        producer_epoch, tp))
            self._verifying[key] = future
            future.add_done_callback(lambda _: self._verifying.pop(key, None))
        return future

    async def _verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      tp: TopicPartition) -> ErrorCode:
        coordinator = self._membership.owner_node(
            TRANSACTION_TOPIC, self._txn_partition_for(transactional_id))
        if coordinator is None:
            return ErrorCode.NOT_ENOUGH_REPLICAS      # retriable: no coordinator right now
        request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=True,
            topics=[AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])])])
        try:
            response = await self._links.get(coordinator.host, coordinator.port).request(
                request, VERIFY_VERSION)
        except (LinkError, OSError):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        if response.error_code != ErrorCode.NONE:
            return verification_error(ErrorCode(response.error_code))
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for answer in topic.results_by_partition:
                    return verification_error(ErrorCode(answer.partition_error_code))
        return ErrorCode.UNKNOWN_SERVER_ERROR


def verification_error(code: ErrorCode) -> ErrorCode:
    """What a produce is answered when the coordinator's verification says ``code``: the
    coordinator's own unavailability is retriable for every client (KIP-890:
    NOT_ENOUGH_REPLICAS); a fenced epoch is INVALID_PRODUCER_EPOCH, as Produce names it."""
    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
