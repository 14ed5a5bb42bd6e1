"""What a request handler's context offers to authorize, over its connection's security session:
the same on every role that serves clients (the broker's RequestContext, the proxy's
ProxyContext), so a proxy decides the requests it answers itself exactly as a broker would."""

from __future__ import annotations

from bmq.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from bmq.protocol.acl_operations import (
    CLUSTER_OPERATIONS,
    TOPIC_OPERATIONS,
    fill_metadata_operations,
)
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.headers import RequestHeader
from bmq.protocol.messages import MetadataRequest, MetadataResponse
from bmq.security.authorizer import Authorizer, audit_denied
from bmq.security.session import ANONYMOUS, Session

# What a request refused on a resource of each type is answered.
DENIED = {ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
          ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


class Authorizing:
    """Mixed into a handler context that has ``session``, ``header`` and ``listener``."""

    __slots__ = ()
    session: Session | None
    header: RequestHeader
    listener: str

    @property
    def authorizer(self) -> Authorizer | None:
        """The role's authorizer if it decides (``authorizer.class.name`` set), else None:
        every request is then allowed and the ACL APIs answer SECURITY_DISABLED."""
        authorizer = None if self.session is None else self.session.security.authorizer
        return authorizer if authorizer is not None and authorizer.enabled else None

    @property
    def authorizing(self) -> bool:
        """Whether an authorizer decides (else every request is allowed)."""
        return self.authorizer is not None

    def authorize(self, operation: Operation, resource_type: ResourceType, name: str,
                  audit: bool = True) -> bool:
        """Whether the principal may do ``operation`` on the resource (always, without an
        authorizer); a refusal is audited unless ``audit`` is false (a listing that leaves out
        what the principal may not see)."""
        authorizer, session = self.authorizer, self.session
        if authorizer is None:
            return True
        assert session is not None      # an authorizer comes only with a session
        if authorizer.authorize(session.principal, session.host, operation,
                                resource_type, name):
            return True
        if audit:
            audit_denied(session.principal, session.client, self.listener,
                         self.header.api_key, resource_type, name, operation)
        return False

    def authorize_cluster(self, operation: Operation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def require(self, operation: Operation, resource_type: ResourceType, name: str) -> None:
        """Raise Kafka's authorization error for the resource type unless allowed."""
        if not self.authorize(operation, resource_type, name):
            raise KafkaError(DENIED[resource_type])

    def operations(self, supported: int, resource_type: ResourceType, name: str) -> int:
        """KIP-430's authorized-operations bits: of the ``supported`` operations, those the
        principal may do on the resource (all of them without an authorizer)."""
        if self.authorizer is None:
            return supported
        return sum(1 << op for op in Operation if supported & (1 << op)
                   and self.authorize(op, resource_type, name, audit=False))

    def fill_metadata_operations(self, request: MetadataRequest,
                                 response: MetadataResponse) -> None:
        """The authorized operations a Metadata request asked for, the principal's."""
        fill_metadata_operations(
            request, response,
            lambda topic: self.operations(TOPIC_OPERATIONS, ResourceType.TOPIC, topic or ""),
            lambda: self.operations(CLUSTER_OPERATIONS, ResourceType.CLUSTER, CLUSTER_NAME))

    @property
    def principal(self) -> str:
        """Who sent the request, as Kafka names principals: ``User:alice`` (SASL),
        ``User:CN=alice,O=example`` (a client certificate) or ``User:ANONYMOUS``."""
        return ANONYMOUS if self.session is None else self.session.principal
