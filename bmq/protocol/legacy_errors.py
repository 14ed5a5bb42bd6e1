"""The error codes an old API version knows (issue #36): where Kafka answered a version that
predates an error code with an older code instead, BMQ does the same, in one place, as the
response is encoded for its version (``KafkaConnection``), not in each handler.

A client that gets a code it does not know treats it as UNKNOWN_SERVER_ERROR, which it does
not retry; the older code Kafka chose makes it refresh its metadata or coordinator and retry.
Each mapping below is one Kafka made, with where it made it. Error codes that only a newer
request field can cause need no mapping, since an old version cannot ask for them:
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH need a client's leader epoch (Fetch v9+, ListOffsets
v4+, OffsetForLeaderEpoch v2+), MEMBER_ID_REQUIRED is asked of JoinGroup v4+ only (KIP-394),
UNSTABLE_OFFSET_COMMIT needs OffsetFetch v7's require_stable, FENCED_INSTANCE_ID a static
member's instance id (v5+ of the group APIs). BMQ answers no THROTTLING_QUOTA_EXCEEDED
(Kafka's controller mutation quota, strict from CreateTopics v6 / DeleteTopics v5 /
CreatePartitions v3 only, KIP-599). Renamed codes (NOT_LEADER_FOR_PARTITION, now
NOT_LEADER_OR_FOLLOWER; GROUP_COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR_FOR_GROUP, now
COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR) kept their numbers and need nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import REQUEST_APIS


class OlderCode(NamedTuple):
    """Below ``first_version`` of ``api``, ``newer`` is answered as ``older``."""

    api: str
    first_version: int
    newer: ErrorCode
    older: ErrorCode
    kafka: str  # where Kafka does it


OLDER_CODES: tuple[OlderCode, ...] = (
    # KIP-112 (Kafka 1.0) added KAFKA_STORAGE_ERROR from Produce v4 and Fetch v6; an older
    # client retries NOT_LEADER_FOR_PARTITION after a metadata refresh.
    OlderCode("Produce", 4, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER,
              "ProduceResponse.toStruct, Kafka 1.0-2.7 (version <= 3)"),
    OlderCode("Fetch", 6, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER,
              "KafkaApis.handleFetchRequest maybeDownConvertStorageError (version <= 5)"),
    OlderCode("ListOffsets", 5, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE,
              "KafkaApis.handleListOffsetRequestV1AndAbove (apiVersion >= 5 else)"),
    OlderCode("Metadata", 6, ErrorCode.LISTENER_NOT_FOUND, ErrorCode.LEADER_NOT_AVAILABLE,
              "KafkaApis.handleTopicMetadataRequest errorUnavailableListeners (version >= 6)"),
    OlderCode("DeleteTopics", 3, ErrorCode.TOPIC_DELETION_DISABLED, ErrorCode.INVALID_REQUEST,
              "KafkaApis.handleDeleteTopicsRequest (apiVersion < 3)"),
    # KIP-588 (Kafka 2.7): PRODUCER_FENCED from these versions, INVALID_PRODUCER_EPOCH before.
    OlderCode("InitProducerId", 4, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
              "KafkaApis.handleInitProducerIdRequest (version < 4)"),
    OlderCode("AddPartitionsToTxn", 2, ErrorCode.PRODUCER_FENCED,
              ErrorCode.INVALID_PRODUCER_EPOCH,
              "KafkaApis.handleAddPartitionsToTxnRequest (version < 2)"),
    OlderCode("AddOffsetsToTxn", 2, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
              "KafkaApis.handleAddOffsetsToTxnRequest (version < 2)"),
    OlderCode("EndTxn", 2, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
              "KafkaApis.handleEndTxnRequest (version < 2)"),
    # Producers 0.11-2.0 could crash on a loading coordinator (KAFKA-7296).
    OlderCode("TxnOffsetCommit", 2, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.COORDINATOR_NOT_AVAILABLE,
              "KafkaApis.handleTxnOffsetCommitRequest (version < 2)"),
)


def _by_api_key() -> dict[int, tuple[int, dict[int, dict[int, int]]]]:
    """api key -> (the highest version any mapping applies below, and per version the codes
    to replace, newer -> older)."""
    table: dict[int, tuple[int, dict[int, dict[int, int]]]] = {}
    for api in {code.api for code in OLDER_CODES}:
        key, min_version, _ = REQUEST_APIS[f"{api}Request"]
        mappings = [code for code in OLDER_CODES if code.api == api]
        below = max(code.first_version for code in mappings)
        table[key] = (below, {
            version: {c.newer: c.older for c in mappings if version < c.first_version}
            for version in range(min_version, below)})
    return table


_BY_API_KEY = _by_api_key()


def _error_fields(message: Any) -> Iterator[tuple[Any, str]]:
    """(struct, field name) of every error code in ``message`` and the structs nested in it:
    ``error_code`` and the few named for their level (AddPartitionsToTxn's
    ``partition_error_code``)."""
    for field in dataclasses.fields(message):
        value = getattr(message, field.name)
        if field.name.endswith("error_code"):
            yield message, field.name
        elif isinstance(value, list):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from _error_fields(item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _error_fields(value)


@contextmanager
def older_codes(api_key: int, version: int, response: Any) -> Iterator[None]:
    """While the block writes ``response`` as ``version``, its error codes are those the
    version knows; they are put back after, since a handler may share a response object (a
    cached one) with clients of newer versions. Costs one lookup for other versions."""
    entry = _BY_API_KEY.get(api_key)
    if entry is None or version >= entry[0]:
        yield
        return
    replaced = []
    mappings = entry[1].get(version, {})
    for holder, name in _error_fields(response):
        code = getattr(holder, name)
        older = mappings.get(code)
        if older is not None:
            replaced.append((holder, name, code))
            setattr(holder, name, older)
    try:
        yield
    finally:
        for holder, name, code in replaced:
            setattr(holder, name, code)
