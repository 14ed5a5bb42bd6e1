"""How a node authenticates its own connections to brokers (the proxy's links, the brokers'
links to each other): the client side of the inter-broker listener's security protocol.

As Kafka's brokers do, a node connects to the other nodes' inter-broker listener with that
listener's settings of its own configuration: TLS (``client_context``) for SSL and SASL_SSL, and
for SASL_* the mechanism ``sasl.mechanism.inter.broker.protocol`` with the user and password of
``sasl.jaas.config`` (Kafka's JAAS line: ``...LoginModule required username="u"
password="p";``; the listener may override it as ``listener.name.NAME.sasl.jaas.config`` or
``listener.name.NAME.<mechanism>.sasl.jaas.config``). That user should be a super user (or hold
CLUSTER_ACTION): the brokers refuse their internal APIs to anyone else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from bmq.config import Config
from bmq.listeners import Listener
from bmq.net.client import LinkSecurity
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import BmqActAsRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from bmq.security import scram
from bmq.security.session import PLAIN, SecurityConfigError, Session, enabled_mechanisms
from bmq.security.tls import client_context

# One request on a link being opened, before it serves anything else: (message, version) ->
# the decoded response.
Exchange = Callable[[Any, int], Awaitable[Any]]
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class LinkAuthenticationError(ConnectionError):
    """The other node refused this node's credentials (or the exchange failed)."""


class NodeLogin:
    """The TLS context and SASL login of this node's links (``bmq.net.client.LinkSecurity``)."""

    def __init__(self, ssl_context: ssl.SSLContext | None, mechanism: str = "",
                 username: str = "", password: str = "") -> None:
        self.ssl = ssl_context
        self.mechanism = mechanism
        self._username = username
        self._password = password

    async def authenticate(self, exchange: Exchange) -> None:
        """Log in on a new link (nothing to do without SASL)."""
        if not self.mechanism:
            return
        handshake = await exchange(SaslHandshakeRequest(mechanism=self.mechanism), 1)
        if handshake.error_code != ErrorCode.NONE:
            raise LinkAuthenticationError(
                f"SASL mechanism {self.mechanism} refused (the other node has "
                f"{', '.join(handshake.mechanisms)})")
        if self.mechanism == PLAIN:
            await _step(exchange, f"\0{self._username}\0{self._password}".encode())
            return
        client = ScramClient(self.mechanism, self._username, self._password)
        server_first = await _step(exchange, client.first())
        server_final = await _step(exchange, client.final(server_first))
        client.verify(server_final)


async def _step(exchange: Exchange, auth_bytes: bytes) -> bytes:
    response = await exchange(SaslAuthenticateRequest(auth_bytes=auth_bytes), 2)
    if response.error_code != ErrorCode.NONE:
        raise LinkAuthenticationError(response.error_message or "SASL authentication failed")
    return bytes(response.auth_bytes)


class ScramClient:
    """The client side of one SCRAM exchange (RFC 5802), without channel binding."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._mechanism = mechanism
        self._digest = scram.MECHANISMS[mechanism][0]
        self._password = password.encode()
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._nonce = base64.b64encode(os.urandom(24)).decode()
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attributes = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce, iterations = attributes.get("r", ""), int(attributes.get("i", "0"))
        if not nonce.startswith(self._nonce) or not iterations >= scram.MIN_ITERATIONS:
            raise LinkAuthenticationError("malformed SCRAM server-first-message")
        salted = scram.salted_password(self._mechanism, self._password,
                                       base64.b64decode(attributes["s"]), iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        stored_key = hashlib.new(self._digest, client_key).digest()
        signature = hmac.digest(stored_key, auth_message, self._digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._digest)
        self._server_signature = hmac.digest(server_key, auth_message, self._digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """The server proved it knows the credential too (or the link is not to be trusted)."""
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise LinkAuthenticationError("the server's SCRAM signature does not match")


def link_security(config: Config, listener: Listener) -> NodeLogin | None:
    """The security of links to other nodes' ``listener`` (the inter-broker one), or None for
    PLAINTEXT. Raises ``SecurityConfigError`` for settings that cannot log in."""
    if not listener.tls and not listener.sasl:
        return None
    context = client_context(config, listener.name) if listener.tls else None
    if not listener.sasl:
        return NodeLogin(context)
    mechanism = (config.sasl_mechanism_inter_broker_protocol.strip().upper()
                 or enabled_mechanisms(config, listener.name)[0])
    if mechanism not in (PLAIN, *scram.MECHANISMS):
        raise SecurityConfigError(
            f"sasl.mechanism.inter.broker.protocol {mechanism}: links between nodes log in "
            f"with {PLAIN} or {', '.join(scram.MECHANISMS)}")
    override = config.listener_overrides.get(
        f"{listener.name}_{mechanism.replace('-', '_')}".upper(), {}).get("sasl_jaas_config")
    jaas = override or config.listener_setting(listener.name, "sasl_jaas_config")
    options = dict(_JAAS_OPTION.findall(jaas))
    if not options.get("username") or "password" not in options:
        raise SecurityConfigError(
            f"listener {listener.name}: links to other nodes log in with SASL {mechanism}: "
            f"sasl.jaas.config (or listener.name.{listener.name.lower()}.sasl.jaas.config) "
            f"needs username=\"...\" password=\"...\"")
    return NodeLogin(context, mechanism, options["username"], options["password"])


class ActingFor:
    """The links a proxy opens for one client connection: logged in as the proxy (``base``),
    then told to act for the client's principal (BmqActAs), so the brokers authorize, audit and
    throttle what the proxy forwards as the client's own requests."""

    def __init__(self, base: LinkSecurity | None, session: Session) -> None:
        self._base = base
        self._session = session

    @property
    def ssl(self) -> ssl.SSLContext | None:
        return None if self._base is None else self._base.ssl

    async def authenticate(self, exchange: Exchange) -> None:
        if self._base is not None:
            await self._base.authenticate(exchange)
        session = self._session
        answer = await exchange(BmqActAsRequest(principal=session.principal,
                                                client_host=session.host), 0)
        if answer.error_code != ErrorCode.NONE:
            raise LinkAuthenticationError(
                f"the broker refused this proxy acting for {session.principal}: "
                f"{ErrorCode(answer.error_code).name} (the proxy's own principal needs "
                f"CLUSTER_ACTION on the cluster, on the inter-broker listener)")
