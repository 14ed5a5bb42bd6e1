"""The cluster's access control as the console asks it, with the signed-in principal's client:
creating and deleting ACLs (CreateAcls, DeleteAcls) and SCRAM users (Describe/Alter
UserScramCredentials) through confluent-kafka's AdminClient; the ACL list (DescribeAcls, see
acls()) and client quotas (Describe/AlterClientQuotas, which librdkafka does not speak)
through BMQ's own client layer (``bmq.client``). Each call blocks; the cluster's authorizer
decides, and its refusal comes back as a ConsoleError naming Kafka's error code."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from bmq.client.login import login
from bmq.client.metadata import bootstrap_addresses
from bmq.client.requests import ask_once
from bmq.console.admin import REQUEST_TIMEOUT_S, ClusterAdmin, ConsoleError
from bmq.metadata import acls as acl_names
from bmq.net.client import LinkError
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    AlterClientQuotasRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
)
from bmq.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData

# The choices of the ACL form, as Kafka names them; librdkafka calls the CLUSTER resource BROKER.
RESOURCE_TYPES = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP,
                  "CLUSTER": ResourceType.BROKER, "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")
PERMISSIONS = ("ALLOW", "DENY")
SCRAM_MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
                    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
# Kafka's minimum SCRAM iterations (and librdkafka's clients' default).
MIN_ITERATIONS = 4096
QUOTA_ENTITIES = ("user", "client-id")
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")
QUOTAS_VERSION = 1
DESCRIBE_ACLS_VERSION = 3
CLIENT_ID = "bmq-console"


@dataclass(frozen=True)
class Acl:
    resource_type: str
    name: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str


@dataclass(frozen=True)
class ScramUser:
    name: str
    credentials: list[tuple[str, int]]     # (mechanism, iterations)


@dataclass(frozen=True)
class QuotaEntry:
    entity: list[tuple[str, str | None]]   # (type, name or None: the default)
    values: dict[str, float]

    @property
    def label(self) -> str:
        return ", ".join(f"{kind}={name if name is not None else '(default)'}"
                         for kind, name in self.entity)


def _choice(value: str, choices: Mapping[str, Any] | tuple[str, ...], what: str) -> str:
    value = value.strip().upper()
    if value not in choices:
        raise ConsoleError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def acl_binding(form: Mapping[str, str]) -> AclBinding:
    """The ACL a form describes; ConsoleError naming the first bad field."""
    resource = _choice(form.get("resource_type", ""), RESOURCE_TYPES, "resource type")
    name = form.get("name", "").strip()
    if resource == "CLUSTER":
        name = "kafka-cluster"
    if not name:
        raise ConsoleError("an ACL needs a resource name")
    principal = form.get("principal", "").strip()
    if ":" not in principal or principal.endswith(":"):
        raise ConsoleError(f"principal must be TYPE:NAME (e.g. User:alice), got {principal!r}")
    return AclBinding(
        RESOURCE_TYPES[resource], name,
        ResourcePatternType[_choice(form.get("pattern", "LITERAL"), PATTERN_TYPES, "pattern")],
        principal, form.get("host", "*").strip() or "*",
        AclOperation[_choice(form.get("operation", ""), OPERATIONS, "operation")],
        AclPermissionType[_choice(form.get("permission", "ALLOW"), PERMISSIONS, "permission")])


def acls(admin: ClusterAdmin) -> list[Acl]:
    """Every ACL, asked with a DescribeAcls request of BMQ's own client: librdkafka's
    describe_acls answers an empty list where the broker answered CLUSTER_AUTHORIZATION_FAILED
    (confluent-kafka 2.16), which would show a refused user "no ACLs"."""
    answer = _ask(admin, DescribeAclsRequest(
        resource_type_filter=acl_names.ResourceType.ANY, resource_name_filter=None,
        pattern_type_filter=acl_names.PatternType.ANY, principal_filter=None, host_filter=None,
        operation=acl_names.Operation.ANY, permission_type=acl_names.Permission.ANY),
        DESCRIBE_ACLS_VERSION, "cannot list ACLs")
    refused = _refusal(answer.error_code, answer.error_message, "cannot list ACLs")
    if refused is not None:
        raise refused
    found = [Acl(acl_names.ResourceType(resource.resource_type).name, resource.resource_name,
                 acl_names.PatternType(resource.pattern_type).name, acl.principal, acl.host,
                 acl_names.Operation(acl.operation).name,
                 acl_names.Permission(acl.permission_type).name)
             for resource in answer.resources for acl in resource.acls]
    return sorted(found, key=lambda a: (a.principal, a.resource_type, a.name, a.operation))


def create_acl(admin: ClusterAdmin, binding: AclBinding) -> None:
    futures = admin.kafka_admin.create_acls([binding], request_timeout=REQUEST_TIMEOUT_S)
    _result(futures[binding], "cannot create the ACL")


def delete_acl(admin: ClusterAdmin, binding: AclBinding) -> int:
    """Deletes exactly ``binding``; how many ACLs went (0: none matched)."""
    exact = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type,
                             binding.principal, binding.host, binding.operation,
                             binding.permission_type)
    futures = admin.kafka_admin.delete_acls([exact], request_timeout=REQUEST_TIMEOUT_S)
    return len(_result(futures[exact], "cannot delete the ACL"))


def scram_users(admin: ClusterAdmin) -> list[ScramUser]:
    described = _result(admin.kafka_admin.describe_user_scram_credentials(
        request_timeout=REQUEST_TIMEOUT_S), "cannot list SCRAM users")
    return [ScramUser(name, sorted((info.mechanism.name.replace("_", "-"), info.iterations)
                                   for info in description.scram_credential_infos))
            for name, description in sorted(described.items())]


def upsert_scram_user(admin: ClusterAdmin, name: str, mechanism: str, password: str,
                      iterations: int) -> None:
    mechanism = _choice(mechanism, SCRAM_MECHANISMS, "mechanism")
    if not name.strip():
        raise ConsoleError("a user needs a name")
    if not password:
        raise ConsoleError("a user needs a password")
    if iterations < MIN_ITERATIONS:
        raise ConsoleError(f"iterations must be at least {MIN_ITERATIONS}, got {iterations}")
    info = ScramCredentialInfo(SCRAM_MECHANISMS[mechanism], iterations)
    futures = admin.kafka_admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(name.strip(), info, password.encode())],
        request_timeout=REQUEST_TIMEOUT_S)
    _result(futures[name.strip()], f"cannot set {mechanism} credentials of {name!r}")


def delete_scram_user(admin: ClusterAdmin, name: str, mechanism: str) -> None:
    mechanism = _choice(mechanism, SCRAM_MECHANISMS, "mechanism")
    futures = admin.kafka_admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(name, SCRAM_MECHANISMS[mechanism])],
        request_timeout=REQUEST_TIMEOUT_S)
    _result(futures[name], f"cannot delete {mechanism} credentials of {name!r}")


def _result(future: Any, what: str) -> Any:
    """The future's result, or ConsoleError naming the error as Kafka does (as the raw
    requests' refusals are named: CLUSTER_AUTHORIZATION_FAILED, ...)."""
    try:
        return future.result(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as failure:
        error = failure.args[0]
        raise ConsoleError(_explained(what, error.name(), error.str())) from failure
    except TimeoutError as failure:
        raise ConsoleError(f"{what}: no answer within {REQUEST_TIMEOUT_S:g} s") from failure


def _ask(admin: ClusterAdmin, request: Any, version: int, what: str) -> Any:
    """One request to the first bootstrap server, logged in as ``admin``'s principal."""
    config = {key: str(value) for key, value in admin.client_config.items()}
    try:
        return asyncio.run(ask_once(bootstrap_addresses(admin.bootstrap)[0], request, version,
                                    REQUEST_TIMEOUT_S, CLIENT_ID, login(config)))
    except (LinkError, TimeoutError) as error:
        raise ConsoleError(f"{what}: {error or 'no answer'}") from error


def _refusal(code: int, message: str | None, what: str) -> ConsoleError | None:
    if code == ErrorCode.NONE:
        return None
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return ConsoleError(_explained(what, name, message))


def _explained(what: str, code_name: str, detail: str | None) -> str:
    """The refusal as the page shows it: Kafka's error name, the broker's words, and for an
    authorizer's refusal what it means."""
    text = f"{what}: {code_name}" + (f": {detail}" if detail else "")
    if code_name.endswith("AUTHORIZATION_FAILED"):
        text += " (the cluster's ACLs do not allow this principal)"
    return text


def quotas(admin: ClusterAdmin) -> list[QuotaEntry]:
    answer = _ask(admin, DescribeClientQuotasRequest(components=[], strict=False),
                  QUOTAS_VERSION, "cannot list quotas")
    refused = _refusal(answer.error_code, answer.error_message, "cannot list quotas")
    if refused is not None:
        raise refused
    entries = [QuotaEntry([(e.entity_type, e.entity_name) for e in entry.entity],
                          {v.key: v.value for v in entry.values})
               for entry in answer.entries or []]
    return sorted(entries, key=lambda e: e.label)


def set_quota(admin: ClusterAdmin, entity_type: str, entity_name: str, key: str,
              value: str) -> None:
    """Sets ``key`` of one entity (a blank name: the default entity) to ``value``; a blank
    value removes it."""
    if entity_type not in QUOTA_ENTITIES:
        raise ConsoleError(f"entity must be one of {', '.join(QUOTA_ENTITIES)}, "
                           f"got {entity_type!r}")
    if key not in QUOTA_KEYS:
        raise ConsoleError(f"quota must be one of {', '.join(QUOTA_KEYS)}, got {key!r}")
    remove = not value.strip()
    try:
        number = 0.0 if remove else float(value)
    except ValueError as error:
        raise ConsoleError(f"a quota's value must be a number, got {value!r}") from error
    if not remove and (not math.isfinite(number) or number <= 0):
        raise ConsoleError(f"a quota's value must be a number above 0, got {value!r}")
    entry = EntryData(entity=[EntityData(entity_type=entity_type,
                                         entity_name=entity_name.strip() or None)],
                      ops=[OpData(key=key, value=number, remove=remove)])
    what = f"cannot set {key} of {entity_type} {entity_name.strip() or '(default)'}"
    answer = _ask(admin, AlterClientQuotasRequest(entries=[entry], validate_only=False),
                  QUOTAS_VERSION, what)
    for result in answer.entries:
        refused = _refusal(result.error_code, result.error_message, what)
        if refused is not None:
            raise refused
