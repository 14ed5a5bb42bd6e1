"""The security of one client connection: who the client is, and what it may send yet.

On a SASL listener a connection starts unauthenticated: only ApiVersions and SaslHandshake are
served, then only SaslAuthenticate until the mechanism's exchange is done; any other request
closes the connection, as Kafka does. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED and then the connection closes. On SSL listeners the principal is the
client certificate's subject (``User:ANONYMOUS`` without one); on SASL listeners it is the
authenticated user, ``User:NAME``.

Re-authentication (KIP-368): a SASL session may have an end, told to the client in
SaslAuthenticate's session_lifetime_ms: the sooner of ``connections.max.reauth.ms`` and an
OAUTHBEARER token's exp. Before it the client sends SaslHandshake and SaslAuthenticate again on
the same connection, with the same mechanism, and must come out as the same principal. A request
other than SaslHandshake after the end closes the connection, as Kafka does; the check is one
clock read per request, and none on connections whose session has no end.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from bmq.config import Config
from bmq.listeners import Listener
from bmq.metadata.credentials import CredentialStore
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import REQUEST_APIS
from bmq.security import oauthbearer, scram
from bmq.security.authorizer import Authorizer
from bmq.security.principal_mapping import PrincipalMapper, PrincipalMappingError
from bmq.security.quotas import QuotaManager
from bmq.security.tls import certificate_subject, server_context

log = logging.getLogger(__name__)
audit = logging.getLogger("bmq.audit")

ANONYMOUS = "User:ANONYMOUS"
PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED_MECHANISMS = (PLAIN, *scram.MECHANISMS, OAUTHBEARER)
_API_VERSIONS = REQUEST_APIS["ApiVersionsRequest"][0]
_SASL_HANDSHAKE = REQUEST_APIS["SaslHandshakeRequest"][0]
_SASL_AUTHENTICATE = REQUEST_APIS["SaslAuthenticateRequest"][0]
# What each state of a SASL connection serves before authentication (or re-authentication).
_HANDSHAKE, _AUTHENTICATE, _COMPLETE, _FAILED = "handshake", "authenticate", "complete", "failed"
_ADMITTED = {_HANDSHAKE: {_API_VERSIONS, _SASL_HANDSHAKE}, _AUTHENTICATE: {_SASL_AUTHENTICATE},
             _FAILED: set()}
FAILED_MESSAGE = "Authentication failed during {} due to invalid credentials with SASL " \
                 "mechanism {}"


class AuthenticateResult(NamedTuple):
    """SaslAuthenticate's answer: error code, error message, bytes for the client and the
    session's lifetime (KIP-368; 0: no end)."""

    error: int
    message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0


class _Refused(ValueError):
    """An authentication refused with a message of its own for the client (Kafka's
    SaslAuthenticationException); the reason goes to the audit log."""

    def __init__(self, reason: str, client_message: str) -> None:
        super().__init__(reason)
        self.client_message = client_message


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

    def __init__(self, config: Config, listeners: list[Listener]) -> None:
        """Raises ``SecurityConfigError`` (or ``TlsConfigError``) for settings that cannot
        serve. Built before the role creates anything; the credentials, ACLs and quotas come
        once they are loaded (bmq/security/loading.py)."""
        self.credentials: CredentialStore | None = None
        self.authorizer: Authorizer | None = None     # set with the ACLs, once loaded
        self.quotas: QuotaManager | None = None       # set with the quotas, once loaded
        self.tls_contexts: dict[str, ssl.SSLContext] = {
            listener.name: server_context(config, listener.name, listener.sasl)
            for listener in listeners if listener.tls}
        self.principal_mappers: dict[str, PrincipalMapper] = {
            listener.name: _principal_mapper(config, listener.name)
            for listener in listeners if listener.tls and not listener.sasl}
        self.mechanisms: dict[str, list[str]] = {}
        self.max_reauth_ms = config.connections_max_reauth_ms
        self.token_validator: oauthbearer.TokenValidator | None = None
        for listener in listeners:
            if listener.sasl:
                self.mechanisms[listener.name] = enabled_mechanisms(config, listener.name)
                if OAUTHBEARER in self.mechanisms[listener.name] and \
                        self.token_validator is None:
                    self.token_validator = _token_validator(config, listener.name)

    def session(self, listener: Listener) -> Session:
        return Session(self, listener)


def _principal_mapper(config: Config, listener: str) -> PrincipalMapper:
    try:
        return PrincipalMapper(config.listener_setting(listener, "ssl_principal_mapping_rules"))
    except PrincipalMappingError as error:
        raise SecurityConfigError(f"listener {listener}: {error}") from None


def _token_validator(config: Config, listener: str) -> oauthbearer.TokenValidator:
    try:
        validator = oauthbearer.validator(config)
    except oauthbearer.OAuthBearerConfigError as error:
        raise SecurityConfigError(f"listener {listener}: {error}") from None
    if validator.keys is None:
        log.warning("OAUTHBEARER accepts UNSIGNED tokens (sasl_oauthbearer_unsecured_validator_"
                    "enable): any client can claim any identity; for tests only")
    return validator


class Session:
    """One connection's principal and authentication state (``bmq.net.connection.Guard``)."""

    def __init__(self, security: Security, listener: Listener) -> None:
        self.security = security
        self.listener = listener
        self.principal = ANONYMOUS
        self.client = ""        # host:port, as audit lines name the client
        self.host = ""          # the client's address, as ACLs with a host match it
        self.via = ""           # the proxy's principal, when a proxy acts for the client
        self.closing = False   # answer the last request, then close the connection
        self._state = _HANDSHAKE if listener.sasl else _COMPLETE
        self._mechanism = ""
        self._scram: scram.ScramExchange | None = None
        self._session_end: float | None = None   # time.monotonic(); None: the session never ends
        self._reauthenticating = False
        self._token_refusal = ""   # why the token was refused, once the error challenge is sent
        self._lifetime_ms = 0

    @property
    def credentials(self) -> CredentialStore | None:
        return self.security.credentials

    # bmq.net.connection.Guard --------------------------------------------------------------

    def accepted(self, extra_info: Callable[[str], Any]) -> None:
        peer = extra_info("peername")
        self.client = f"{peer[0]}:{peer[1]}" if peer else ""
        self.host = str(peer[0]) if peer else ""
        mapper = self.security.principal_mappers.get(self.listener.name)
        subject = certificate_subject(extra_info("ssl_object")) if mapper else None
        if mapper is not None and subject is not None:
            name = mapper.name(subject)
            if name is None:
                # Kafka fails the authentication of a certificate no rule maps: every request
                # of this connection is refused, which closes it.
                audit.warning("authentication-failed client=%s listener=%s certificate=%s "
                              "(no ssl.principal.mapping.rules rule applies)", self.client,
                              self.listener.name, subject)
                self._state = _FAILED
            else:
                self.principal = f"User:{name}"

    def admits(self, api_key: int) -> bool:
        if self._state == _COMPLETE:
            # The whole per-request cost of re-authentication: one clock read when the session
            # has an end, nothing when it has none.
            end = self._session_end
            return end is None or time.monotonic() < end or self._expired(api_key)
        return api_key in _ADMITTED[self._state]

    def _expired(self, api_key: int) -> bool:
        if api_key == _SASL_HANDSHAKE:
            return True   # re-authentication may begin after the end too, as in Kafka
        audit.warning("session-expired principal=%s client=%s listener=%s mechanism=%s "
                      "(not re-authenticated in time; closing)", self.principal, self.client,
                      self.listener.name, self._mechanism)
        return False

    def throttle(self, api_key: int, client_id: str, request: Any, response: Any,
                 seconds: float) -> int:
        quotas = self.security.quotas
        if quotas is None:
            return 0
        user = self.principal.partition(":")[2]
        return quotas.throttle(api_key, user, client_id, request, response, seconds)

    def act_for(self, principal: str, host: str) -> bool:
        """A proxy's link (BmqActAs): its later requests are the client's, who authenticated
        with the proxy. Once only: False if the link already acts for someone."""
        if self.via:
            return False
        self.via, self.principal, self.host = self.principal, principal, host
        self.client = f"{host} via {self.client}"
        log.debug("connection %s acts for %s (asked by %s)", self.client, principal, self.via)
        return True

    # SASL --------------------------------------------------------------------------------------

    @property
    def sasl(self) -> bool:
        return self.listener.sasl

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        """SaslHandshake: (error code, enabled mechanisms); on an authenticated connection it
        begins re-authentication, with the same mechanism (Kafka refuses another)."""
        enabled = self.security.mechanisms.get(self.listener.name, [])
        if self._state == _COMPLETE and self._mechanism:
            if mechanism != self._mechanism:
                self._fail(f"re-authentication with {mechanism!r}, authenticated with "
                           f"{self._mechanism!r}")
                return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
            self._reauthenticating, self._scram, self._state = True, None, _AUTHENTICATE
            return ErrorCode.NONE, enabled
        if self._state != _HANDSHAKE:
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if mechanism not in enabled:
            self._fail(f"mechanism {mechanism!r} is not enabled")
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        self._mechanism, self._state = mechanism, _AUTHENTICATE
        return ErrorCode.NONE, enabled

    def authenticate(self, auth_bytes: bytes) -> AuthenticateResult:
        """SaslAuthenticate: one step of the mechanism's exchange."""
        if self._state != _AUTHENTICATE:
            return AuthenticateResult(ErrorCode.ILLEGAL_SASL_STATE,
                                      "SaslAuthenticate is not expected now", b"")
        try:
            if self._mechanism == PLAIN:
                answer = self._plain(auth_bytes)
            elif self._mechanism == OAUTHBEARER:
                answer = self._oauthbearer(auth_bytes)
            else:
                answer = self._scram_step(auth_bytes)
        except _Refused as refused:
            self._fail(str(refused))
            return AuthenticateResult(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      refused.client_message, b"")
        except (scram.ScramError, oauthbearer.MalformedMessage, UnicodeDecodeError) as error:
            user = self._scram.user if self._scram is not None else ""
            self._fail(f"user {user!r}: {error}" if user else str(error))
            during = "re-authentication" if self._reauthenticating else "authentication"
            return AuthenticateResult(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      FAILED_MESSAGE.format(during, self._mechanism), b"")
        if self._state != _COMPLETE:
            return AuthenticateResult(ErrorCode.NONE, None, answer)
        return AuthenticateResult(ErrorCode.NONE, None, answer, self._lifetime_ms)

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

    def _oauthbearer(self, auth_bytes: bytes) -> bytes:
        if self._token_refusal:
            # The client's answer to the error challenge (a lone 0x01; anything else too: no
            # second try on this connection): now the exchange fails, with the challenge as
            # the message, as Kafka's OAuthBearerSaslServer does.
            raise _Refused("", oauthbearer.ERROR_CHALLENGE.decode())
        authzid, token = oauthbearer.client_first(auth_bytes)
        validator = self.security.token_validator
        if validator is None:   # Security builds one for every listener with OAUTHBEARER
            raise oauthbearer.MalformedMessage("OAUTHBEARER has no validator")
        try:
            valid = validator.validate(token)
        except oauthbearer.TokenError as error:
            self._token_refusal = str(error)
            self._audit_failure(f"token refused: {error}")
            return oauthbearer.ERROR_CHALLENGE
        if authzid and authzid != valid.principal_name:
            raise _Refused(
                f"authorization id {authzid!r} is not the token's principal "
                f"{valid.principal_name!r}",
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({valid.principal_name})")
        self._complete(valid.principal_name, valid.expires_ms)
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

    def _complete(self, user: str, expires_ms: int | None = None) -> None:
        principal = f"User:{user}"
        if self._reauthenticating and principal != self.principal:
            raise _Refused(f"re-authentication as {principal}, authenticated as "
                           f"{self.principal}",
                           f"Cannot change principals during re-authentication from "
                           f"{self.principal}: {principal}")
        self._lifetime_ms = self._start_session(expires_ms)
        self._state, self.principal = _COMPLETE, principal
        log.info("%s %s from %s on listener %s with %s%s",
                 "re-authenticated" if self._reauthenticating else "authenticated",
                 self.principal, self.client, self.listener.name, self._mechanism,
                 f" (session {self._lifetime_ms} ms)" if self._session_end is not None else "")

    def _start_session(self, expires_ms: int | None) -> int:
        """Set when the session ends: Kafka's lifetime, the sooner of connections.max.reauth.ms
        (when above 0) and the credential's expiry; returns it (0: no end)."""
        max_reauth = self.security.max_reauth_ms
        if expires_ms is None and max_reauth <= 0:
            self._session_end = None
            return 0
        lifetime = max_reauth
        if expires_ms is not None:
            remaining = expires_ms - int(time.time() * 1000)
            lifetime = remaining if max_reauth <= 0 else min(remaining, max_reauth)
        lifetime = max(lifetime, 0)
        self._session_end = time.monotonic() + lifetime / 1000
        return lifetime

    def _fail(self, reason: str) -> None:
        if reason:   # empty: already audited (a refused token, before its error challenge)
            self._audit_failure(reason)
        self._state, self.closing = _FAILED, True

    def _audit_failure(self, reason: str) -> None:
        # Kafka's audit of a failed authentication: who, from where, how, and why.
        audit.warning("authentication-failed client=%s listener=%s mechanism=%s reason=%r%s",
                      self.client, self.listener.name, self._mechanism or "-", reason,
                      f" principal={self.principal}" if self._reauthenticating else "")
