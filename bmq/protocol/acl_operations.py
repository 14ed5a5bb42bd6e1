"""Kafka's ACL operations and the "authorized operations" bit fields of Metadata, DescribeCluster
and DescribeGroups (KIP-430), shared by every role that answers them.

These fields report the operations a resource type supports that the principal may do, whenever
a client asks for them: all of them without an authorizer, as Kafka does (admin tools, e.g.
confluent-kafka's ``describe_topics(include_authorized_operations=True)`` and Kafka UIs, read an
unset field as "nothing allowed"); with one, those its ACLs allow (bmq.security.context).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import MetadataRequest, MetadataResponse


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (ACL bindings and filters; bit ``1 << code`` of an
    authorized-operations field)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


# The field's value when the client did not ask for it (Kafka's Integer.MIN_VALUE).
NOT_REQUESTED = -(2**31)


def _bits(*operations: AclOperation) -> int:
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


_A = AclOperation
# What each resource type supports, as Kafka 4 lists them (AclEntry.supportedOperations).
TOPIC_OPERATIONS = _bits(_A.READ, _A.WRITE, _A.CREATE, _A.DESCRIBE, _A.DELETE, _A.ALTER,
                         _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS)
GROUP_OPERATIONS = _bits(_A.READ, _A.DESCRIBE, _A.DELETE, _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bits(_A.CREATE, _A.CLUSTER_ACTION, _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS,
                           _A.IDEMPOTENT_WRITE, _A.ALTER, _A.DESCRIBE)


def authorized(operations: int, requested: bool) -> int:
    """The field for a response: every supported operation if asked for, else "not requested"."""
    return operations if requested else NOT_REQUESTED


def fill_metadata_operations(request: MetadataRequest, response: MetadataResponse,
                             topic_operations: Callable[[str | None], int],
                             cluster_operations: Callable[[], int]) -> None:
    """Set the authorized operations a Metadata request asked for (v8+: the topics'; v8-10: the
    cluster's) on its response, as every role that answers Metadata must; the callables give
    the principal's operations on a topic and on the cluster."""
    for topic in response.topics:
        if topic.error_code == ErrorCode.NONE:
            topic.topic_authorized_operations = topic_operations(topic.name) \
                if request.include_topic_authorized_operations else NOT_REQUESTED
    response.cluster_authorized_operations = cluster_operations() \
        if request.include_cluster_authorized_operations else NOT_REQUESTED
