"""Databus stream mappings (`bmq databus`, issue #35): which topic a stream's messages go to,
and how they are partitioned, compressed and batched. One document kept with the cluster's
metadata (bmq/metadata/documents.py: `bmq serve`'s ``meta/``, or a znode in cluster mode),
served and changed by every broker over the Kafka port (BmqDescribeDatabusStreams,
BmqAlterDatabusStreams), so an agent needs nothing but the cluster's Kafka port; `bmq databus
map --zookeeper` changes the znode directly. The mapping's checks are here, for the brokers,
the command and the agents alike."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from bmq.metadata.documents import DocumentStore
from bmq.metadata.topics import MAX_TOPIC_NAME, check_topic_name
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import CODEC_IDS

log = logging.getLogger(__name__)

# What a mapping or an agent's settings may name as a stream's compression: Kafka's
# compression.type names ("none" as the producer's compression.type says it).
COMPRESSIONS = {"none": CODEC_IDS["uncompressed"], **CODEC_IDS}
# key: murmur2 of the key as Kafka's Java producer does (a key's records stay in one partition,
# in order); records without a key go where the stream's current batch goes. sticky: keys are
# ignored, each batch goes to one partition, the next batch to another (fewest requests).
PARTITIONERS = ("key", "sticky")
# The wire's value for a batching field left to the agent's setting (an int32 field).
AGENTS_SETTING = -1
INT32_MAX = (1 << 31) - 1


class MappingError(ValueError):
    """A mapping that cannot be used; its text says why, ``code`` as Kafka's error code."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_CONFIG) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class StreamMapping:
    topic: str
    partitioner: str = "key"
    compression: str | None = None      # None: the agent's setting
    linger_ms: int | None = None
    batch_bytes: int | None = None


def make_mapping(**fields: Any) -> StreamMapping:
    """A checked mapping (MappingError says what is wrong)."""
    known = {field.name for field in dataclasses.fields(StreamMapping)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise MappingError(f"unknown mapping field(s): {', '.join(unknown)}")
    try:
        check_topic_name(fields.get("topic"))
    except KafkaError as error:
        raise MappingError(error.message or "invalid topic name",
                           ErrorCode.INVALID_TOPIC_EXCEPTION) from error
    if fields.get("partitioner", "key") not in PARTITIONERS:
        raise MappingError(f"partitioner: one of {', '.join(PARTITIONERS)}")
    compression = fields.get("compression")
    if compression is not None and compression not in COMPRESSIONS:
        raise MappingError(f"compression: one of {', '.join(COMPRESSIONS)}")
    for name, lowest in (("linger_ms", 0), ("batch_bytes", 1)):
        value = fields.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not lowest <= value <= INT32_MAX):
            raise MappingError(f"{name}: a whole number from {lowest} to {INT32_MAX}")
    return StreamMapping(**fields)


def check_stream_name(stream: str) -> None:
    """A stream is named as a topic is (one with no mapping goes to the topic of its name)."""
    try:
        check_topic_name(stream)
    except KafkaError as error:
        raise MappingError(
            f"invalid stream name {stream!r}: a stream is named as a topic is (ASCII letters, "
            f"digits, '.', '_' and '-', at most {MAX_TOPIC_NAME})",
            ErrorCode.INVALID_TOPIC_EXCEPTION) from error


class WireMapping(Protocol):
    """A mapping's fields as BmqDescribeDatabusStreams and BmqAlterDatabusStreams carry them."""

    topic: str | None
    partitioner: str
    compression: str | None
    linger_ms: int
    batch_bytes: int


def from_wire(wire: WireMapping) -> StreamMapping:
    """The checked mapping a message carries (MappingError)."""
    return make_mapping(topic=wire.topic, partitioner=wire.partitioner,
                        compression=wire.compression,
                        linger_ms=None if wire.linger_ms == AGENTS_SETTING else wire.linger_ms,
                        batch_bytes=None if wire.batch_bytes == AGENTS_SETTING
                        else wire.batch_bytes)


def to_wire(mapping: StreamMapping) -> dict[str, Any]:
    """A mapping's fields for a message's stream entry (``DescribedDatabusStream(name=...,
    **to_wire(mapping))``)."""
    return {"topic": mapping.topic, "partitioner": mapping.partitioner,
            "compression": mapping.compression,
            "linger_ms": AGENTS_SETTING if mapping.linger_ms is None else mapping.linger_ms,
            "batch_bytes": AGENTS_SETTING if mapping.batch_bytes is None
            else mapping.batch_bytes}


@dataclasses.dataclass(frozen=True)
class StreamMappings:
    """The document: every stream's mapping, and a version that grows with every change. It is
    the document's own (not the store's, which `bmq serve` counts from 0 at each start), so an
    agent that holds version N knows it has the current mappings after restarts too."""

    version: int
    streams: Mapping[str, StreamMapping]


class DatabusStreamStore(DocumentStore[StreamMappings]):
    PATH = "databus_streams.json"

    def change(self, changes: Mapping[str, StreamMapping | None]) -> StreamMappings:
        """Set each stream's mapping (None: remove it) and save (blocking: a worker thread's);
        the mappings after."""

        def changed(current: StreamMappings) -> StreamMappings:
            streams = dict(current.streams)
            for stream, mapping in changes.items():
                if mapping is None:
                    streams.pop(stream, None)
                else:
                    streams[stream] = mapping
            return StreamMappings(current.version + 1, streams)

        self._change(changed)
        return self.value

    def _parse(self, data: bytes | None) -> StreamMappings:
        if data is None:
            return StreamMappings(0, {})
        doc = json.loads(data)
        streams = {}
        for stream, fields in doc.get("streams", {}).items():
            try:
                streams[str(stream)] = make_mapping(**fields)
            except (MappingError, TypeError) as error:     # (edited by hand)
                log.warning("databus stream %s: mapping ignored: %s", stream, error)
        return StreamMappings(int(doc.get("version", 0)), streams)

    def _serialize(self, value: StreamMappings) -> bytes:
        return json.dumps({"version": value.version, "streams": {
            stream: {k: v for k, v in dataclasses.asdict(mapping).items() if v is not None}
            for stream, mapping in sorted(value.streams.items())}}, indent=1).encode()
