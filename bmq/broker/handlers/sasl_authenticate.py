"""SaslAuthenticate (v0-2): one step of the connection's SASL exchange (PLAIN: one step;
SCRAM: two). A failure answers SASL_AUTHENTICATION_FAILED and the connection then closes."""

from __future__ import annotations

import asyncio

from bmq.broker.handlers.base import RequestContext
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse


async def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest,
                                   version: int) -> SaslAuthenticateResponse:
    session = ctx.session
    if session is None or not session.sasl:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="not a SASL listener")
    # PLAIN derives the salted password (PBKDF2, thousands of HMACs; hashlib lets the GIL go):
    # off the event loop, so a burst of logins does not stall every other client.
    error, message, answer = await asyncio.get_running_loop().run_in_executor(
        None, session.authenticate, bytes(request.auth_bytes))
    # session_lifetime_ms 0: no re-authentication (KIP-368 comes in a later slice).
    return SaslAuthenticateResponse(error_code=error, error_message=message, auth_bytes=answer)
