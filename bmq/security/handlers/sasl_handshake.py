"""SaslHandshake (v1; v0 only as far as the handshake): choose the SASL mechanism of the
connection; on an authenticated SASL connection, begin re-authentication (KIP-368). Off a SASL
listener, or in the middle of an exchange, Kafka answers ILLEGAL_SASL_STATE."""

from __future__ import annotations

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse
from bmq.security.context import Authorizing


async def handle_sasl_handshake(ctx: Authorizing, request: SaslHandshakeRequest,
                                version: int) -> SaslHandshakeResponse:
    session = ctx.session
    if session is None or not session.sasl:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)
    error, mechanisms = session.handshake(request.mechanism)
    if version == 0 and error == ErrorCode.NONE:
        # v0 is followed by raw SASL tokens outside Kafka's framing, which BMQ does not read:
        # refuse, so the client is told rather than left waiting.
        session.handshake_refused("SaslHandshake v0 (raw SASL tokens) is not supported")
        error = ErrorCode.ILLEGAL_SASL_STATE
    return SaslHandshakeResponse(error_code=error, mechanisms=mechanisms)
