"""Several mirror processes of one source share its partitions: each is a member of a consumer
group on the target (``bmq-mirror.<name>``, Kafka's KIP-848 protocol), subscribed to the
mirrored topics, and mirrors the partitions the group's coordinator assigns it. A member that
stops leaves the group at once; one that dies is removed after the group's session timeout,
which the mirror sets short (``consumer.session.timeout.ms``), and its partitions go to the
others.

Two members copying one partition for a moment (while it changes hands) is harmless: every
append must start at the partition's log end offset, so the second copy of a batch is refused
and its sender goes on from the end, with the same bytes the first one wrote.
"""

from __future__ import annotations

import logging
import uuid

from bmq.mirror.cluster import Cluster
from bmq.mirror.settings import MIRROR_GROUP_PREFIX
from bmq.mirror.topics import ALTER_CONFIGS_VERSION, SET
from bmq.net.client import LinkError
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import ConsumerGroupHeartbeatRequest, IncrementalAlterConfigsRequest
from bmq.protocol.messages.consumer_group_heartbeat_request import TopicPartitions
from bmq.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)

log = logging.getLogger(__name__)

HEARTBEAT_VERSION = 1           # member ids are the client's (KIP-848 in Kafka 4)
GROUP_RESOURCE = 32
REBALANCE_TIMEOUT_MS = 10_000
LEAVE_EPOCH = -1
# Errors after which the member joins again, as a new member (its partitions are gone).
REJOIN = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}

Key = tuple[str, int]


def group_name(source_name: str) -> str:
    return f"{MIRROR_GROUP_PREFIX}{source_name}"


class Membership:
    def __init__(self, source_name: str, target: Cluster, session_timeout_ms: int,
                 heartbeat_interval_ms: int) -> None:
        self.group = group_name(source_name)
        self.target = target
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.assigned: set[Key] = set()
        self._configured = False

    async def heartbeat(self, topics: list[str]) -> float:
        """One heartbeat, subscribed to ``topics``: the assignment it brings is ``assigned``.
        Returns the seconds until the next one; KafkaError, LinkError if it failed."""
        if not self._configured:
            await self._configure()
        response = await self.target.ask_coordinator(self.group, ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, subscribed_topic_names=topics,
            topic_partitions=self._owned()), HEARTBEAT_VERSION)
        self.target.coordinator_moved(self.group, response.error_code)
        if response.error_code in REJOIN:
            log.warning("mirror group %s: %s, joining again", self.group,
                        ErrorCode(response.error_code).name)
            self.epoch = 0
            self.assigned = set()
            return 0.1         # (joining again at once)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), response.error_message)
        self.epoch = response.member_epoch
        if response.assignment is not None:
            await self._take(response.assignment.topic_partitions)
        interval_ms: int = response.heartbeat_interval_ms
        return max(0.1, interval_ms / 1000)

    async def leave(self) -> None:
        """Leave the group now (a clean stop), so the others take the partitions at once."""
        try:
            await self.target.ask_coordinator(self.group, ConsumerGroupHeartbeatRequest(
                group_id=self.group, member_id=self.member_id, member_epoch=LEAVE_EPOCH),
                HEARTBEAT_VERSION, timeout=5)
        except (KafkaError, LinkError, OSError, TimeoutError) as error:
            log.info("mirror group %s: leaving failed (%s): the session timeout removes this "
                     "member", self.group, error)

    async def _configure(self) -> None:
        """The group's session timeout and heartbeat interval: a dead mirror's partitions are
        taken over within seconds, not Kafka's default 45."""
        response = await self.target.ask_any(IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=self.group, configs=[
                AlterableConfig(name="consumer.session.timeout.ms", config_operation=SET,
                                value=str(self.session_timeout_ms)),
                AlterableConfig(name="consumer.heartbeat.interval.ms", config_operation=SET,
                                value=str(self.heartbeat_interval_ms))])]),
            ALTER_CONFIGS_VERSION)
        error = response.responses[0].error_code
        if error != ErrorCode.NONE:
            log.warning("mirror group %s: its timeouts could not be set (%s): a dead mirror's "
                        "partitions wait for the target's default session timeout", self.group,
                        ErrorCode(error).name)
        self._configured = True

    async def _take(self, assignment: list[TopicPartitions]) -> None:
        name = self.target.metadata.topic_name
        if any(not name(part.topic_id) for part in assignment):
            await self.target.metadata.refresh()      # a topic created since
        assigned = {(name(part.topic_id), index) for part in assignment
                    if name(part.topic_id) for index in part.partitions}
        if assigned != self.assigned:
            log.info("mirror group %s: this member mirrors %d partitions", self.group,
                     len(assigned))
        self.assigned = assigned

    def _owned(self) -> list[TopicPartitions]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(self.assigned):
            by_topic.setdefault(topic, []).append(index)
        ids = {name: info.topic_id for name, info in self.target.metadata.topics.items()}
        return [TopicPartitions(topic_id=ids[topic], partitions=indexes)
                for topic, indexes in by_topic.items() if topic in ids]
