"""SaslAuthenticate (v0-2): one step of the connection's SASL exchange (PLAIN: one step;
SCRAM: two; OAUTHBEARER: one, two for a refused token). A failure answers
SASL_AUTHENTICATION_FAILED and the connection then closes."""

from __future__ import annotations

import asyncio

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse
from bmq.security.context import Authorizing


async def handle_sasl_authenticate(ctx: Authorizing, request: SaslAuthenticateRequest,
                                   version: int) -> SaslAuthenticateResponse:
    session = ctx.session
    if session is None or not session.sasl:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="not a SASL listener")
    # PLAIN derives the salted password (PBKDF2, thousands of HMACs; hashlib lets the GIL go):
    # off the event loop, so a burst of logins does not stall every other client.
    # OAUTHBEARER may read the issuer's keys again (a file or an HTTP endpoint): off the loop too.
    result = await asyncio.get_running_loop().run_in_executor(
        None, session.authenticate, bytes(request.auth_bytes))
    # session_lifetime_ms (v1+): when the client must have re-authenticated (KIP-368); 0: never.
    return SaslAuthenticateResponse(error_code=result.error, error_message=result.message,
                                    auth_bytes=result.auth_bytes,
                                    session_lifetime_ms=result.session_lifetime_ms)
