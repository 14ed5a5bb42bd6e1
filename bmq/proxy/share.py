"""Share consumers through a proxy (KIP-932's ShareFetch and ShareAcknowledge).

A client's share session is with the proxy Metadata names as its partitions' leader; behind it,
each partition's owner keeps a share session of its own for the member (the records' locks and
the session epochs are the owners'). The proxy keeps, per (group, member), the client's session
(its partitions and next epoch) and one session at each owner it forwards to, and splits every
request by owner: each owner gets its partitions' acknowledgements, the partitions it newly
serves, the ones it no longer does as forgotten, and its own next epoch. The answers are merged
into one, each partition naming the proxy as its leader. A partition that moved is forgotten
at its old owner and added at its new one; an owner that cannot be reached answers its
partitions NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and fetches again, and
the records it held come back when their locks expire). Membership (ShareGroupHeartbeat) is
the group coordinator's, which FindCoordinator names to the client directly.

Owners are asked in parallel and the answer waits for all of them: with partitions on several
owners a fetch can wait up to MaxWaitMs at an owner with nothing to deliver.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bmq.client.requests import Address, ask_each
from bmq.net.client import LinkPool
from bmq.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from bmq.protocol.messages import ShareAcknowledgeRequest, ShareFetchRequest


SESSION_IDLE_S = 300.0       # as a broker's share sessions
MAX_EPOCH = 2**31 - 1
IdPartition = tuple[uuid.UUID, int]
Batches = list[Any]          # a request's acknowledgement batches (either API's class)


def next_epoch(epoch: int) -> int:
    return epoch % MAX_EPOCH + 1


@dataclass(slots=True)
class _OwnerSession:
    """The member's share session at one owner."""

    epoch: int = 0                                    # the next to send (0: open one)
    partitions: set[IdPartition] = field(default_factory=set)


@dataclass(slots=True)
class _ClientSession:
    next_epoch: int = 1
    partitions: list[IdPartition] = field(default_factory=list)
    owners: dict[Address, _OwnerSession] = field(default_factory=dict)
    used: float = field(default_factory=time.monotonic)


class ShareSessionRelay:
    """The share sessions a proxy relays, by (group, member)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], _ClientSession] = {}

    def use(self, group_id: str, member_id: str, epoch: int
            ) -> tuple[ErrorCode, _ClientSession | None]:
        """The client's session for a request with ``epoch`` (opened at 0), as a broker
        checks it."""
        now = time.monotonic()
        for key, idle in list(self._sessions.items()):
            if now - idle.used > SESSION_IDLE_S:
                del self._sessions[key]
        key = (group_id, member_id)
        if epoch == 0:
            session = self._sessions[key] = _ClientSession()
            return ErrorCode.NONE, session
        found = self._sessions.get(key)
        if found is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        found.used = now
        if epoch == -1:
            del self._sessions[key]
            return ErrorCode.NONE, found
        if epoch != found.next_epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        found.next_epoch = next_epoch(found.next_epoch)
        return ErrorCode.NONE, found

    def drop(self, group_id: str, member_id: str) -> None:
        """An owner lost the member's session: the client starts a new one (epoch 0)."""
        self._sessions.pop((group_id, member_id), None)


@dataclass(slots=True)
class OwnerCall:
    """What one owner is sent: its partitions' acknowledgements, added and forgotten ones."""

    address: Address
    owner: _OwnerSession
    epoch: int
    acks: dict[IdPartition, Batches] = field(default_factory=dict)
    added: list[IdPartition] = field(default_factory=list)
    forgotten: list[IdPartition] = field(default_factory=list)


def plan(session: _ClientSession, wanted: list[IdPartition],
         acks: dict[IdPartition, Batches], owner_of: Any, closing: bool
         ) -> tuple[list[OwnerCall], dict[IdPartition, ErrorCode]]:
    """Split a request by owner (``owner_of(tp)``: its address, or an ErrorCode); the
    partitions no owner serves now, with their errors."""
    calls: dict[Address, OwnerCall] = {}
    failed: dict[IdPartition, ErrorCode] = {}

    def call(address: Address) -> OwnerCall:
        found = calls.get(address)
        if found is None:
            owner = session.owners.setdefault(address, _OwnerSession())
            epoch = -1 if closing else owner.epoch
            found = calls[address] = OwnerCall(address, owner, epoch)
        return found

    placed: dict[IdPartition, Address] = {}
    for tp in dict.fromkeys([*wanted, *acks]):
        where = owner_of(tp)
        if isinstance(where, ErrorCode):
            failed[tp] = where
            continue
        placed[tp] = where
        target = call(where)
        if tp in acks:
            target.acks[tp] = acks[tp]
        if tp in wanted and (tp not in target.owner.partitions or target.epoch == 0):
            target.added.append(tp)
    for address, owner in session.owners.items():
        gone = [tp for tp in owner.partitions if placed.get(tp, address) != address
                or tp not in wanted]
        if gone and owner.epoch > 0 and not closing:
            call(address).forgotten += gone
    if closing:     # every owner session closes, with its acknowledgements if any
        for address in session.owners:
            call(address)
    return list(calls.values()), failed


def settle(call: OwnerCall, error: ErrorCode) -> None:
    """Note an owner's answer: its session moves to the next epoch (or starts afresh)."""
    owner = call.owner
    if error != ErrorCode.NONE:
        owner.epoch, owner.partitions = 0, set()
        return
    owner.epoch = next_epoch(call.epoch) if call.epoch >= 0 else 0
    if call.epoch == 0:
        owner.partitions = set()
    owner.partitions |= set(call.added)
    owner.partitions -= set(call.forgotten)


def fetch_request(request: ShareFetchRequest, call: OwnerCall) -> ShareFetchRequest:
    # (message modules load on first use, as the handlers do)
    from bmq.protocol.messages import ShareFetchRequest
    from bmq.protocol.messages.share_fetch_request import (
        FetchPartition,
        FetchTopic,
        ForgottenTopic,
    )

    topics: dict[uuid.UUID, list[FetchPartition]] = {}
    for tp in dict.fromkeys([*call.added, *call.acks]):
        topics.setdefault(tp[0], []).append(FetchPartition(
            partition_index=tp[1], acknowledgement_batches=call.acks.get(tp, [])))
    forgotten: dict[uuid.UUID, list[int]] = {}
    for topic_id, index in call.forgotten:
        forgotten.setdefault(topic_id, []).append(index)
    return ShareFetchRequest(
        group_id=request.group_id, member_id=request.member_id,
        share_session_epoch=call.epoch, max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes, max_bytes=request.max_bytes,
        max_records=request.max_records, batch_size=request.batch_size,
        topics=[FetchTopic(topic_id=t, partitions=p) for t, p in topics.items()],
        forgotten_topics_data=[ForgottenTopic(topic_id=t, partitions=p)
                               for t, p in forgotten.items()])


def acknowledge_request(request: ShareAcknowledgeRequest, call: OwnerCall
                        ) -> ShareAcknowledgeRequest:
    from bmq.protocol.messages import ShareAcknowledgeRequest
    from bmq.protocol.messages.share_acknowledge_request import (
        AcknowledgePartition,
        AcknowledgeTopic,
    )

    topics: dict[uuid.UUID, list[AcknowledgePartition]] = {}
    for (topic_id, index), batches in call.acks.items():
        topics.setdefault(topic_id, []).append(AcknowledgePartition(
            partition_index=index, acknowledgement_batches=batches))
    return ShareAcknowledgeRequest(
        group_id=request.group_id, member_id=request.member_id,
        share_session_epoch=call.epoch,
        topics=[AcknowledgeTopic(topic_id=t, partitions=p) for t, p in topics.items()])


async def ask_owners(links: LinkPool, calls: list[OwnerCall], build: Any, version: int
                     ) -> list[tuple[OwnerCall, Any]]:
    """Each owner's answer (None if it cannot be reached), in parallel."""
    answers = await ask_each(links, [(call.address, build(call)) for call in calls], version)
    return list(zip(calls, answers, strict=True))
