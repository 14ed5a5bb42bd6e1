"""What DescribeClientQuotas and AlterClientQuotas share: the role's quota manager."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.security.quotas import QuotaManager

NO_QUOTAS = "Client quotas are kept by `bmq serve` only (cluster mode: not yet)"


def quota_manager(ctx: RequestContext) -> QuotaManager | None:
    return None if ctx.session is None else ctx.session.security.quotas
