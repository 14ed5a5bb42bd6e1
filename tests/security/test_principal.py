"""Who a connection is: a verified client certificate is ``User:<subject DN>`` as Kafka's default
principal builder writes it; no certificate (ssl.client.auth=requested) is ``User:ANONYMOUS``;
ssl.client.auth=required refuses a client without one. A real TLS handshake with Python's ssl
against the broker's own listener code (bmq.net.listening with bmq.security's contexts)."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

from bmq.config import load_config
from bmq.net.listening import Listening
from bmq.security.session import Security, Session
from tests.conftest import free_port
from tests.security.conftest import Certificates


class _Recorder(asyncio.Protocol):
    def __init__(self, session: Session, sessions: list[Session]) -> None:
        self.session = session
        sessions.append(session)

    def connection_made(self, transport: Any) -> None:
        self.session.accepted(transport.get_extra_info)
        transport.write(b"ok")


async def _principal(certificates: Certificates, client_auth: str, client_cert: bool,
                     protocol: str = "SSL") -> str:
    port = free_port()
    config = load_config(environ={
        "BMQ_LISTENERS": f"{protocol}://127.0.0.1:{port}",
        # The per-listener spelling for the keystore, the broker-wide one for the rest.
        f"BMQ_LISTENER_NAME_{protocol}_SSL_KEYSTORE_LOCATION": str(certificates.server),
        "BMQ_SSL_TRUSTSTORE_LOCATION": str(certificates.ca),
        "BMQ_SSL_CLIENT_AUTH": client_auth})
    [listener] = config.listener_list
    security = Security(config, [listener])
    sessions: list[Session] = []
    listening = Listening([listener], security.tls_contexts, sasl=True)
    listening.bind()
    await listening.start(lambda name: _Recorder(security.session(listener), sessions))
    try:
        context = ssl.create_default_context(cafile=str(certificates.ca))
        if client_cert:
            context.load_cert_chain(str(certificates.client_cert), str(certificates.client_key))
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                       server_hostname="localhost")
        try:
            assert await asyncio.wait_for(reader.read(2), 10) == b"ok"
        finally:
            writer.close()
        return sessions[0].principal
    finally:
        listening.close()


def test_a_client_certificate_is_its_subject_dn(certificates: Certificates) -> None:
    principal = asyncio.run(_principal(certificates, "required", client_cert=True))
    assert principal == "User:CN=alice,OU=ops,O=example"


def test_no_client_certificate_is_anonymous_when_only_requested(
        certificates: Certificates) -> None:
    assert asyncio.run(_principal(certificates, "requested", False)) == "User:ANONYMOUS"


def test_a_required_client_certificate_refuses_a_client_without_one(
        certificates: Certificates) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
        asyncio.run(_principal(certificates, "required", False))


def test_a_sasl_ssl_listener_ignores_the_broker_wide_client_auth(
        certificates: Certificates) -> None:
    # As Kafka: SASL says who the client is; only listener.name.NAME.ssl.client.auth would ask
    # a SASL_SSL client for a certificate. The principal stays anonymous until SASL.
    principal = asyncio.run(_principal(certificates, "required", False, protocol="SASL_SSL"))
    assert principal == "User:ANONYMOUS"
