"""OAUTHBEARER's token checks on their own: RFC 7628's client message, signatures (RS256, ES256;
a key not in the JWKS, alg none, HS256 made with the public key), exp/iat/nbf with the clock
skew, audience and issuer, the principal claim, a key added to the JWKS after the start, and
settings that cannot serve."""

from __future__ import annotations

import functools
import hmac
import http.server
import json
import threading
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bmq.config import load_config
from bmq.security import jwks, oauthbearer
from tests.security.tokens import AUDIENCE, ISSUER, Issuer, client_message, unsigned_token


@pytest.fixture
def issuer(tmp_path: Path) -> Issuer:
    return Issuer.create(tmp_path)


def validator(issuer: Issuer | None, **settings: object) -> oauthbearer.TokenValidator:
    environ = {f"BMQ_{key.upper()}": str(value) for key, value in settings.items()}
    if issuer is not None:
        environ["BMQ_SASL_OAUTHBEARER_JWKS_ENDPOINT_URL"] = issuer.url
    return oauthbearer.validator(load_config(environ=environ))


def test_the_client_message_of_rfc_7628() -> None:
    assert oauthbearer.client_first(client_message("a.b.c")) == ("", "a.b.c")
    assert oauthbearer.client_first(client_message("a.b.c", authzid="bob")) == ("bob", "a.b.c")
    with_extension = b"n,,\x01auth=bearer  x.y.z\x01traceId=42\x01\x01"
    assert oauthbearer.client_first(with_extension) == ("", "x.y.z")


@pytest.mark.parametrize("message", [
    b"", b"\x01", b"p=tls,,\x01auth=Bearer t\x01\x01", b"n,,auth=Bearer t\x01\x01",
    b"n,,\x01auth=Bearer t\x01", b"n,,\x01auth=Basic dXNlcg==\x01\x01", b"n,,\x01\x01",
    b"n,,\x01x-y=1\x01auth=Bearer t\x01\x01", b"n,,\x01auth=Bearer a b\x01\x01", b"\xff\xfe"])
def test_malformed_client_messages_are_refused(message: bytes) -> None:
    with pytest.raises(oauthbearer.MalformedMessage):
        oauthbearer.client_first(message)


def test_rs256_and_es256_tokens_give_their_subject(issuer: Issuer) -> None:
    check = validator(issuer, sasl_oauthbearer_expected_audience=f"other,{AUDIENCE}",
                      sasl_oauthbearer_expected_issuer=ISSUER)
    valid = check.validate(issuer.token("alice", kid="rsa-1", lifetime_s=600))
    assert valid.principal_name == "alice"
    assert abs(valid.expires_ms - (time.time() + 600) * 1000) < 5000
    assert check.validate(issuer.token("bob", kid="ec-1")).principal_name == "bob"


def test_the_principal_comes_from_the_configured_claim(issuer: Issuer) -> None:
    check = validator(issuer, sasl_oauthbearer_sub_claim_name="email")
    token = issuer.token("svc-1234", email="carol@example.com")
    assert check.validate(token).principal_name == "carol@example.com"
    with pytest.raises(oauthbearer.TokenError, match="email"):
        check.validate(issuer.token("svc-1234"))


def _refusal(check: oauthbearer.TokenValidator, token: str) -> str:
    with pytest.raises(oauthbearer.TokenError) as refused:
        check.validate(token)
    return str(refused.value)


def test_bad_signatures_are_refused(issuer: Issuer) -> None:
    check = validator(issuer)
    stranger = rsa.generate_private_key(65537, 2048)
    assert "signature" in _refusal(check, issuer.token(key=stranger))
    # A token whose payload was changed after signing.
    token = issuer.token("alice")
    header, _, signature = token.split(".")
    forged = jwt.utils.base64url_encode(json.dumps(
        {**jwt.decode(token, options={"verify_signature": False}), "sub": "admin"}
    ).encode()).decode()
    assert "signature" in _refusal(check, f"{header}.{forged}.{signature}")
    # Unsigned, and HMAC with the public key as the secret (the algorithm-confusion attack).
    assert "'none'" in _refusal(check, unsigned_token())
    public_pem = issuer.keys["rsa-1"][1].public_key().public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    # Made by hand: PyJWT itself refuses to sign HS256 with a public key.
    signing_input = ".".join(jwt.utils.base64url_encode(json.dumps(part).encode()).decode()
                             for part in ({"alg": "HS256", "kid": "rsa-1"},
                                          {"sub": "admin", "iat": int(time.time()),
                                           "exp": int(time.time()) + 60}))
    mac = hmac.digest(public_pem, signing_input.encode(), "sha256")
    confused = f"{signing_input}.{jwt.utils.base64url_encode(mac).decode()}"
    assert "HS256" in _refusal(check, confused)
    assert "malformed" in _refusal(check, "not-a-jwt")


def test_time_claims_with_the_clock_skew(issuer: Issuer) -> None:
    check = validator(issuer, sasl_oauthbearer_clock_skew_seconds=30)
    assert "expired" in _refusal(check, issuer.token(lifetime_s=-120))
    check.validate(issuer.token(lifetime_s=-10))    # within the skew
    now = int(time.time())
    assert "nbf" in _refusal(check, issuer.token(nbf=now + 120))
    check.validate(issuer.token(nbf=now + 10))
    assert "iat" in _refusal(check, issuer.token(iat=now + 120))
    strict = validator(issuer, sasl_oauthbearer_clock_skew_seconds=0)
    assert "expired" in _refusal(strict, issuer.token(lifetime_s=-10))


def test_required_claims(issuer: Issuer) -> None:
    check = validator(issuer)
    alg, key = issuer.keys["rsa-1"]
    for missing in ("exp", "iat", "sub"):
        claims = {"sub": "alice", "iat": int(time.time()), "exp": int(time.time()) + 60}
        del claims[missing]
        token = jwt.encode(claims, key, algorithm=alg, headers={"kid": "rsa-1"})
        assert missing in _refusal(check, token)


def test_audience_and_issuer(issuer: Issuer) -> None:
    check = validator(issuer, sasl_oauthbearer_expected_audience="bmq-prod",
                      sasl_oauthbearer_expected_issuer=ISSUER)
    assert "audience" in _refusal(check, issuer.token()).lower()
    check.validate(issuer.token(aud=["web", "bmq-prod"]))
    assert "aud" in _refusal(check, issuer.token(aud=None))
    assert "issuer" in _refusal(check, issuer.token(aud="bmq-prod", iss="https://evil.test"))
    # Not configured: not checked (a token with any audience is fine).
    validator(issuer).validate(issuer.token(aud="anything", iss="anyone"))


def test_a_key_added_after_the_start_is_found_by_its_id(issuer: Issuer) -> None:
    check = validator(issuer)
    issuer.add_key("rsa-2", "RS256", rsa.generate_private_key(65537, 2048))
    assert check.validate(issuer.token("dave", kid="rsa-2")).principal_name == "dave"
    # A key id the set does not have (the set was read again for it): refused.
    stranger = rsa.generate_private_key(65537, 2048)
    token = jwt.encode({"sub": "eve", "iat": int(time.time()), "exp": int(time.time()) + 60},
                       stranger, algorithm="RS256", headers={"kid": "rsa-9"})
    assert "no RSA key with id 'rsa-9'" in _refusal(check, token)


def test_the_unsecured_validator_takes_only_unsigned_tokens(issuer: Issuer) -> None:
    check = validator(None, sasl_oauthbearer_unsecured_validator_enable="true")
    assert check.keys is None
    assert check.validate(unsigned_token("erin")).principal_name == "erin"
    assert "expired" in _refusal(check, unsigned_token(lifetime_s=-300))
    assert "unsigned" in _refusal(check, issuer.token())


@pytest.mark.parametrize(("settings", "message"), [
    ({}, "needs sasl.oauthbearer.jwks.endpoint.url"),
    ({"sasl_oauthbearer_unsecured_validator_enable": "true",
      "sasl_oauthbearer_jwks_endpoint_url": "file:///x.json"}, "both set"),
    ({"sasl_oauthbearer_jwks_endpoint_url": "file:///nonexistent/jwks.json"}, "cannot read"),
    ({"sasl_oauthbearer_jwks_endpoint_url": "ftp://host/jwks.json"}, "only file://"),
])
def test_settings_that_cannot_serve(settings: dict[str, str], message: str) -> None:
    with pytest.raises(oauthbearer.OAuthBearerConfigError, match=message):
        validator(None, **settings)


def test_a_jwks_without_signing_keys_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}]}))
    with pytest.raises(jwks.JwksError, match="no RSA, EC or OKP signing key"):
        jwks.KeySet(path.as_uri(), 1000)


def test_the_key_set_from_a_local_http_endpoint(issuer: Issuer) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(issuer.jwks_path.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{issuer.jwks_path.name}"
        check = oauthbearer.validator(load_config(environ={
            "BMQ_SASL_OAUTHBEARER_JWKS_ENDPOINT_URL": url}))
        assert check.validate(issuer.token("frank")).principal_name == "frank"
        with pytest.raises(jwks.JwksError, match="404"):
            jwks.KeySet(url + ".missing", 1000)
    finally:
        server.shutdown()
        server.server_close()
