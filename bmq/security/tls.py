"""TLS for SSL and SASL_SSL listeners with Python's ``ssl``, configured with Kafka's settings.

The keystore is PEM: ``ssl.keystore.location`` (one file, private key and certificate chain), or
``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` inline. Client certificates are
checked against ``ssl.truststore.location`` (or ``ssl.truststore.certificates`` inline) as
``ssl.client.auth`` says; TLS 1.2 is the least version served. A verified client certificate
names the principal by its subject (Kafka's default principal builder: the distinguished name
in RFC 2253 form, the most specific name first, e.g. ``CN=alice,OU=ops,O=example``, mapped by
``ssl.principal.mapping.rules``; by default ``User:CN=alice,OU=ops,O=example``).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

from bmq.config import Config

# OpenSSL's long attribute names -> the short keywords of RFC 2253 (as Java's X500Principal).
_DN_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
                "stateOrProvinceName": "ST", "organizationName": "O",
                "organizationalUnitName": "OU", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A listener's TLS settings cannot make a server context."""


def server_context(config: Config, listener: str, sasl: bool = False) -> ssl.SSLContext:
    """The TLS server context of ``listener`` (its listener.name.NAME. overrides applied);
    ``sasl``: the listener is SASL_SSL."""
    def setting(name: str) -> str:
        return config.listener_setting(listener, name)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_keystore(context, setting, listener):
        raise TlsConfigError(f"listener {listener}: TLS needs ssl.keystore.location, or "
                             f"ssl.keystore.key with ssl.keystore.certificate.chain")
    _load_truststore(context, setting, listener)
    # As Kafka: on a SASL_SSL listener SASL says who the client is, and only the listener's own
    # listener.name.NAME.ssl.client.auth asks for a certificate, never the broker-wide one.
    client_auth = config.listener_overrides.get(listener.upper(), {}).get(
        "ssl_client_auth", "none") if sasl else setting("ssl_client_auth")
    context.verify_mode = _CLIENT_AUTH[client_auth.lower()]
    if context.verify_mode != ssl.CERT_NONE and not context.get_ca_certs():
        raise TlsConfigError(f"listener {listener}: ssl.client.auth={client_auth} needs "
                             f"ssl.truststore.location")
    return context


def client_context(config: Config, listener: str) -> ssl.SSLContext:
    """The TLS context this node connects to other nodes' ``listener`` with (the inter-broker
    listener): their certificates checked against the listener's truststore, the host name
    too unless ``ssl.endpoint.identification.algorithm`` is empty (Kafka's switch); the
    node's own keystore, if it has one, answers a request for a client certificate."""
    def setting(name: str) -> str:
        return config.listener_setting(listener, name)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = bool(setting("ssl_endpoint_identification_algorithm").strip())
    if not _load_truststore(context, setting, listener):
        context.load_default_certs()
    _load_keystore(context, setting, listener)
    return context


def _load_keystore(context: ssl.SSLContext, setting: Callable[[str], str],
                   listener: str) -> bool:
    """The listener's key and certificate chain into ``context``; False when it has none."""
    password = setting("ssl_key_password") or None
    location = setting("ssl_keystore_location")
    if location:
        _loading(listener, "ssl.keystore.location", location,
                 lambda: context.load_cert_chain(location, password=password))
        return True
    if setting("ssl_keystore_key") and setting("ssl_keystore_certificate_chain"):
        _loading(listener, "ssl.keystore.key", "(inline) with ssl.keystore.certificate.chain",
                 lambda: _load_inline_chain(context, setting("ssl_keystore_key"),
                                            setting("ssl_keystore_certificate_chain"), password))
        return True
    return False


def _load_truststore(context: ssl.SSLContext, setting: Callable[[str], str],
                     listener: str) -> bool:
    """The listener's trusted CA certificates into ``context``; False when it has none."""
    location = setting("ssl_truststore_location")
    if location:
        _loading(listener, "ssl.truststore.location", location,
                 lambda: context.load_verify_locations(cafile=location))
        return True
    certificates = setting("ssl_truststore_certificates")
    if certificates:
        _loading(listener, "ssl.truststore.certificates", "(inline)",
                 lambda: context.load_verify_locations(cadata=certificates))
        return True
    return False


def _loading(listener: str, name: str, what: str, load: Callable[[], None]) -> None:
    """``load()``, its failure a ``TlsConfigError`` naming the setting and its file: Python's
    errors name neither (``[Errno 2] No such file or directory``, ``PEM lib``)."""
    try:
        load()
    except ssl.SSLError as error:
        reason = f"not a usable PEM file ({error.reason or error})"
    except OSError as error:
        reason = error.strerror or str(error)
    else:
        return
    raise TlsConfigError(f"listener {listener}: cannot load {name} {what}: {reason}")


def _load_inline_chain(context: ssl.SSLContext, key: str, chain: str,
                       password: str | None) -> None:
    """``ssl`` loads keys from files only: through a private temporary file, removed at once."""
    with tempfile.TemporaryDirectory(prefix="bmq-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(f"{key.strip()}\n{chain.strip()}\n")
        context.load_cert_chain(path, password=password)


def certificate_subject(ssl_object: Any) -> str | None:
    """The subject's distinguished name (RFC 2253) of a verified client certificate, None
    without one."""
    if ssl_object is None:
        return None
    certificate = ssl_object.getpeercert()
    if not certificate:
        return None
    parts = []
    for rdn in reversed(certificate.get("subject", ())):
        parts.append("+".join(f"{_DN_KEYWORDS.get(name, name)}={_escape(value)}"
                              for name, value in rdn))
    return ",".join(parts)


def _escape(value: str) -> str:
    escaped = "".join(f"\\{c}" if c in ',+"\\<>;' else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped
