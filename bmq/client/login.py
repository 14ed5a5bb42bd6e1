"""The TLS context and SASL login a client's librdkafka properties describe
(``security.protocol=SASL_SSL``, ``sasl.mechanism=SCRAM-SHA-512``, ``sasl.username=...``,
``sasl.password=...``, ``ssl.ca.location=...``): TLS, and SASL PLAIN or SCRAM."""

from __future__ import annotations

import ssl

from bmq.security.link import NodeLogin
from bmq.security.scram import MECHANISMS


class PropertyError(ValueError):
    """The properties ask for a protocol or mechanism these links do not speak."""


def login(properties: dict[str, str]) -> NodeLogin | None:
    """The TLS context and SASL login the properties describe (None: PLAINTEXT)."""
    protocol = properties.get("security.protocol", "plaintext").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise PropertyError(f"security.protocol {protocol} is not one of PLAINTEXT, SSL, "
                            f"SASL_PLAINTEXT, SASL_SSL")
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
        raise PropertyError(f"sasl.mechanism {mechanism or '(unset)'}: these commands log in "
                            f"with PLAIN, {', '.join(MECHANISMS)}")
    return NodeLogin(context, mechanism, properties.get("sasl.username", ""),
                     properties.get("sasl.password", ""))
