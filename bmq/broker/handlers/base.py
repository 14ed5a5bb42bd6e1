"""What every broker API handler receives."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.broker.broker import Broker
from bmq.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.headers import RequestHeader
from bmq.security.authorizer import Authorizer, audit_denied
from bmq.security.session import ANONYMOUS, Session

# What a request refused on a resource of each type is answered.
DENIED = {ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
          ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    # The client's address as Kafka shows it in DescribeGroups ("/127.0.0.1").
    client_host: str
    # The request frame; record memoryviews in the decoded request point into it.
    frame: bytearray
    # The listener the client connected on: nodes are named by their address on it.
    listener: str
    # The connection's security: its principal and SASL state (None: a role without security).
    session: Session | None = None

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

    def authorize_internal(self) -> bool:
        """Whether an inter-node API (BMQ's own, and transaction markers) may be served: only
        on the inter-broker listener, the one other nodes connect to, and only to principals
        that may CLUSTER_ACTION (other brokers, proxies), as Kafka guards its broker APIs."""
        if self.listener != self.broker.inter_broker_listener:
            session = self.session
            if session is not None:
                audit_denied(session.principal, session.client, self.listener,
                             self.header.api_key, ResourceType.CLUSTER, CLUSTER_NAME,
                             Operation.CLUSTER_ACTION)
            return False
        return self.authorize_cluster(Operation.CLUSTER_ACTION)

    def require(self, operation: Operation, resource_type: ResourceType, name: str) -> None:
        """Raise Kafka's authorization error for the resource type unless allowed."""
        if not self.authorize(operation, resource_type, name):
            raise KafkaError(DENIED[resource_type])

    @property
    def principal(self) -> str:
        """Who sent the request, as Kafka names principals: ``User:alice`` (SASL),
        ``User:CN=alice,O=example`` (a client certificate) or ``User:ANONYMOUS``."""
        return ANONYMOUS if self.session is None else self.session.principal
