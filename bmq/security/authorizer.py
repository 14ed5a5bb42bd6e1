"""Kafka's authorizer (AclAuthorizer / StandardAuthorizer semantics) over the cluster's ACLs.

A request by ``principal`` from ``host`` for ``operation`` on a resource is allowed when no DENY
binding matches it and an ALLOW binding does. A binding applies to a resource when its pattern
covers it (LITERAL: the same name or ``*``; PREFIXED: a prefix of the name), its principal is the
principal or ``User:*``, its host is the host or ``*``, and its operation is the operation, or
ALL, or (ALLOW only) one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE,
ALTER_CONFIGS implies DESCRIBE_CONFIGS. Super users (``super.users``) are always allowed; a
resource no binding covers is allowed to everyone only with ``allow.everyone.if.no.acl.found``.

Decisions are cached per (principal, host, operation, resource) until the ACLs change; the
bindings are indexed by resource type and name (literal, and prefixed by prefix), so a miss costs
one dict lookup per distinct prefix length, whatever the number of bindings.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from bmq.config import Config
from bmq.metadata.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclFilter,
    AclStore,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from bmq.protocol.messages import REQUEST_APIS

audit = logging.getLogger("bmq.audit")

# An ALLOW of the key also allows each operation of the value (Kafka's AclEntry).
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
CACHE_LIMIT = 100_000


def decide(acls: Iterable[AclBinding], principal: str, host: str, operation: Operation
           ) -> bool | None:
    """Kafka's decision over the bindings that cover one resource: False on a matching DENY,
    True on a matching ALLOW, None when no binding covers the resource at all."""
    covered = False
    allowed = False
    implied_by = IMPLIED_BY.get(operation, frozenset())
    for acl in acls:
        covered = True
        if acl.principal not in (principal, WILDCARD_PRINCIPAL) or \
                acl.host not in (host, WILDCARD):
            continue
        if acl.permission == Permission.DENY:
            if acl.operation in (operation, Operation.ALL):
                return False
        elif acl.operation in (operation, Operation.ALL) or acl.operation in implied_by:
            allowed = True
    return allowed if covered else None


def super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:ops``)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


_API_NAMES = {key: name.removesuffix("Request") for name, (key, *_rest) in REQUEST_APIS.items()}


def audit_denied(principal: str, client: str, listener: str, api_key: int,
                 resource_type: ResourceType, name: str, operation: Operation) -> None:
    """The audit line of a refused request (logger ``bmq.audit``), key=value."""
    audit.warning("denied principal=%s client=%s listener=%s api=%s resource=%s:%s "
                  "operation=%s", principal, client, listener,
                  _API_NAMES.get(api_key, api_key), resource_type.name, name, operation.name)


@dataclass(frozen=True, slots=True)
class _Index:
    """The bindings indexed, with the decisions made from them: replaced whole when the ACLs
    change (on a worker thread, or a ZooKeeper watch), so a decision computed from the previous
    bindings can only land in the previous cache."""

    version: int          # of the ACL document indexed
    literal: dict[tuple[ResourceType, str], list[AclBinding]]
    prefixed: dict[tuple[ResourceType, str], list[AclBinding]]
    prefix_lengths: dict[ResourceType, list[int]]
    cache: dict[tuple[str, str, Operation, ResourceType, str], bool]


class Authorizer:
    def __init__(self, config: Config, store: AclStore) -> None:
        self.enabled = bool(config.authorizer_class_name.strip())
        self.super_users = super_users(config.super_users)
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self._store = store
        self._indexing = threading.Lock()
        self._current = _index(*store.state)

    # ------------------------------------------------------------------ decisions
    def authorize(self, principal: str, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        index = self._current
        key = (principal, host, operation, resource_type, name)
        decision = index.cache.get(key)
        if decision is None:
            literal, prefixed = index.literal, index.prefixed
            covering = [*literal.get((resource_type, name), ()),
                        *literal.get((resource_type, WILDCARD), ())]
            for length in index.prefix_lengths.get(resource_type, ()):
                if length > len(name):
                    break
                covering += prefixed.get((resource_type, name[:length]), ())
            found = decide(covering, principal, host, operation)
            decision = self.allow_if_no_acl if found is None else found
            if len(index.cache) >= CACHE_LIMIT:
                index.cache.clear()
            index.cache[key] = decision
        return decision

    # ------------------------------------------------------------------ the bindings
    @property
    def bindings(self) -> list[AclBinding]:
        return list(self._store.bindings)

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self._store.bindings if acl_filter.matches(acl)]

    def create(self, new: list[AclBinding]) -> None:
        """Add bindings (existing ones are kept once) and save (blocking)."""
        def merged(current: list[AclBinding]) -> list[AclBinding]:
            return current + [b for b in dict.fromkeys(new) if b not in current]
        self._store.change(merged)
        self._refresh()

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove the bindings each filter matches and save (blocking); what each removed."""
        removed: list[list[AclBinding]] = []

        def remaining(current: list[AclBinding]) -> list[AclBinding]:
            removed[:] = [[acl for acl in current if f.matches(acl)] for f in filters]
            gone = {acl for acls in removed for acl in acls}
            return [acl for acl in current if acl not in gone]
        self._store.change(remaining)
        self._refresh()
        return removed

    def reload(self, data: bytes | None, version: int) -> None:
        """The bindings as stored at ``version`` (cluster mode: changed by another node)."""
        self._store.reload(data, version)
        self._refresh()

    def _refresh(self) -> None:
        """Index the store's bindings if they are newer than those indexed (changes and watches
        finish on several threads in any order)."""
        with self._indexing:
            version, bindings = self._store.state
            if version > self._current.version:
                self._current = _index(version, bindings)



def _index(version: int, bindings: list[AclBinding]) -> _Index:
    literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
    prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
    lengths: dict[ResourceType, set[int]] = {}
    for acl in bindings:
        key = (acl.resource_type, acl.resource_name)
        if acl.pattern_type == PatternType.LITERAL:
            literal.setdefault(key, []).append(acl)
        else:
            prefixed.setdefault(key, []).append(acl)
            lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
    return _Index(version, literal, prefixed,
                  {t: sorted(found) for t, found in lengths.items()}, {})
