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
from bmq.coordinators.share import ShareCoordinator
from bmq.coordinators.share.admin import ShareSummary, summaries
from bmq.coordinators.share.records import StateKey, StateRecord, decode_value, encode_value
from bmq.coordinators.share.state import ShareStateCoordinator
from bmq.metadata.nodes import BrokerNode
from bmq.net.client import LinkError, LinkPool, LinkSecurity
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import BmqDescribeSharePartitionsRequest, BmqShareStateRequest

log = logging.getLogger(__name__)

SHARE_STATE_VERSION = 0


class ShareStatePeers:
    def __init__(self, membership: Membership, state_log: ShareStateCoordinator,
                 link_security: LinkSecurity | None = None) -> None:
        self._membership = membership
        self._log = state_log
        self._links = LinkPool(f"bmq-broker-{membership.node.node_id}", link_security)

    def close(self) -> None:
        self._links.close()

    async def summaries(self, share: ShareCoordinator, group_id: str) -> list[ShareSummary]:
        """The group's share-partitions at every broker (each leader answers for its own);
        a broker that cannot be reached is left out."""
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
            code, state = self._log.read_for_leader(key, leader_epoch)
            if state is None:
                return code, None
            return code, StateRecord(key, True, state.start_offset, list(state.runs))
        code, value = await self._ask(node, key, leader_epoch, True, True, None)
        if code != ErrorCode.NONE or value is None:
            return code, None
        return code, StateRecord(key, True, *decode_value(value))

    async def _ask(self, node: BrokerNode, key: StateKey, leader_epoch: int, read: bool,
                   snapshot: bool, value: bytes | None) -> tuple[ErrorCode, bytes | None]:
        request = BmqShareStateRequest(
            group_id=key.group_id, topic_id=key.topic_id, partition=key.partition,
            leader_epoch=leader_epoch, read_state=read, snapshot=snapshot, value=value)
        try:
            response = await self._links.get(node.host, node.port).request(
                request, SHARE_STATE_VERSION)
        except (LinkError, OSError) as error:
            log.info("share coordinator %d of %s not reachable (%s)", node.node_id,
                     key.placement(), error)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode(response.error_code), response.value
