"""What the Java Admin scenarios (AdminScenarios, AdminGroupScenarios, AdminSecurityScenarios)
start from and what their results must be: Kafka's answers, and the state they leave read back
with confluent-kafka. Shared by the tests on `bmq serve`, over SASL_SSL and on a cluster;
``bootstrap`` is always a plaintext address for confluent-kafka."""

from __future__ import annotations

from typing import Any

from tests.integration.helpers import Msg, admin, consume, topic_configs, watermarks
from tests.java import checks

UNSERVED = ("alterPartitionReassignments", "describeDelegationToken", "describeMetadataQuorum",
            "electLeaders", "listConfigResources", "listPartitionReassignments",
            "unregisterBroker")


def entry(value: str, source: str, read_only: bool = False) -> dict[str, Any]:
    return {"value": value, "source": source, "read_only": read_only}


def check_topics(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    """TOPIC-a was created with its partitions and configs, described alike by name and id,
    grown to 5 partitions and deleted; the refusals are Kafka's; nothing else was created."""
    described = result["described"]
    assert described["name"] == f"{topic}-a" and not described["internal"]
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for partition in described["partitions"]:
        assert partition["leader"] is not None and partition["leader"] in partition["replicas"]
        assert partition["isr"] == partition["replicas"], partition
    assert result["described_by_id"] == described
    assert result["create_answer"] == [3, 1, "3600000"]
    # Defaults (num.partitions) and a replica assignment; both deleted by topic id.
    assert (result["default_partitions"], result["assigned_partitions"]) == (1, 2)
    assert result["deleted_by_id"]
    assert result["internal_listed"] and result["internal_described"]
    assert result["configs"] == {
        "cleanup.policy": entry("compact", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": entry("3600000", "DYNAMIC_TOPIC_CONFIG"),
        "segment.bytes": entry("1073741824", "DEFAULT_CONFIG")}
    assert result["listed"] and not result["validate_only_listed"]
    assert result["partitions_after_increase"] == 5
    assert not result["listed_after_delete"]
    assert {name: result[name] for name in (
        "created_again", "validate_only", "invalid_name", "decrease", "increase_unknown",
        "describe_deleted", "delete_again")} == {
        "created_again": "TopicExistsException", "validate_only": "ok",
        "invalid_name": "InvalidTopicException", "decrease": "InvalidPartitionsException",
        "increase_unknown": "UnknownTopicOrPartitionException",
        "describe_deleted": "UnknownTopicOrPartitionException",
        "delete_again": "UnknownTopicOrPartitionException"}
    listed = admin(bootstrap).list_topics(timeout=15).topics
    assert f"{topic}-a" not in listed and f"{topic}-v" not in listed


def check_configs(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    """Set configs are DYNAMIC_TOPIC_CONFIG, deleted ones back to their DEFAULT_CONFIG,
    APPEND adds to a list, SUBTRACT takes from it; confluent-kafka sees the same values."""
    assert result["after_alter"] == {
        "cleanup.policy": entry("delete", "DEFAULT_CONFIG"),
        "max.message.bytes": entry("1048588", "DEFAULT_CONFIG"),
        "retention.ms": entry("7200000", "DYNAMIC_TOPIC_CONFIG"),
        "segment.ms": entry("600000", "DYNAMIC_TOPIC_CONFIG")}
    assert result["after_incremental"] == {
        "cleanup.policy": entry("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
        "max.message.bytes": entry("2097152", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": entry("604800000", "DEFAULT_CONFIG"),
        "segment.ms": entry("600000", "DYNAMIC_TOPIC_CONFIG")}
    # validate-only changed nothing; SUBTRACT takes from a list.
    assert result["after_validate_only"] == result["after_incremental"]
    assert result["after_subtract"] == {
        "cleanup.policy": entry("compact", "DYNAMIC_TOPIC_CONFIG")}
    assert result["synonyms"] == ["max.message.bytes=2097152 DYNAMIC_TOPIC_CONFIG",
                                  "message.max.bytes=1048588 DEFAULT_CONFIG"]
    assert result["documented"] and result["type"] == "INT"
    assert (result["unknown_name"], result["bad_value"], result["unknown_topic"]) == (
        "InvalidConfigurationException", "InvalidConfigurationException",
        "UnknownTopicOrPartitionException")
    assert result["broker"]["num.partitions"]["read_only"]
    seen = topic_configs(bootstrap, topic)
    assert (seen["max.message.bytes"], seen["cleanup.policy"], seen["retention.ms"]) == (
        "2097152", "compact", "604800000")


def check_broker_configs(result: dict[str, Any]) -> None:
    """A broker's own dynamic value over the cluster-wide one, the cluster-wide default
    described as itself; static configs refused, broker loggers not served (INVALID_REQUEST,
    as Kafka answers a resource type it does not know); a group's config."""
    threads = "log.cleaner.threads"
    assert result["static"] == {}     # BMQ lists a dynamic config only once it is set
    assert result["per_broker"] == {threads: entry("2", "DYNAMIC_BROKER_CONFIG")}
    assert result["cluster_default"] == {threads: entry("3", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
    assert result["per_broker_deleted"] == {threads: entry("3", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
    assert result["both_deleted"] == {}
    assert (result["static_refused"], result["loggers"]) == (
        "InvalidRequestException", "InvalidRequestException")
    assert result["group"] == {
        "share.delivery.count.limit": entry("5", "DEFAULT_CONFIG"),
        "share.record.lock.duration.ms": entry("45000", "DYNAMIC_GROUP_CONFIG")}
    assert result["group_bad_value"] == "InvalidConfigurationException"


def offsets_argument(topic: str, records: list[Msg]) -> tuple[str, int]:
    """The offsets scenario's argument, TOPIC:TIMESTAMP, with a timestamp half a second
    before the 7th record of each partition (offset 6), and that record's timestamp."""
    seventh = next(m for m in records if m.partition == 0 and m.offset == 6).timestamp
    return f"{topic}:{seventh - 500}", seventh


def check_offsets(bootstrap: str, topic: str, records: list[Msg], seventh: int,
                  result: dict[str, Any]) -> None:
    """listOffsets as Kafka answers (the latest and earliest without a timestamp), and
    deleteRecords moved partition 0's low watermark to 5, as confluent-kafka sees too."""
    last = max(m.timestamp for m in records if m.partition == 0)
    partitions = checks.GROUP_PARTITIONS
    assert result["earliest"] == [[0, -1]] * partitions
    assert result["latest"] == [[checks.PER_PARTITION, -1]] * partitions
    assert result["for_timestamp"] == [[6, seventh]] * partitions
    assert result["max_timestamp"] == [[checks.PER_PARTITION - 1, last]] * partitions
    assert result["deleted_low_watermark"] == result["earliest_after_delete"] == 5
    assert result["delete_past_end"] == "OffsetOutOfRangeException"
    assert watermarks(bootstrap, topic, 0) == (5, checks.PER_PARTITION)
    assert watermarks(bootstrap, topic, 1) == (0, checks.PER_PARTITION)


def check_cluster(result: dict[str, Any], nodes: list[str]) -> None:
    """The brokers clients are told of; every Admin call of an API BMQ does not serve ends
    with UnsupportedVersionException (the client's own, from ApiVersions), never a hang."""
    assert result["nodes"] == sorted(nodes)
    assert result["cluster_id"]
    # BMQ finalizes no feature (no metadata.version, no transaction.version).
    assert result["finalized_features"] == {}
    assert result["unserved"] == {name: "UnsupportedVersionException" for name in UNSERVED}
    # describeLogDirs: one directory, the shared storage's URL (no credentials), and the bytes
    # of each partition of the topic the first node has open (written to, so not empty).
    [(storage, sizes)] = result["log_dirs"].items()
    assert "://" in storage and "@" not in storage, storage
    assert all(size > 0 for size in sizes.values()), sizes
    if len(nodes) == 1:
        assert len(sizes) == checks.GROUP_PARTITIONS, sizes


def check_consumer_groups(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    """While the member is in the group: listed and described as a Stable consumer-protocol
    group, its commits read back, deleting the group or altering or deleting its offsets
    refused with Kafka's errors. After: the altered offsets are where a new member reads from,
    a deleted partition offset is gone, and so is the deleted group."""
    end = checks.PER_PARTITION
    assert result["listed_while_active"] == ["CONSUMER", "STABLE"]
    assert (result["state"], result["type"]) == ("STABLE", "CONSUMER")
    assert result["assignments"] == [[0, 1, 2]]
    assert result["committed"] == {"0": end, "1": end, "2": end}
    assert (result["delete_active"], result["alter_active"],
            result["delete_offsets_active"]) == (
        "GroupNotEmptyException", "UnknownMemberIdException", "GroupSubscribedToTopicException")
    assert result["state_after_leaving"] == "EMPTY"
    assert result["committed_after_alter"] == {"0": 5, "1": 10, "2": end}
    assert result["read_from"] == {"0": 5, "1": 10}
    assert result["committed_after_offset_delete"] == {"0": end, "1": end}
    assert not result["listed_after_delete"]
    assert result["delete_again"] == "GroupIdNotFoundException"
    assert checks.committed_offsets(bootstrap, f"{topic}-g", topic, 3) == [-1001] * 3


def check_classic_group(result: dict[str, Any]) -> None:
    """The static member's group listed and described as a Stable classic group; removed by
    its instance id, the group is Empty (and listed so); Kafka's errors for unknown ones."""
    assert result["listed"] == ["CLASSIC", "STABLE"]
    assert (result["state"], result["type"], result["assignor"]) == ("STABLE", "CLASSIC", "range")
    [(instance, partitions)] = result["members"]
    assert instance.endswith("-classic-member") and partitions == [0, 1, 2]
    assert result["state_after_removal"] == "EMPTY"
    assert result["listed_empty"] == ["CLASSIC", "EMPTY"]
    assert (result["remove_unknown_member"], result["describe_unknown_group"]) == (
        "UnknownMemberIdException", "GroupIdNotFoundException")


def check_share_groups(result: dict[str, Any]) -> None:
    """The share group listed and described while its member reads, its start offset past
    every accepted record; altering or deleting it refused while it has a member; moved back
    to 3 (described so at once), a new member gets 3..9; the offsets and the group deleted."""
    assert result["read"] == list(range(10))
    assert result["listed_while_active"] == ["SHARE", "STABLE"]
    assert (result["state"], result["assignments"]) == ("STABLE", [[0]])
    assert result["offsets"] == {"0": [10, 0]}
    assert (result["alter_active"], result["delete_active"]) == (
        "GroupNotEmptyException", "GroupNotEmptyException")
    assert result["offsets_after_alter"] == {"0": [3, 7]}
    assert result["read_after_alter"] == list(range(3, 10))
    assert result["offsets_after_delete"] == {"0": None}
    assert not result["listed_after_delete"]
    assert (result["describe_unknown"], result["delete_unknown"]) == (
        "GroupIdNotFoundException", "GroupIdNotFoundException")


def check_transactions(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    """The hanging transaction (offsets 0-1, a plain record at 2) is listed and described as
    ongoing, its producer shows where it began, and read_committed readers are held at 0
    until abortTransaction writes its marker (offset 3); fenceProducers ends it at the
    coordinator; confluent-kafka's read_committed consumer reads only the plain record."""
    transactional_id = f"{topic}-txn"
    assert result["listed"] == {transactional_id: "ONGOING"}
    assert result["listed_by_pattern"] == [transactional_id]
    assert result["listed_running_an_hour"] == result["listed_committing"] == []
    described = result["described"]
    assert (described["state"], described["partitions"]) == ("ONGOING", [f"{topic}-0"])
    assert result["open_transaction_start"] == 0
    assert result["read_committed_end_before"] == 0
    assert result["read_committed_end_after"] == 4
    assert result["open_after_abort"] == 0
    fenced = result["described_after_fence"]
    assert fenced["producer_id"] == described["producer_id"]
    assert fenced["epoch"] > described["epoch"]
    assert (fenced["state"], fenced["partitions"]) == ("EMPTY", [])
    assert result["force_terminate"] == "ok"
    assert result["describe_unknown"] == "TransactionalIdNotFoundException"
    committed = consume(bootstrap, topic, isolation_level="read_committed")[0]
    assert [m.value for m in committed] == [b"after"]
    everything = consume(bootstrap, topic, isolation_level="read_uncommitted")[0]
    assert [m.value for m in everything] == [b"open-0", b"open-1", b"after"]


def check_scram(topic: str, result: dict[str, Any]) -> None:
    user = f"{topic}-u"
    assert result["before"] == {user: "ResourceNotFoundException"}
    assert result["created"] == {user: "ok", f"{user}:credentials": ["SCRAM-SHA-256/8192"]}
    assert result["second_mechanism"] == {
        user: "ok", f"{user}:credentials": ["SCRAM-SHA-256/8192", "SCRAM-SHA-512/4096"]}
    assert result["one_deleted"] == {user: "ok", f"{user}:credentials": ["SCRAM-SHA-512/4096"]}
    assert result["too_few_iterations"] == "UnacceptableCredentialException"
    assert result["deleted"] == {user: "ResourceNotFoundException"}


def check_quotas(topic: str, result: dict[str, Any]) -> None:
    user, client = f"user={topic}-q", f"client-id={topic}-client"
    assert result["user"] == {user: {"consumer_byte_rate": 2097152.0,
                                     "producer_byte_rate": 1048576.0}}
    assert result["client"] == {client: {"consumer_byte_rate": 4096.0}}
    assert result["user_after_removal"] == {user: {"consumer_byte_rate": 2097152.0}}
    assert result["unknown_quota"] == "InvalidRequestException"


def check_acls(result: dict[str, Any], records: int) -> None:
    """The user made with the Admin logs in; it reads TOPIC only while its ACL is there,
    never TOPIC-other, and is told so (authorized operations); a wrong password fails
    authentication."""
    assert result["read_before_acls"] == "TopicAuthorizationException"
    assert result["read_with_acl"] == f"read {records}"
    # KIP-430 as the user's own Admin reports it: READ implies DESCRIBE; nothing on the cluster.
    assert result["authorized"] == {"topic": ["DESCRIBE", "READ"], "cluster": []}
    assert result["read_other"] == "TopicAuthorizationException"
    assert (result["described"], result["deleted"], result["described_after_delete"]) == (
        1, 1, 0)
    assert result["read_after_delete"] == "TopicAuthorizationException"
    assert result["wrong_password"] == "SaslAuthenticationException"


def check_acls_disabled(result: dict[str, Any]) -> None:
    assert result == {name: "SecurityDisabledException"
                      for name in ("create", "describe", "delete")}
