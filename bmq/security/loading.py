"""A role's security metadata: the SCRAM credentials, ACLs and client quotas read from where the
cluster keeps them (bmq/metadata/documents.py), and followed there: in cluster mode a change made
through any broker reaches every broker and proxy by a ZooKeeper watch. Each replaces what the
role holds whole, so requests in flight see the old or the new metadata, never half of each."""

from __future__ import annotations

from bmq.config import Config
from bmq.metadata.acls import AclStore
from bmq.metadata.credentials import CredentialStore
from bmq.metadata.documents import Documents
from bmq.metadata.quotas import QuotaStore
from bmq.security.authorizer import Authorizer
from bmq.security.quotas import QuotaManager
from bmq.security.session import Security


def load_security_metadata(security: Security, config: Config, documents: Documents) -> None:
    """Read everything now (blocking) and follow later changes."""
    credentials = security.credentials = CredentialStore(documents).load()
    authorizer = security.authorizer = Authorizer(config, AclStore(documents).load())
    quotas = security.quotas = QuotaManager(QuotaStore(documents).load(),
                                            config.quota_window_num,
                                            config.quota_window_size_seconds)

    documents.watch(CredentialStore.PATH, credentials.reload)
    documents.watch(AclStore.PATH, authorizer.reload)
    documents.watch(QuotaStore.PATH, quotas.store.reload)
