"""The error codes old API versions know (issue #36, bmq.protocol.legacy_errors): a response
encoded for a version older than an error code carries the code Kafka answered that version
instead, written by the connection's real encoder and read back by the generated decoder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bmq.net.connection import KafkaConnection
from bmq.protocol import messages as m
from bmq.protocol.errors import ErrorCode
from bmq.protocol.headers import read_response_header, response_header_version
from bmq.protocol.legacy_errors import OLDER_CODES
from bmq.protocol.messages import REQUEST_APIS
from bmq.protocol.messages import add_partitions_to_txn_response as add_partitions
from bmq.protocol.messages import delete_topics_response as delete_topics
from bmq.protocol.messages import fetch_response as fetch
from bmq.protocol.messages import list_offsets_response as list_offsets
from bmq.protocol.messages import metadata_response as metadata
from bmq.protocol.messages import produce_response as produce
from bmq.protocol.messages import txn_offset_commit_response as txn_offset_commit
from bmq.protocol.primitives import Reader

# api -> (a response carrying ``code`` where that API's handler puts it, where to read it)
Build = Callable[[int], Any]
Read = Callable[[Any], int]
RESPONSES: dict[str, tuple[Build, Read]] = {
    "Produce": (
        lambda code: produce.ProduceResponse(responses=[produce.TopicProduceResponse(
            name="t", partition_responses=[produce.PartitionProduceResponse(error_code=code)])]),
        lambda r: r.responses[0].partition_responses[0].error_code),
    "Fetch": (
        lambda code: fetch.FetchResponse(responses=[fetch.FetchableTopicResponse(
            topic="t", partitions=[fetch.PartitionData(error_code=code)])]),
        lambda r: r.responses[0].partitions[0].error_code),
    "ListOffsets": (
        lambda code: list_offsets.ListOffsetsResponse(topics=[
            list_offsets.ListOffsetsTopicResponse(name="t", partitions=[
                list_offsets.ListOffsetsPartitionResponse(error_code=code)])]),
        lambda r: r.topics[0].partitions[0].error_code),
    "Metadata": (
        lambda code: metadata.MetadataResponse(topics=[metadata.MetadataResponseTopic(
            name="t", partitions=[metadata.MetadataResponsePartition(error_code=code)])]),
        lambda r: r.topics[0].partitions[0].error_code),
    "DeleteTopics": (
        lambda code: delete_topics.DeleteTopicsResponse(responses=[
            delete_topics.DeletableTopicResult(name="t", error_code=code)]),
        lambda r: r.responses[0].error_code),
    "InitProducerId": (lambda code: m.InitProducerIdResponse(error_code=code),
                       lambda r: r.error_code),
    "AddPartitionsToTxn": (
        lambda code: m.AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
            add_partitions.AddPartitionsToTxnTopicResult(name="t", results_by_partition=[
                add_partitions.AddPartitionsToTxnPartitionResult(
                    partition_error_code=code)])]),
        lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0]
        .partition_error_code),
    "AddOffsetsToTxn": (lambda code: m.AddOffsetsToTxnResponse(error_code=code),
                        lambda r: r.error_code),
    "EndTxn": (lambda code: m.EndTxnResponse(error_code=code), lambda r: r.error_code),
    "TxnOffsetCommit": (
        lambda code: txn_offset_commit.TxnOffsetCommitResponse(topics=[
            txn_offset_commit.TxnOffsetCommitResponseTopic(name="t", partitions=[
                txn_offset_commit.TxnOffsetCommitResponsePartition(error_code=code)])]),
        lambda r: r.topics[0].partitions[0].error_code),
}


def _answered(api: str, version: int, response: Any) -> Any:
    """``response`` as a client of ``version`` reads it off the wire."""
    api_key = REQUEST_APIS[f"{api}Request"][0]
    wire = b"".join(KafkaConnection._encode(7, api_key, version, response))
    reader = Reader(wire, 4)
    assert read_response_header(reader, response_header_version(api_key, version)) == 7
    return type(response).read(reader, version)


@pytest.mark.parametrize("mapping", OLDER_CODES, ids=lambda c: f"{c.api}-{c.newer.name}")
def test_old_version_gets_the_older_code(mapping: Any) -> None:
    build, read = RESPONSES[mapping.api]
    response = build(mapping.newer)
    last_old = mapping.first_version - 1
    assert read(_answered(mapping.api, last_old, response)) == mapping.older
    # the response object is left as the handler made it (a cached one serves newer clients)
    assert read(response) == mapping.newer
    assert read(_answered(mapping.api, mapping.first_version, response)) == mapping.newer


@pytest.mark.parametrize("mapping", OLDER_CODES, ids=lambda c: f"{c.api}-{c.newer.name}")
def test_old_version_keeps_codes_it_knows(mapping: Any) -> None:
    build, read = RESPONSES[mapping.api]
    answered = _answered(mapping.api, mapping.first_version - 1,
                         build(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    assert read(answered) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_every_mapping_has_a_response() -> None:
    assert {c.api for c in OLDER_CODES} == set(RESPONSES)
