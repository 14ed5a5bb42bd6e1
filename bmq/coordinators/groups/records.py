"""The records of the ``__consumer_offsets`` log: versioned keys and values.

Every record is a plain Kafka record (RecordBatch v2, uncompressed) whose key says what it is
about and whose value is the latest state of that thing; a null value (tombstone) deletes it.
Replaying the log from its start and keeping the last value per key rebuilds the coordinator.
All integers are big-endian; ``string`` is int16 length + UTF-8 (length -1 = null) and
``bytes`` is int32 length + data, as in the Kafka protocol.

Keys are Kafka's (an int16 record type, then the fields; generated from Kafka's specs)::

    type 1  OffsetCommitKey           group_id string, topic string, partition int32
    type 2  GroupMetadataKey          group_id string
    type 3  ConsumerGroupMetadataKey  group_id string (here: a KIP-848 group's whole state)

Values (int16 ``version`` first; only version 0 exists)::

    group metadata v0  Kafka's GroupMetadataValue version 3 field for field (generated from its
                       spec), after the version number 0: protocol_type string, generation
                       int32, protocol_name nullable string, leader nullable string,
                       state_timestamp int64, member count int32, then per member: member_id
                       string, group_instance_id nullable string, client_id string, client_host
                       string, rebalance_timeout_ms int32, session_timeout_ms int32,
                       subscription bytes (the member's metadata for the selected protocol),
                       assignment bytes

The other two values are BMQ's own, so they are written here by hand: Kafka's OffsetCommitValue
has no version with both a leader epoch and an expire timestamp, and Kafka keeps a KIP-848 group
in several kinds of record (group, members, target assignment, current assignments) where BMQ
writes the whole group as one value::

    offset commit v0   offset int64, leader_epoch int32 (-1 = none), metadata string,
                       commit_timestamp int64, expire_timestamp int64 (-1 = by group rules)
    consumer group v0  group_epoch int32, assignment_epoch int32, topic count int32, per
                       subscribed topic: name string, id uuid, partitions int32; member count
                       int32, per member: member_id string, instance_id nullable string,
                       rack_id nullable string, client_id string, client_host string,
                       rebalance_timeout_ms int32, topic names (int32 count, strings),
                       topic regex nullable string, server assignor nullable string,
                       member_epoch int32, previous_member_epoch int32, state int8,
                       then three assignments (assigned, pending revocation, target), each
                       int32 topic count and per topic: id uuid, int32 count, partitions int32

A reader skips records whose key type it does not know, so new kinds of record can be added
later without breaking older replays.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from bmq.protocol.coordinator_records import encode, read_prefix
from bmq.protocol.messages.consumer_group_metadata_key import ConsumerGroupMetadataKey
from bmq.protocol.messages.group_metadata_key import GroupMetadataKey
from bmq.protocol.messages.group_metadata_value import GroupMetadataValue, MemberMetadata
from bmq.protocol.messages.offset_commit_key import OffsetCommitKey
from bmq.protocol.primitives import DecodeError, Reader, Writer

VALUE_VERSION = 0
# The version of Kafka's GroupMetadataValue whose fields BMQ's version 0 holds.
_GROUP_METADATA_FIELDS = 3


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    group_id: str


@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol_name: str | None
    leader: str | None
    state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


# Topic id -> partitions.
Assignment = dict[uuid.UUID, set[int]]


@dataclass(eq=False, slots=True)
class ConsumerMemberValue:
    """A KIP-848 member as stored; ``consumer_group.ConsumerMember`` adds its timers."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0                      # consumer_group.MemberState
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    target: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerGroupValue:
    group_epoch: int
    assignment_epoch: int
    # Subscribed topic name -> (topic id, partitions) when the group epoch last moved.
    topics: dict[str, tuple[uuid.UUID, int]]
    members: list[ConsumerMemberValue]


Key = OffsetKey | GroupKey | ConsumerGroupKey
Value = OffsetValue | GroupValue | ConsumerGroupValue


# ---------------------------------------------------------------------------------- encoding

def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetKey):
        return encode(OffsetCommitKey.API_KEY,
                      OffsetCommitKey(key.group_id, key.topic, key.partition))
    if isinstance(key, GroupKey):
        return encode(GroupMetadataKey.API_KEY, GroupMetadataKey(key.group_id))
    return encode(ConsumerGroupMetadataKey.API_KEY, ConsumerGroupMetadataKey(key.group_id))


def encode_offset_value(value: OffsetValue) -> bytes:
    w = Writer()
    w.write_int16(VALUE_VERSION)
    w.write_int64(value.offset)
    w.write_int32(value.leader_epoch)
    w.write_string(value.metadata)
    w.write_int64(value.commit_timestamp)
    w.write_int64(value.expire_timestamp)
    return w.getvalue()


def encode_group_value(value: GroupValue) -> bytes:
    members = [MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.rebalance_timeout_ms, m.session_timeout_ms, m.subscription,
                              m.assignment) for m in value.members]
    return encode(VALUE_VERSION, GroupMetadataValue(
        value.protocol_type, value.generation, value.protocol_name, value.leader,
        value.state_timestamp, members), _GROUP_METADATA_FIELDS)


def _write_assignment(w: Writer, assignment: Assignment) -> None:
    w.write_int32(len(assignment))
    for topic_id, partitions in sorted(assignment.items()):
        w.write_uuid(topic_id)
        w.write_int32(len(partitions))
        for index in sorted(partitions):
            w.write_int32(index)


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    w = Writer()
    w.write_int16(VALUE_VERSION)
    w.write_int32(value.group_epoch)
    w.write_int32(value.assignment_epoch)
    w.write_int32(len(value.topics))
    for name, (topic_id, partitions) in sorted(value.topics.items()):
        w.write_string(name)
        w.write_uuid(topic_id)
        w.write_int32(partitions)
    w.write_int32(len(value.members))
    for m in value.members:
        w.write_string(m.member_id)
        w.write_nullable_string(m.instance_id)
        w.write_nullable_string(m.rack_id)
        w.write_string(m.client_id)
        w.write_string(m.client_host)
        w.write_int32(m.rebalance_timeout_ms)
        w.write_int32(len(m.subscribed_topic_names))
        for name in m.subscribed_topic_names:
            w.write_string(name)
        w.write_nullable_string(m.subscribed_topic_regex)
        w.write_nullable_string(m.server_assignor)
        w.write_int32(m.member_epoch)
        w.write_int32(m.previous_member_epoch)
        w.write_int8(m.state)
        for assignment in (m.assigned, m.pending_revocation, m.target):
            _write_assignment(w, assignment)
    return w.getvalue()


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetValue):
        return encode_offset_value(value)
    if isinstance(value, ConsumerGroupValue):
        return encode_consumer_group_value(value)
    return encode_group_value(value)


# ---------------------------------------------------------------------------------- decoding

def decode_key(data: bytes) -> Key | None:
    """The key of a record, or None for a key type this version does not know."""
    key_type, r = read_prefix(data)
    if key_type == OffsetCommitKey.API_KEY:
        offset = OffsetCommitKey.read(r, 0)
        return OffsetKey(offset.group, offset.topic, offset.partition)
    if key_type == GroupMetadataKey.API_KEY:
        return GroupKey(GroupMetadataKey.read(r, 0).group)
    if key_type == ConsumerGroupMetadataKey.API_KEY:
        return ConsumerGroupKey(ConsumerGroupMetadataKey.read(r, 0).group_id)
    return None


def _version(r: Reader) -> None:
    version = r.read_int16()
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown value version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    r = Reader(data)
    _version(r)
    return OffsetValue(offset=r.read_int64(), leader_epoch=r.read_int32(),
                       metadata=r.read_string(), commit_timestamp=r.read_int64(),
                       expire_timestamp=r.read_int64())


def decode_group_value(data: bytes) -> GroupValue:
    r = Reader(data)
    _version(r)
    value = GroupMetadataValue.read(r, _GROUP_METADATA_FIELDS)
    return GroupValue(
        value.protocol_type, value.generation, value.protocol, value.leader,
        value.current_state_timestamp,
        [MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                     m.rebalance_timeout, m.session_timeout, m.subscription, m.assignment)
         for m in value.members])


def _count(r: Reader) -> int:
    count = r.read_int32()
    if count < 0:
        raise DecodeError(f"negative count {count}")
    return count


def _read_assignment(r: Reader) -> Assignment:
    assignment: Assignment = {}
    for _ in range(_count(r)):
        topic_id = r.read_uuid()
        assignment[topic_id] = {r.read_int32() for _ in range(_count(r))}
    return assignment


def decode_consumer_group_value(data: bytes) -> ConsumerGroupValue:
    r = Reader(data)
    _version(r)
    value = ConsumerGroupValue(group_epoch=r.read_int32(), assignment_epoch=r.read_int32(),
                               topics={}, members=[])
    for _ in range(_count(r)):
        name = r.read_string()
        value.topics[name] = (r.read_uuid(), r.read_int32())
    for _ in range(_count(r)):
        value.members.append(ConsumerMemberValue(
            member_id=r.read_string(), instance_id=r.read_nullable_string(),
            rack_id=r.read_nullable_string(), client_id=r.read_string(),
            client_host=r.read_string(), rebalance_timeout_ms=r.read_int32(),
            subscribed_topic_names=tuple(r.read_string() for _ in range(_count(r))),
            subscribed_topic_regex=r.read_nullable_string(),
            server_assignor=r.read_nullable_string(), member_epoch=r.read_int32(),
            previous_member_epoch=r.read_int32(), state=r.read_int8(),
            assigned=_read_assignment(r), pending_revocation=_read_assignment(r),
            target=_read_assignment(r)))
    return value


def decode_record(key: bytes | None,
                  value: bytes | None) -> tuple[Key, Value | None] | None:
    """A record of the offsets log as (key, value or None for a tombstone); None to skip it."""
    if key is None:
        return None
    decoded = decode_key(key)
    if decoded is None:
        return None
    if value is None:
        return decoded, None
    if isinstance(decoded, OffsetKey):
        return decoded, decode_offset_value(value)
    if isinstance(decoded, ConsumerGroupKey):
        return decoded, decode_consumer_group_value(value)
    return decoded, decode_group_value(value)
