"""A role's security, set up at start: its listeners' TLS and SASL and its links' login, built from
the settings before the role creates anything (one line and exit 2 for settings that cannot
serve); then the SCRAM credentials, ACLs and client quotas read from where the cluster keeps them
(bmq/metadata/documents.py), and followed there: in cluster mode a change made through any broker
reaches every broker and proxy by a ZooKeeper watch. Each replaces what the role holds whole, so
requests in flight see the old or the new metadata, never half of each."""

from __future__ import annotations

from bmq.config import Config
from bmq.metadata.acls import AclStore
from bmq.metadata.credentials import CredentialStore
from bmq.metadata.documents import Documents
from bmq.metadata.quotas import QuotaStore
from bmq.security.authorizer import Authorizer
from bmq.security.link import NodeLogin, link_security
from bmq.security.quotas import QuotaManager
from bmq.security.session import Security, SecurityConfigError
from bmq.security.tls import TlsConfigError
from bmq.startup import ExitCode, StartupError


def role_security(config: Config, *, links: bool) -> tuple[Security, NodeLogin | None]:
    """The role's ``Security`` and, when it connects to other nodes (``links``), how its links
    log in to their inter-broker listener; a ``StartupError`` for settings that cannot serve."""
    try:
        security = Security(config, config.listener_list)
        login = link_security(config, config.listener_list[0]) if links else None
    except (SecurityConfigError, TlsConfigError) as error:
        raise StartupError(str(error), ExitCode.USAGE) from error
    return security, login


def load_security_metadata(security: Security, config: Config, documents: Documents) -> None:
    """Read everything now (blocking) and follow later changes."""
    security.credentials = CredentialStore(documents).follow()
    authorizer = security.authorizer = Authorizer(config, AclStore(documents).load())
    security.quotas = QuotaManager(QuotaStore(documents).follow(), config.quota_window_num,
                                   config.quota_window_size_seconds)
    # The authorizer re-indexes its ACLs when they change.
    documents.watch(AclStore.PATH, authorizer.reload)
