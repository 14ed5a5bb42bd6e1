"""Requests the client library has no admin call for (transactions, client quotas), spoken with
BMQ's own Kafka client (``bmq.net.client``), secured as the command's librdkafka properties say
(``-X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=...
-X sasl.password=... -X ssl.ca.location=...``): TLS, and SASL PLAIN or SCRAM."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from bmq.commands.common import EXIT_UNREACHABLE, Connection, fail
from bmq.net.client import BrokerLink, LinkError
from bmq.security.link import NodeLogin
from bmq.security.scram import MECHANISMS


def brokers(conn: Connection) -> list[tuple[str, int]]:
    """Every broker's address, as Metadata names them."""
    return sorted((b.host, b.port) for b in conn.metadata().brokers.values())


def login(properties: dict[str, str]) -> NodeLogin | None:
    """The TLS context and SASL login librdkafka's properties describe (None: PLAINTEXT)."""
    protocol = properties.get("security.protocol", "plaintext").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        fail(f"security.protocol {protocol} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
             f"SASL_SSL")
    context = None
    if protocol.endswith("SSL"):
        context = ssl.create_default_context(cafile=properties.get("ssl.ca.location") or None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = bool(
            properties.get("ssl.endpoint.identification.algorithm", "https").strip())
        if properties.get("ssl.certificate.location"):
            context.load_cert_chain(properties["ssl.certificate.location"],
                                    properties.get("ssl.key.location") or None,
                                    properties.get("ssl.key.password") or None)
    if not protocol.startswith("SASL"):
        return None if context is None else NodeLogin(context)
    mechanism = properties.get("sasl.mechanism", properties.get("sasl.mechanisms", "")).upper()
    if mechanism not in ("PLAIN", *MECHANISMS):
        fail(f"sasl.mechanism {mechanism or '(unset)'}: these commands log in with PLAIN, "
             f"{', '.join(MECHANISMS)}")
    return NodeLogin(context, mechanism, properties.get("sasl.username", ""),
                     properties.get("sasl.password", ""))


async def _ask(conn: Connection, address: tuple[str, int], request: Any, version: int) -> Any:
    link = BrokerLink(*address, client_id="bmq-cli", security=login(conn.properties))
    try:
        return await asyncio.wait_for(link.request(request, version), conn.timeout)
    finally:
        link.close()


def call(conn: Connection, address: tuple[str, int], request: Any, version: int) -> Any:
    """Send one request to one broker and return its decoded response (exit 3 if none)."""
    try:
        return asyncio.run(_ask(conn, address, request, version))
    except (LinkError, OSError, TimeoutError) as exc:
        fail(f"broker {address[0]}:{address[1]} did not answer: {exc}", EXIT_UNREACHABLE)
