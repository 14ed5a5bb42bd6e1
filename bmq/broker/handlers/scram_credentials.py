"""What the SCRAM credential APIs share: where the broker keeps credentials."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.metadata.credentials import CredentialStore

NO_STORE = "SCRAM credentials are kept by `bmq serve` only (cluster mode: not yet)"


def credential_store(ctx: RequestContext) -> CredentialStore | None:
    return None if ctx.session is None else ctx.session.credentials
