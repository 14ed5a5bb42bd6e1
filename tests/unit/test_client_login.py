"""bmq.client.login: the links' TLS and SASL from librdkafka-style properties."""

from __future__ import annotations

import ssl

import pytest

from bmq.client.login import PropertyError, login


def test_plaintext_needs_no_login() -> None:
    assert login({}) is None
    assert login({"security.protocol": "plaintext"}) is None


def test_ssl_and_sasl_properties() -> None:
    tls = login({"security.protocol": "SSL",
                 "ssl.endpoint.identification.algorithm": ""})
    assert tls is not None and isinstance(tls.ssl, ssl.SSLContext) and not tls.mechanism
    assert tls.ssl.minimum_version == ssl.TLSVersion.TLSv1_2 and not tls.ssl.check_hostname
    scram = login({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "scram-sha-512",
                   "sasl.username": "alice", "sasl.password": "secret"})
    assert scram is not None and scram.ssl is None and scram.mechanism == "SCRAM-SHA-512"


def test_what_the_links_do_not_speak_is_refused() -> None:
    with pytest.raises(PropertyError, match=r"security\.protocol KERBEROS is not one of"):
        login({"security.protocol": "kerberos"})
    with pytest.raises(PropertyError, match=r"sasl.mechanism OAUTHBEARER: .* PLAIN"):
        login({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(PropertyError, match=r"sasl.mechanism \(unset\)"):
        login({"security.protocol": "SASL_PLAINTEXT"})
