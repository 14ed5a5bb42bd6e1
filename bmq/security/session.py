"""The security of one client connection: who the client is, and what it may send yet.

On a SASL listener a connection starts unauthenticated: only ApiVersions and SaslHandshake are
served, then only SaslAuthenticate until the mechanism's exchange is done; any other request
closes the connection, as Kafka does. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED and then the connection closes. On SSL listeners the principal is the
client certificate's subject (``User:ANONYMOUS`` without one); on SASL listeners it is the
authenticated user, ``User:NAME``.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Any

from bmq.config import Config
from bmq.listeners import Listener
from bmq.metadata.credentials import CredentialStore
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import REQUEST_APIS
from bmq.security import scram
from bmq.security.authorizer import Authorizer
from bmq.security.quotas import QuotaManager
from bmq.security.tls import certificate_principal, server_context

log = logging.getLogger(__name__)
audit = logging.getLogger("bmq.audit")

ANONYMOUS = "User:ANONYMOUS"
PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *scram.MECHANISMS)
_API_VERSIONS = REQUEST_APIS["ApiVersionsRequest"][0]
_SASL_HANDSHAKE = REQUEST_APIS["SaslHandshakeRequest"][0]
_SASL_AUTHENTICATE = REQUEST_APIS["SaslAuthenticateRequest"][0]
# What each state of a SASL connection serves before authentication.
_HANDSHAKE, _AUTHENTICATE, _COMPLETE, _FAILED = "handshake", "authenticate", "complete", "failed"
_ADMITTED = {_HANDSHAKE: {_API_VERSIONS, _SASL_HANDSHAKE}, _AUTHENTICATE: {_SASL_AUTHENTICATE},
             _FAILED: set()}
FAILED_MESSAGE = "Authentication failed during authentication due to invalid credentials " \
                 "with SASL mechanism {}"


class SecurityConfigError(ValueError):
    """Security settings a role cannot start with."""


def enabled_mechanisms(config: Config, listener: str) -> list[str]:
    names = [name.strip().upper() for name in
             config.listener_setting(listener, "sasl_enabled_mechanisms").split(",")
             if name.strip()]
    unknown = [name for name in names if name not in SUPPORTED_MECHANISMS]
    if unknown or not names:
        raise SecurityConfigError(
            f"listener {listener}: sasl.enabled.mechanisms {', '.join(unknown) or '(empty)'} "
            f"not supported (BMQ has {', '.join(SUPPORTED_MECHANISMS)})")
    return names


class Security:
    """A role's security: TLS contexts and SASL mechanisms per listener, the credentials."""

    def __init__(self, config: Config, listeners: list[Listener], keeps_credentials: bool) -> None:
        """Raises ``SecurityConfigError`` (or ``TlsConfigError``) for settings that cannot
        serve; a role that keeps no credentials (``keeps_credentials`` false) cannot serve SASL.
        Built before the role creates anything; the credentials come once they are loaded."""
        self.credentials: CredentialStore | None = None
        self.authorizer: Authorizer | None = None     # set with the ACLs, once loaded
        self.quotas: QuotaManager | None = None       # set with the quotas, once loaded
        self.tls_contexts: dict[str, ssl.SSLContext] = {
            listener.name: server_context(config, listener.name, listener.sasl)
            for listener in listeners if listener.tls}
        self.mechanisms: dict[str, list[str]] = {}
        for listener in listeners:
            if listener.sasl:
                if not keeps_credentials:
                    raise SecurityConfigError(
                        f"listener {listener.name}: {listener.protocol} needs SCRAM "
                        f"credentials, which this role does not keep yet (only `bmq serve`)")
                self.mechanisms[listener.name] = enabled_mechanisms(config, listener.name)

    def session(self, listener: Listener) -> Session:
        return Session(self, listener)


class Session:
    """One connection's principal and authentication state (``bmq.net.connection.Guard``)."""

    def __init__(self, security: Security, listener: Listener) -> None:
        self.security = security
        self.listener = listener
        self.principal = ANONYMOUS
        self.client = ""
        self.closing = False   # answer the last request, then close the connection
        self._state = _HANDSHAKE if listener.sasl else _COMPLETE
        self._mechanism = ""
        self._scram: scram.ScramExchange | None = None

    @property
    def credentials(self) -> CredentialStore | None:
        return self.security.credentials

    # bmq.net.connection.Guard --------------------------------------------------------------

    def accepted(self, extra_info: Callable[[str], Any]) -> None:
        peer = extra_info("peername")
        self.client = f"{peer[0]}:{peer[1]}" if peer else ""
        if self.listener.tls:
            self.principal = certificate_principal(extra_info("ssl_object")) or ANONYMOUS

    def admits(self, api_key: int) -> bool:
        admitted = _ADMITTED.get(self._state)
        return admitted is None or api_key in admitted

    def throttle(self, api_key: int, client_id: str, request: Any, response: Any,
                 seconds: float) -> int:
        quotas = self.security.quotas
        if quotas is None:
            return 0
        user = self.principal.partition(":")[2]
        return quotas.throttle(api_key, user, client_id, request, response, seconds)

    # SASL --------------------------------------------------------------------------------------

    @property
    def sasl(self) -> bool:
        return self.listener.sasl

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        """SaslHandshake: (error code, enabled mechanisms)."""
        enabled = self.security.mechanisms.get(self.listener.name, [])
        if self._state != _HANDSHAKE:
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if mechanism not in enabled:
            self._fail(f"mechanism {mechanism!r} is not enabled")
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        self._mechanism, self._state = mechanism, _AUTHENTICATE
        return ErrorCode.NONE, enabled

    def authenticate(self, auth_bytes: bytes) -> tuple[int, str | None, bytes]:
        """SaslAuthenticate: (error code, error message, bytes for the client)."""
        if self._state != _AUTHENTICATE:
            return ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate is not expected now", b""
        try:
            if self._mechanism == PLAIN:
                return ErrorCode.NONE, None, self._plain(auth_bytes)
            return ErrorCode.NONE, None, self._scram_step(auth_bytes)
        except (scram.ScramError, UnicodeDecodeError) as error:
            user = self._scram.user if self._scram is not None else ""
            self._fail(f"user {user!r}: {error}" if user else str(error))
            return (ErrorCode.SASL_AUTHENTICATION_FAILED,
                    FAILED_MESSAGE.format(self._mechanism), b"")

    def _plain(self, auth_bytes: bytes) -> bytes:
        parts = auth_bytes.decode("utf-8").split("\0")
        if len(parts) != 3 or not parts[1]:
            raise scram.ScramError("malformed PLAIN message")
        authzid, user, password = parts
        if authzid and authzid != user:
            raise scram.ScramError("authorization id differs from the user name")
        store = self.credentials
        # PLAIN checks the password against the user's SCRAM credentials (any mechanism).
        credentials = store.of_user(user) if store is not None else []
        if not credentials or not scram.password_matches(credentials[0], password.encode()):
            raise scram.ScramError(f"invalid credentials for user {user!r}")
        self._complete(user)
        return b""

    def _scram_step(self, auth_bytes: bytes) -> bytes:
        if self._scram is None:
            exchange = self._scram = scram.ScramExchange(self._mechanism)
            user = exchange.client_first(auth_bytes)
            store = self.credentials
            credential = store.get(user, self._mechanism) if store is not None else None
            if credential is None:
                raise scram.ScramError(f"unknown user {user!r}")
            return exchange.server_first(credential)
        answer = self._scram.client_final(auth_bytes)
        self._complete(self._scram.user)
        return answer

    def handshake_refused(self, reason: str) -> None:
        self._fail(reason)

    def _complete(self, user: str) -> None:
        self._state, self.principal = _COMPLETE, f"User:{user}"
        log.info("authenticated %s from %s on listener %s with %s", self.principal, self.client,
                 self.listener.name, self._mechanism)

    def _fail(self, reason: str) -> None:
        # Kafka's audit of a failed authentication: who, from where, how, and why.
        audit.warning("authentication-failed client=%s listener=%s mechanism=%s reason=%r",
                      self.client, self.listener.name, self._mechanism or "-", reason)
        self._state, self.closing = _FAILED, True
