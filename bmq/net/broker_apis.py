"""The Kafka APIs a BMQ broker serves, by request class name.

The broker's API table (``bmq.broker.handlers``) answers each with a handler of its own; a proxy
(``bmq.proxy.handlers``) relays to a broker every one of them it does not answer itself, at the
same versions. One list, so the two roles agree without importing each other.
"""

from __future__ import annotations

# BMQ's own APIs for clients (not nodes): listed in ApiVersions, so a client can tell a BMQ
# cluster that serves them from one that does not (Apache Kafka), and relayed by proxies like
# Kafka's. The databus stream mappings, read by `bmq databus` agents and changed by `bmq databus
# map`.
CLIENT_BMQ_REQUESTS: tuple[str, ...] = (
    "BmqDescribeDatabusStreamsRequest",
    "BmqAlterDatabusStreamsRequest",
)

BROKER_REQUESTS: tuple[str, ...] = (
    "ProduceRequest",
    "FetchRequest",
    "ListOffsetsRequest",
    "MetadataRequest",
    "ApiVersionsRequest",
    "CreateTopicsRequest",
    "DeleteTopicsRequest",
    "DeleteRecordsRequest",
    "InitProducerIdRequest",
    "DescribeConfigsRequest",
    "AlterConfigsRequest",
    "CreatePartitionsRequest",
    "IncrementalAlterConfigsRequest",
    "DescribeClusterRequest",
    "DescribeTopicPartitionsRequest",
    "DescribeLogDirsRequest",
    # Consumer groups
    "FindCoordinatorRequest",
    "JoinGroupRequest",
    "SyncGroupRequest",
    "HeartbeatRequest",
    "LeaveGroupRequest",
    "OffsetCommitRequest",
    "OffsetFetchRequest",
    "DescribeGroupsRequest",
    "ListGroupsRequest",
    "DeleteGroupsRequest",
    "OffsetDeleteRequest",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupDescribeRequest",
    # Security: SASL authentication, SCRAM credentials, ACLs, quotas
    "SaslHandshakeRequest",
    "SaslAuthenticateRequest",
    "DescribeUserScramCredentialsRequest",
    "AlterUserScramCredentialsRequest",
    "CreateAclsRequest",
    "DescribeAclsRequest",
    "DeleteAclsRequest",
    "DescribeClientQuotasRequest",
    "AlterClientQuotasRequest",
    # Transactions
    "AddPartitionsToTxnRequest",
    "AddOffsetsToTxnRequest",
    "EndTxnRequest",
    "TxnOffsetCommitRequest",
    "DescribeTransactionsRequest",
    "ListTransactionsRequest",
    "DescribeProducersRequest",
    # Share groups (KIP-932)
    "ShareGroupHeartbeatRequest",
    "ShareGroupDescribeRequest",
    "ShareFetchRequest",
    "ShareAcknowledgeRequest",
    "DescribeShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsRequest",
    # Inter-broker: transaction markers for partitions another broker owns (cluster mode)
    "WriteTxnMarkersRequest",
    # BMQ-internal: proxies hear of new durable data, and act for their clients
    "BmqWatchPartitionsRequest",
    "BmqActAsRequest",
    # BMQ-internal: a partition's leader reads and writes its share-partitions' state, and
    # tells `bmq group describe` their record counts
    "BmqShareStateRequest",
    "BmqDescribeSharePartitionsRequest",
    # BMQ-internal: `bmq mirror` appends a source cluster's batches at their offsets
    "BmqMirrorAppendRequest",
    *CLIENT_BMQ_REQUESTS,
)


def handler_module(request_name: str) -> str:
    """The handler module's name for a request class: ``"JoinGroupRequest"`` -> ``join_group``
    (BMQ's own APIs drop their ``Bmq`` prefix)."""
    name = request_name.removesuffix("Request").removeprefix("Bmq")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
