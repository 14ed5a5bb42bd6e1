"""Produce: validate batches, assign offsets, queue for the writer, answer per acks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Protocol

from bmq.broker.broker import Broker
from bmq.broker.handlers.base import RequestContext
from bmq.broker.txn_peers import verification_error
from bmq.metadata.acls import Operation, ResourceType
from bmq.metadata.mirrors import refuse_mirrored
from bmq.metadata.topics import INTERNAL_TOPICS
from bmq.metadata.views import refuse_view
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.message_sets import FIRST_V2_PRODUCE_VERSION, is_message_set, to_batch
from bmq.protocol.messages import ProduceRequest, ProduceResponse
from bmq.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from bmq.protocol.records import (
    HEADER_SIZE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    read_header,
    set_leader_epoch,
    validate_batches,
)
from bmq.storage import AppendResult
from bmq.writepath.conversion import (
    InvalidRecordsError,
    convert_batches,
    needs_conversion,
    require_keys,
)
from bmq.writepath.partitions import Partition, now_ms

Verdicts = dict[tuple[str, int], tuple[ErrorCode, object]]


def check_transactional(broker: Broker, partition: Partition, transactional_id: str | None,
                        headers: list[BatchHeader], tp: tuple[str, int],
                        verified: Verdicts) -> None:
    """Transactional batches only from a transactional producer, and only to a partition added
    to its ongoing transaction (KIP-890 part 1: a late retry cannot open a hanging transaction
    that would hold the last stable offset back). ``verified``: what the transaction's
    coordinator on another broker answered (``verify_elsewhere``), with the guard a marker of
    the producer appended here meanwhile has cleared (the transaction ended after the answer).
    ``partition`` is ``tp``'s, which the caller has already looked up. Raises the Kafka error;
    nothing is written."""
    transactional = [h for h in headers if h.attributes & TRANSACTIONAL_FLAG]
    if transactional_id is None:
        if transactional:
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                             "transactional batches need a transactional.id")
        return
    if len(transactional) != len(headers) or len({h.producer_id for h in headers}) != 1:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         "a transactional produce carries transactional batches of one producer")
    first = headers[0]
    verdict = verified.get(tp)
    if verdict is not None:
        error, guard = verdict
        if error == ErrorCode.NONE and not partition.verification_holds(first.producer_id,
                                                                        guard):
            error = ErrorCode.INVALID_TXN_STATE
    elif partition.log.in_transaction(first.producer_id, first.producer_epoch):
        error = ErrorCode.NONE      # a batch of a transaction already verified here
    else:
        error = verification_error(broker.transactions.verify(
            transactional_id, first.producer_id, first.producer_epoch, tp))
    if error != ErrorCode.NONE:
        raise KafkaError(error, f"{tp[0]}-{tp[1]} is not part of the producer's transaction"
                         if error == ErrorCode.INVALID_TXN_STATE else None)


async def verify_elsewhere(broker: Broker, request: ProduceRequest) -> Verdicts:
    """Cluster mode: ask the transaction's coordinator, on another broker, about each
    partition this produce opens the producer's transaction on (its first batch there).
    Nothing is awaited unless such a partition exists, so produces stay in request order."""
    txn_id = request.transactional_id
    peers = broker.txn_peers
    # Asked elsewhere unless this broker serves the id now or is loading it; also when its
    # coordinator has not started yet (it starts once the broker sees __transaction_state,
    # which the first transactional producer's FindCoordinator made through another broker).
    if txn_id is None or peers is None or broker.transactions.shard_error(txn_id) in (
            ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return {}
    asked: dict[tuple[str, int], asyncio.Future[ErrorCode]] = {}
    guards: dict[tuple[str, int], object] = {}
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            records = data.records
            if not isinstance(records, memoryview) or len(records) < HEADER_SIZE:
                continue
            try:
                name = broker.topic_name(topic_data.name, topic_data.topic_id)
                partition = await broker.served_partition(name, data.index)
            except KafkaError:
                continue        # answered with its error by the produce itself
            header = read_header(records)
            if not partition.log.in_transaction(header.producer_id, header.producer_epoch):
                guards[(name, data.index)] = partition.start_verification(header.producer_id)
                asked[(name, data.index)] = peers.verification(
                    txn_id, header.producer_id, header.producer_epoch, (name, data.index))
    if not asked:
        return {}
    await asyncio.wait(list(asked.values()))
    return {tp: (future.result(), guards[tp]) for tp, future in asked.items()}


async def hold_scheduled(broker: Broker, partition: Partition, records: memoryview,
                         headers: list[BatchHeader], now: int, where: str
                         ) -> tuple[AppendResult, asyncio.Future[None]] | None:
    """Scheduled delivery: batches with scheduled records go to the partition's timer log
    (opened on first use, e.g. after bmq.delay.enable was turned on); None for the others.
    A compacted topic's keyless records are refused first, as on the normal path: nothing of
    the produce is held or written."""
    timer = broker.timers.timer(partition) or await broker.timers.start(partition)
    if partition.log.config.compact and timer.would_hold(records, headers):
        require_keys(records, headers, where)
    return timer.hold(records, headers, now)


class PartitionAnswer(Protocol):
    error_code: int


async def wait_durable(waits: Sequence[tuple[PartitionAnswer, asyncio.Future[None]]],
                       timeout_ms: int) -> None:
    """Wait up to ``timeout_ms`` for appended batches to be durable; each answer whose batches
    are not gets the error: REQUEST_TIMED_OUT, or the failure of the flush."""
    if not waits:
        return
    await asyncio.wait([waiter for _, waiter in waits], timeout=timeout_ms / 1000)
    for answer, waiter in waits:
        if not waiter.done():
            waiter.cancel()
            answer.error_code = ErrorCode.REQUEST_TIMED_OUT
        elif (failure := waiter.exception()) is not None:
            answer.error_code = (failure.code if isinstance(failure, KafkaError)
                                 else ErrorCode.KAFKA_STORAGE_ERROR)


async def handle_produce(ctx: RequestContext, request: ProduceRequest,
                         version: int) -> ProduceResponse | None:
    broker = ctx.broker
    acks = request.acks
    legacy_clients = broker.config.legacy_clients_enable
    txn_denied = request.transactional_id is not None and not ctx.authorize(
        Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    # A connection's batches are appended in the order the client sent them (its idempotent
    # sequences depend on it), as Kafka handles a connection's requests one at a time: a
    # produce waiting here (a partition opened on first use, a verification) holds up the
    # connection's later ones, which would otherwise append past it.
    async with ctx.appends_in_order or contextlib.nullcontext():
        verified = {} if txn_denied else await verify_elsewhere(broker, request)
        durable_waits: list[tuple[PartitionProduceResponse, asyncio.Future[None]]] = []
        topics: list[TopicProduceResponse] = []
        timestamp = now_ms()
        for topic_data in request.topic_data:
            results = []
            try:
                name = broker.topic_name(topic_data.name, topic_data.topic_id)
                topic_error = None
            except KafkaError as error:
                name, topic_error = topic_data.name, error
            for data in topic_data.partition_data:
                result = PartitionProduceResponse(index=data.index, base_offset=-1)
                results.append(result)
                try:
                    if topic_error is not None:
                        raise topic_error
                    if txn_denied:
                        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    ctx.require(Operation.WRITE, ResourceType.TOPIC, name)
                    if version < FIRST_V2_PRODUCE_VERSION and not legacy_clients:
                        # Listed for librdkafka's sake (KAFKA-18659), refused as in Kafka 4.
                        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                                         "Produce v0-2 (message format v0/v1) are not served: "
                                         "bmq.legacy.clients.enable is off")
                    if acks not in (-1, 0, 1):
                        raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                    if name in INTERNAL_TOPICS:
                        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                         f"Producing to internal topic {name} is not allowed")
                    refuse_view(broker.topics, name)
                    refuse_mirrored(broker.topics, name)
                    partition = await broker.served_partition(name, data.index)
                    partition.check_writable()
                    if not broker.can_acknowledge():
                        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "ack lease expired")
                    records = data.records
                    # Decoded requests always carry a writable view into the request frame.
                    if not isinstance(records, memoryview) or len(records) == 0:
                        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batches")
                    config = partition.log.config
                    if version < FIRST_V2_PRODUCE_VERSION and is_message_set(records):
                        # Stored as v2, once; the request holds it too, for the metrics' count.
                        records, _ = to_batch(records)
                        data.records = records
                    headers = validate_batches(records, config.max_message_bytes)
                    check_transactional(broker, partition, request.transactional_id, headers,
                                        (name, data.index), verified)
                    # One check per batch for topics without scheduled delivery.
                    held = await hold_scheduled(broker, partition, records, headers, timestamp,
                                                f"{name}-{data.index}") \
                        if config.delay_enable else None
                    if held is not None:    # answered with offsets in the timer log
                        appended, durable = held
                        result.base_offset = appended.base_offset
                        result.log_start_offset = partition.log.log_start_offset
                        if acks == -1:
                            durable_waits.append((result, durable))
                        continue
                    if needs_conversion(config):  # compression.type or compact set on the topic
                        records, headers = convert_batches(records, headers, config,
                                                           f"{name}-{data.index}")
                    if len(records) > config.segment_bytes:
                        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                                         "record set is larger than segment.bytes")
                    position = 0
                    for header in headers:  # Kafka stamps the leader epoch into every batch
                        set_leader_epoch(records, position, partition.leader_epoch)
                        position += header.size
                    # A partition that held batches in its timer log (scheduling on, or on
                    # before) shares producers' sequence numbers with it.
                    timer = broker.timers.timer(partition)
                    appended = partition.log.append(
                        records, headers, timestamp,
                        sequences_from=timer.timer_log.log if timer is not None else None)
                    result.base_offset = appended.base_offset
                    result.log_append_time_ms = appended.log_append_time
                    result.log_start_offset = appended.log_start_offset
                    partition.schedule_flush()
                    if acks == -1:
                        durable_waits.append((result, partition.durable(appended.last_offset)))
                except KafkaError as error:
                    result.error_code = error.code
                    result.error_message = error.message
                    if isinstance(error, InvalidRecordsError):
                        result.record_errors = [
                            BatchIndexAndErrorMessage(batch_index=index,
                                                      batch_index_error_message=message)
                            for index, message in error.record_errors]
            topics.append(TopicProduceResponse(name=name, topic_id=topic_data.topic_id,
                                               partition_responses=results))
    if acks == 0:
        return None
    await wait_durable(durable_waits, request.timeout_ms)
    if not broker.can_acknowledge():
        # Cluster mode: the ack lease ran out (e.g. this process was frozen); the partitions may
        # have moved, so nothing is acknowledged: the client retries on the current owner.
        for topic_response in topics:
            for result in topic_response.partition_responses:
                if result.error_code == ErrorCode.NONE:
                    result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    result.base_offset = -1
    return ProduceResponse(responses=topics)
