"""Kafka's authorization rules, decision by decision (the authorizer over in-memory bindings)."""

from __future__ import annotations

import dataclasses
import tempfile

from bmq.config import Config
from bmq.metadata.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclStore,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from bmq.metadata.documents import StorageDocuments
from bmq.security.authorizer import Authorizer
from bmq.storage import open_storage

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def _stored(bindings: list[AclBinding]) -> AclStore:
    """An ACL store in a fresh directory, holding ``bindings``."""
    store = AclStore(StorageDocuments(open_storage(tempfile.mkdtemp())))
    store.change(lambda _: bindings)
    return store


def acl(rtype: ResourceType, name: str, op: Operation, principal: str = "User:alice",
        pattern: PatternType = PatternType.LITERAL, permission: Permission = Permission.ALLOW,
        host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def authorizer(*bindings: AclBinding, **settings: object) -> Authorizer:
    config = dataclasses.replace(Config(), authorizer_class_name="bmq", **settings)
    return Authorizer(config, _stored(list(bindings)))


def test_deny_wins_and_prefixes_and_wildcards() -> None:
    auth = authorizer(
        acl(T, "orders", Operation.WRITE, pattern=PatternType.PREFIXED),
        acl(T, "orders-eu", Operation.WRITE, permission=Permission.DENY),
        acl(T, "*", Operation.READ, principal="User:*"),
        acl(T, "audit", Operation.ALL, host="10.0.0.1"))
    ok = auth.authorize
    assert ok("User:alice", "h", Operation.WRITE, T, "orders-us")
    assert not ok("User:alice", "h", Operation.WRITE, T, "orders-eu")     # deny wins
    assert not ok("User:bob", "h", Operation.WRITE, T, "orders-us")
    assert ok("User:bob", "h", Operation.READ, T, "anything")             # User:* and *
    assert ok("User:alice", "10.0.0.1", Operation.DELETE, T, "audit")     # ALL, its host
    assert not ok("User:alice", "10.0.0.2", Operation.DELETE, T, "audit")
    # READ / WRITE imply DESCRIBE; a DENY does not imply.
    assert ok("User:alice", "h", Operation.DESCRIBE, T, "orders-us")
    assert not ok("User:alice", "h", Operation.ALTER, T, "orders-us")


def test_no_acl_super_users_and_allow_everyone() -> None:
    assert not authorizer().authorize("User:a", "h", Operation.READ, G, "g")
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize(
        "User:a", "h", Operation.READ, G, "g")
    # Some binding covers the group: allow.everyone does not apply any more.
    covered = authorizer(acl(G, "g", Operation.READ), allow_everyone_if_no_acl_found=True)
    assert not covered.authorize("User:b", "h", Operation.READ, G, "g")
    boss = authorizer(super_users="User:ops; User:boss")
    assert boss.authorize("User:boss", "h", Operation.ALTER, C, CLUSTER_NAME)


def test_changes_take_effect_and_filters_match_as_kafka() -> None:
    auth = authorizer()
    assert not auth.authorize("User:alice", "h", Operation.READ, T, "t")
    auth.create([acl(T, "t", Operation.READ), acl(T, "t", Operation.READ)])
    assert auth.bindings == [acl(T, "t", Operation.READ)]           # kept once
    assert auth.authorize("User:alice", "h", Operation.READ, T, "t")
    match = AclFilter(T, "t-1", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)
    auth.create([acl(T, "t-", Operation.WRITE, pattern=PatternType.PREFIXED)])
    assert auth.describe(match) == [acl(T, "t-", Operation.WRITE, pattern=PatternType.PREFIXED)]
    everything = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY,
                           Permission.ANY)
    assert len(auth.delete([everything])[0]) == 2
    assert not auth.authorize("User:alice", "h", Operation.READ, T, "t")
