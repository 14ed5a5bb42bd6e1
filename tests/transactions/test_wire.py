"""Transaction requests byte-exact (BMQ's codec as the client): Kafka's error codes for bad
input, and nothing written when a request is refused."""

from __future__ import annotations

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    OffsetFetchRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from bmq.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from bmq.protocol.messages.describe_producers_request import TopicRequest
from bmq.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from bmq.protocol.messages.offset_fetch_request import OffsetFetchRequestTopic
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from tests.groups.wire import RawClient
from tests.integration.helpers import create_topic, watermarks
from tests.integration.kwire import Record, build_record_batch

TXN_ID = "wire-txn"


def _init(client: RawClient, version: int = 4) -> tuple[int, int]:
    answer = client.call(InitProducerIdRequest(transactional_id=TXN_ID,
                                               transaction_timeout_ms=60000), version)
    assert answer.error_code == ErrorCode.NONE
    return answer.producer_id, answer.producer_epoch


def _produce(client: RawClient, topic: str, partition: int, pid: int, epoch: int,
             sequence: int, attributes: int = 0x10) -> int:
    batch = build_record_batch([Record(b"k", b"v")], attributes=attributes, producer_id=pid,
                               producer_epoch=epoch, base_sequence=sequence)
    answer = client.call(ProduceRequest(
        transactional_id=TXN_ID, acks=-1, timeout_ms=10000,
        topic_data=[TopicProduceData(name=topic, partition_data=[
            PartitionProduceData(index=partition, records=batch)])]), 9)
    return int(answer.responses[0].partition_responses[0].error_code)


def _add(client: RawClient, topic: str, partitions: list[int], pid: int, epoch: int,
         verify_only: bool = False) -> list[int]:
    answer = client.call(AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch,
        verify_only=verify_only,
        topics=[AddPartitionsToTxnTopic(name=topic, partitions=partitions)])]), 4)
    return [r.partition_error_code
            for r in answer.results_by_transaction[0].topic_results[0].results_by_partition]


def _latest(client: RawClient, isolation_level: int) -> int:
    answer = client.call(ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level,
                                            topics=[ListOffsetsTopic(name="txn-wire", partitions=[
                                                ListOffsetsPartition(partition_index=0,
                                                                     timestamp=-1)])]), 7)
    return int(answer.topics[0].partitions[0].offset)


def _txn_start(client: RawClient, pid: int) -> int:
    """DescribeProducers: where ``pid``'s open transaction on txn-wire-0 starts (-1: none)."""
    answer = client.call(DescribeProducersRequest(topics=[
        TopicRequest(name="txn-wire", partition_indexes=[0])]), 0)
    (partition,) = answer.topics[0].partitions
    assert partition.error_code == ErrorCode.NONE
    (producer,) = [p for p in partition.active_producers if p.producer_id == pid]
    return int(producer.current_txn_start_offset)


def test_bad_transactional_input_gets_kafkas_errors_and_writes_nothing(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "txn-wire", partitions=2)
    with RawClient(bootstrap) as client:
        found = client.call(FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN_ID]), 4)
        assert found.coordinators[0].error_code == ErrorCode.NONE
        too_long = client.call(InitProducerIdRequest(
            transactional_id=TXN_ID, transaction_timeout_ms=900_001), 4)
        assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        pid, epoch = _init(client)
        assert _add(client, "txn-wire", [0], pid, epoch) == [ErrorCode.NONE]
        # KIP-890 part 1: a partition not added to the transaction is refused, also when the
        # verify-only form asks.
        assert _produce(client, "txn-wire", 1, pid, epoch, 0) == ErrorCode.INVALID_TXN_STATE
        assert _add(client, "txn-wire", [0, 1], pid, epoch, verify_only=True) == [
            ErrorCode.NONE, ErrorCode.INVALID_TXN_STATE]
        assert watermarks(bootstrap, "txn-wire", 1) == (0, 0), "the refused batch was written"
        # A client's control batch: INVALID_RECORD, nothing written.
        assert _produce(client, "txn-wire", 0, pid, epoch, 0, attributes=0x30) == \
            ErrorCode.INVALID_RECORD
        assert watermarks(bootstrap, "txn-wire", 0) == (0, 0)
        assert _produce(client, "txn-wire", 0, pid, epoch, 0) == ErrorCode.NONE
        assert _txn_start(client, pid) == 0     # DescribeProducers: the open transaction
        # ListOffsets latest: the LSO (before the open transaction) for read_committed.
        assert (_latest(client, 1), _latest(client, 0)) == (0, 1)
        # A new instance (InitProducerId again) fences this one: its EndTxn has a stale epoch.
        # (As in Kafka: one bump aborts the open transaction, one is the new instance's.)
        new_pid, new_epoch = _init(client)
        assert (new_pid, new_epoch) == (pid, epoch + 2)
        stale = client.call(EndTxnRequest(transactional_id=TXN_ID, producer_id=pid,
                                          producer_epoch=epoch, committed=True), 3)
        assert stale.error_code == ErrorCode.PRODUCER_FENCED
        stale_v1 = client.call(EndTxnRequest(transactional_id=TXN_ID, producer_id=pid,
                                             producer_epoch=epoch, committed=True), 1)
        assert stale_v1.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert _produce(client, "txn-wire", 0, pid, epoch, 1) == \
            ErrorCode.INVALID_PRODUCER_EPOCH
        # The new instance's InitProducerId aborted the open transaction: one record and one
        # ABORT marker, nothing of the refused requests.
        assert watermarks(bootstrap, "txn-wire", 0) == (0, 2)
        assert _txn_start(client, pid) == -1
        described = client.call(DescribeTransactionsRequest(transactional_ids=[TXN_ID]), 0)
        state = described.transaction_states[0]
        assert (state.error_code, state.transaction_state, state.producer_epoch) == (
            ErrorCode.NONE, "Empty", new_epoch)
        listed = client.call(ListTransactionsRequest(state_filters=["Empty"]), 0)
        assert TXN_ID in [s.transactional_id for s in listed.transaction_states]

        # v2's transactional-id pattern is RE2 (RE2J in Kafka), matched against whole ids:
        # RE2's quoting \Q...\E (Java's Pattern.quote) too; a pattern that does not compile
        # gets Kafka's INVALID_REGULAR_EXPRESSION.
        def by_pattern(pattern: str) -> tuple[int, list[str]]:
            answer = client.call(ListTransactionsRequest(transactional_id_pattern=pattern), 2)
            return answer.error_code, [s.transactional_id for s in answer.transaction_states]

        assert by_pattern("wire-.*") == (ErrorCode.NONE, [TXN_ID])
        assert by_pattern("wire") == (ErrorCode.NONE, [])
        assert by_pattern("\\Qwire-\\E.x.") == (ErrorCode.NONE, [TXN_ID])
        assert by_pattern("\\Qwire.txn\\E") == (ErrorCode.NONE, [])
        assert by_pattern("(wire") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])


def test_kip_360_init_producer_id_with_the_current_epoch(txn_broker):
    with RawClient(txn_broker.bootstrap) as client:
        def init(pid: int, epoch: int) -> tuple[int, int, int]:
            answer = client.call(InitProducerIdRequest(
                transactional_id="kip-360", transaction_timeout_ms=60000, producer_id=pid,
                producer_epoch=epoch), 4)
            return answer.error_code, answer.producer_id, answer.producer_epoch

        error, pid, epoch = init(-1, -1)
        assert error == ErrorCode.NONE
        # A producer recovering from an abortable error sends its id and epoch: next epoch.
        assert init(pid, epoch) == (ErrorCode.NONE, pid, epoch + 1)
        # The same request retried (its answer lost) gets the same answer, not another bump.
        assert init(pid, epoch) == (ErrorCode.NONE, pid, epoch + 1)
        # Any other epoch belongs to a fenced instance.
        assert init(pid, epoch + 5)[0] == ErrorCode.PRODUCER_FENCED


def test_txn_offset_commit_checks_the_producer_and_the_generation(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "txn-offsets", partitions=1)
    with RawClient(bootstrap) as client:
        answer = client.call(InitProducerIdRequest(transactional_id="offsets-txn",
                                                   transaction_timeout_ms=60000), 4)
        pid, epoch = answer.producer_id, answer.producer_epoch

        def commit(generation: int, member: str, producer_epoch: int = epoch) -> int:
            answer = client.call(TxnOffsetCommitRequest(
                transactional_id="offsets-txn", group_id="txn-wire-group", producer_id=pid,
                producer_epoch=producer_epoch, generation_id=generation, member_id=member,
                topics=[TxnOffsetCommitRequestTopic(name="txn-offsets", partitions=[
                    TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]),
                3)
            return int(answer.topics[0].partitions[0].error_code)

        # Before AddOffsetsToTxn the group's offsets partition is not in the transaction.
        assert commit(-1, "") == ErrorCode.INVALID_TXN_STATE
        added = client.call(AddOffsetsToTxnRequest(
            transactional_id="offsets-txn", producer_id=pid, producer_epoch=epoch,
            group_id="txn-wire-group"), 3)
        assert added.error_code == ErrorCode.NONE
        assert commit(7, "ghost") == ErrorCode.ILLEGAL_GENERATION     # no such generation
        assert commit(-1, "", producer_epoch=epoch + 1) == ErrorCode.PRODUCER_FENCED
        assert commit(-1, "") == ErrorCode.NONE

        def fetched() -> tuple[int, int]:
            answer = client.call(OffsetFetchRequest(
                group_id="txn-wire-group", require_stable=True, topics=[
                    OffsetFetchRequestTopic(name="txn-offsets", partition_indexes=[0])]), 7)
            partition = answer.topics[0].partitions[0]
            return int(partition.error_code), int(partition.committed_offset)

        # Pending until the transaction commits; then the group's committed offset.
        assert fetched()[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
        ended = client.call(EndTxnRequest(transactional_id="offsets-txn", producer_id=pid,
                                          producer_epoch=epoch, committed=True), 3)
        assert ended.error_code == ErrorCode.NONE
        assert fetched() == (ErrorCode.NONE, 5)
