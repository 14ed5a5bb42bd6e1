"""What a cluster broker asks other brokers for the sake of share groups: the state of the
share-partitions of the partitions it leads is kept by their share coordinators, the owners of
the keys' ``__share_group_state`` partitions (``BmqShareState``, BMQ's counterpart of Kafka's
ReadShareGroupState and WriteShareGroupState). A coordinator that is this broker is called
directly; one that cannot be reached is reported as COORDINATOR_NOT_AVAILABLE (retriable).
"""

from __future__ import annotations

import asyncio
import logging

from bmq.broker.membership import Membership
from bmq.coordinators.sharded import Appended
from bmq.coordinators.share import SharePartitionManager
from bmq.coordinators.share.admin import ShareSummary, summaries
from bmq.coordinators.share.leader import LeaderShareState
from bmq.coordinators.share.records import StateKey, StateRecord, decode_value, encode_value
from bmq.coordinators.share.state import ShareStateCoordinator
from bmq.metadata.nodes import BrokerNode
from bmq.net.client import LinkError, LinkPool, LinkSecurity
from bmq.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

SHARE_STATE_VERSION = 0
PRODUCE_VERSION = 9      # topics by name, flexible


class ShareStatePeers:
    def __init__(self, membership: Membership, state_log: ShareStateCoordinator,
                 link_security: LinkSecurity | None = None) -> None:
        self._membership = membership
        self._log = state_log
        self._links = LinkPool(f"bmq-broker-{membership.node.node_id}", link_security)
        # The share-partitions this broker leads (set once the share coordinator uses us).
        self.leader_state: LeaderShareState | None = None

    def close(self) -> None:
        self._links.close()

    async def append_elsewhere(self, topic: str, index: int, batch: bytes) -> None:
        """Produce ``batch`` to the partition's owner, acks=all (dead letters)."""
        from bmq.protocol.messages import ProduceRequest  # (messages load on first use)
        from bmq.protocol.messages.produce_request import (
            PartitionProduceData,
            TopicProduceData,
        )

        node = self._membership.owner_node(topic, index)
        if node is None or self._is_me(node):    # (ours: not open yet, or moving)
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{index} has no owner")
        request = ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=index, records=batch)])])
        try:
            response = await self._links.get(node.host, node.port).request(
                request, PRODUCE_VERSION)
        except (LinkError, OSError) as error:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, str(error)) from error
        code = ErrorCode(response.responses[0].partition_responses[0].error_code)
        if code != ErrorCode.NONE:
            raise KafkaError(code, f"{topic}-{index}")

    async def summaries(self, share: SharePartitionManager, group_id: str) -> list[ShareSummary]:
        """The group's share-partitions at every broker (each leader answers for its own);
        a broker that cannot be reached is left out."""
        from bmq.protocol.messages import BmqDescribeSharePartitionsRequest

        me = self._membership.node.node_id
        found = summaries(share, group_id)

        async def ask(node: BrokerNode) -> list[ShareSummary]:
            try:
                answer = await self._links.get(node.host, node.port).request(
                    BmqDescribeSharePartitionsRequest(group_id=group_id), 0)
            except (LinkError, OSError):
                return []
            return [ShareSummary(p.topic_name, p.partition_index, p.start_offset,
                                 p.end_offset, p.high_watermark, {}, p.lag)
                    for p in answer.partitions]

        for more in await asyncio.gather(*(ask(node) for node in self._membership.nodes()
                                           if node.node_id != me)):
            found += more
        return found

    async def admin_write(self, key: StateKey, start_offset: int | None) -> ErrorCode:
        """Replace a share-partition's state for the group's coordinator: at the partition's
        leader, which forgets its copy (``reset``)."""
        info = self._membership.topics.by_id(key.topic_id)
        leader = None if info is None else self._membership.owner_node(info.name,
                                                                        key.partition)
        if leader is None or self._is_me(leader):
            return await self.reset(key, start_offset)
        code, _ = await self._ask(leader, key, -1, False, True, _start_value(start_offset),
                                  reset=True)
        return code

    async def reset(self, key: StateKey, start_offset: int | None) -> ErrorCode:
        """This broker leads the partition (or nobody does): forget the share-partition, and
        write the new state at its coordinator (which refuses any older copy's writes)."""
        if self.leader_state is not None:
            self.leader_state.forget(key)
        node = self._coordinator(key)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self._is_me(node):
            code = await self._log.durable(self._log.admin_write(key, start_offset))
        else:
            code, _ = await self._ask(node, key, -1, False, True, _start_value(start_offset),
                                      reset=True, forwarded=True)
        info = self._membership.topics.by_id(key.topic_id)
        if code == ErrorCode.NONE and self.leader_state is not None and info is not None:
            await self.leader_state.reload(key, info.name)
        return code

    def _coordinator(self, key: StateKey) -> BrokerNode | None:
        return self._membership.owner_node(self._log.topic, self._log.index_of(key))

    def _is_me(self, node: BrokerNode) -> bool:
        return node.node_id == self._membership.node.node_id

    def write(self, key: StateKey, leader_epoch: int, record: StateRecord) -> Appended:
        node = self._coordinator(key)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self._is_me(node):
            return self._log.write_for_leader(key, leader_epoch, record)
        # A task starts in the order it was made, and a link sends a request at once: a key's
        # writes reach its coordinator in order.
        return asyncio.ensure_future(self._remote_write(node, key, leader_epoch, record))

    async def _remote_write(self, node: BrokerNode, key: StateKey, leader_epoch: int,
                            record: StateRecord) -> None:
        value = None if record.runs is None else encode_value(record.start_offset, record.runs)
        code, _ = await self._ask(node, key, leader_epoch, False, record.snapshot, value)
        if code != ErrorCode.NONE:
            raise KafkaError(code)

    async def read(self, key: StateKey, leader_epoch: int
                   ) -> tuple[ErrorCode, StateRecord | None]:
        node = self._coordinator(key)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if self._is_me(node):
            appended, state = self._log.read_for_leader(key, leader_epoch)
            code = await self._log.durable(appended)
            if code != ErrorCode.NONE or state is None:
                return code, None
            return code, StateRecord(key, True, state.start_offset, list(state.runs))
        code, value = await self._ask(node, key, leader_epoch, True, True, None)
        if code != ErrorCode.NONE or value is None:
            return code, None
        return code, StateRecord(key, True, *decode_value(value))

    async def _ask(self, node: BrokerNode, key: StateKey, leader_epoch: int, read: bool,
                   snapshot: bool, value: bytes | None, reset: bool = False,
                   forwarded: bool = False) -> tuple[ErrorCode, bytes | None]:
        from bmq.protocol.messages import BmqShareStateRequest

        request = BmqShareStateRequest(
            group_id=key.group_id, topic_id=key.topic_id, partition=key.partition,
            leader_epoch=leader_epoch, read_state=read, snapshot=snapshot, value=value,
            reset=reset, forwarded=forwarded)
        try:
            response = await self._links.get(node.host, node.port).request(
                request, SHARE_STATE_VERSION)
        except (LinkError, OSError) as error:
            log.info("share coordinator %d of %s not reachable (%s)", node.node_id,
                     key.placement(), error)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode(response.error_code), response.value


def _start_value(start_offset: int | None) -> bytes | None:
    """A reset's value: the new start offset, or null (forget the share-partition)."""
    return None if start_offset is None else encode_value(start_offset, [])


class ClusterStateAdmin:
    """The share group admin writes of a cluster broker that coordinates the group: the
    group's share-partitions are found at every broker (each leads some), and rewritten
    through their share coordinators (bmq.coordinators.share.admin.StateAdmin)."""

    def __init__(self, share: SharePartitionManager, peers: ShareStatePeers) -> None:
        self._share = share
        self._peers = peers

    async def keys(self, group_id: str) -> list[StateKey]:
        found = []
        for summary in await self._peers.summaries(self._share, group_id):
            info = self._share.host.topics.get(summary.topic)
            if info is not None:
                found.append(StateKey(group_id, info.topic_id, summary.partition))
        return found

    async def write(self, key: StateKey, start_offset: int | None) -> ErrorCode:
        if not await self._share.state.ensure_started():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return await self._peers.admin_write(key, start_offset)
