"""CreateTopics, including validate_only and explicit (single-broker) assignments."""

from __future__ import annotations

from collections import Counter

from bmq.broker.handlers.base import RequestContext
from bmq.broker.topic_config import TOPIC_CONFIGS, effective_topic_configs
from bmq.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from bmq.metadata.mirrors import MIRROR_SOURCE
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from bmq.protocol.messages.create_topics_request import CreatableTopic
from bmq.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
)


def check_replica_assignment(ctx: RequestContext, broker_ids: list[list[int]]) -> None:
    """Explicit assignments name live brokers, each once per partition, as in Kafka; one broker
    serves each partition whatever the list (the storage holds the replicas)."""
    known = {node.node_id for node in ctx.broker.metadata_nodes}
    sizes = {len(ids) for ids in broker_ids}
    for ids in broker_ids:
        if not ids or len(set(ids)) != len(ids) or not set(ids) <= known:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Replica assignment {ids} must name distinct brokers among "
                             f"{sorted(known)}.")
    if len(sizes) > 1:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "All partitions must have the same number of replicas.")


def _partition_count(ctx: RequestContext, topic: CreatableTopic) -> tuple[int, int]:
    """Partition count and replication factor, from the assignment when one is given."""
    if not topic.assignments:
        return topic.num_partitions, topic.replication_factor
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Both numPartitions or replicationFactor and replicasAssignments "
                         "were set.")
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Partitions must be numbered 0 to the partition count - 1.")
    check_replica_assignment(ctx, [a.broker_ids for a in topic.assignments])
    return len(indexes), len(topic.assignments[0].broker_ids)


async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest,
                               version: int) -> CreateTopicsResponse:
    broker = ctx.broker
    names = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        result = CreatableTopicResult(name=topic.name)
        results.append(result)
        try:
            if names[topic.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Create topics request from client contains a duplicate topic "
                                 f"{topic.name}.")
            if not ctx.authorize(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME,
                                 audit=False):
                ctx.require(Operation.CREATE, ResourceType.TOPIC, topic.name)
            count, replication = _partition_count(ctx, topic)
            configs = {c.name: c.value for c in topic.configs}
            if configs.get(MIRROR_SOURCE) and not ctx.authorize_cluster(Operation.CLUSTER_ACTION):
                # (Without an authorizer every client is trusted, as for every other API.)
                raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                 f"creating a mirrored topic ({MIRROR_SOURCE}) is bmq mirror's: "
                                 f"it needs CLUSTER_ACTION on the cluster")
            if request.validate_only:
                count, valid = broker.check_new_topic(topic.name, count, replication, configs)
            else:
                info = await broker.create_topic(topic.name, count, replication, configs)
                result.topic_id = info.topic_id
                count, valid = info.partitions, info.configs
            result.num_partitions = count
            # The replicas Metadata reports: the one broker serving each partition.
            result.replication_factor = 1
            result.configs = [
                CreatableTopicConfigs(name=name, value=value, read_only=False,
                                      config_source=source, is_sensitive=False)
                for name, (value, source) in effective_topic_configs(broker.config, valid).items()
                if name in TOPIC_CONFIGS
            ]
        except KafkaError as error:
            result.error_code = error.code
            result.error_message = error.message
    return CreateTopicsResponse(topics=results)
