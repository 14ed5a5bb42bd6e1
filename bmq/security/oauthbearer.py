"""SASL OAUTHBEARER (RFC 7628) as Kafka serves it: the client's one message carries a JWT, which
is checked against the issuer's published keys (``jwks.py``); the principal is ``User:`` plus
the claim ``sasl.oauthbearer.sub.claim.name`` (``sub``).

A token is accepted when its signature verifies (RS*, PS*, ES* or EdDSA; never "none" or HMAC),
it has ``exp``, ``iat`` and the principal claim, ``exp`` is not past and ``iat``/``nbf`` are not
ahead, all give or take ``sasl.oauthbearer.clock.skew.seconds``, and, when configured, one of
its audiences is in ``sasl.oauthbearer.expected.audience`` and its issuer is
``sasl.oauthbearer.expected.issuer`` (Kafka's default validator, with PyJWT doing the JOSE work).

For tests only, ``sasl_oauthbearer_unsecured_validator_enable`` swaps in Kafka's unsecured
validator: unsigned tokens (``alg`` "none", as librdkafka makes from ``sasl.oauthbearer.config``)
with the same claim checks and no signature at all, so anyone can claim any identity. It is off
by default and cannot be combined with a JWKS URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jwt

from bmq.config import Config
from bmq.security.jwks import KEY_TYPES, JwksError, KeySet

# What Kafka answers a refused token with (RFC 7628 section 3.2.2's error "server challenge"):
# the client replies with a lone kvsep (0x01), then the exchange fails.
ERROR_CHALLENGE = b'{"status":"invalid_token"}'
KVSEP = "\x01"
# The latest expiry a token's session gets (some 146 million years ahead).
MAX_EXPIRES_MS = 2**62
_KEY = re.compile(r"[A-Za-z]+")
# RFC 6750's b64token.
_BEARER = re.compile(r"(?i:bearer) +([A-Za-z0-9\-._~+/]+=*)")


class OAuthBearerConfigError(ValueError):
    """OAUTHBEARER is enabled but its settings cannot serve."""


class MalformedMessage(ValueError):
    """The client message is not RFC 7628's initial client response."""


class TokenError(ValueError):
    """The token is refused (bad signature, expired, wrong audience...): the client gets the
    error challenge."""


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal_name: str
    expires_ms: int      # the token's exp, in milliseconds since the epoch


def client_first(message: bytes) -> tuple[str, str]:
    """RFC 7628's ``gs2-header kvsep *kvpair kvsep``: (authorization id or "", token)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessage("not UTF-8") from None
    flag, comma, rest = text.partition(",")
    authzid, comma2, pairs = rest.partition(",")
    if flag not in ("n", "y") or not comma or not comma2:  # "p" (channel binding) Kafka refuses
        raise MalformedMessage("unsupported or malformed GS2 header")
    if authzid and not authzid.startswith("a="):
        raise MalformedMessage("malformed authorization id")
    authzid = authzid[2:].replace("=2C", ",").replace("=3D", "=")
    if not pairs.startswith(KVSEP) or not pairs.endswith(KVSEP * 2) or len(pairs) < 3:
        raise MalformedMessage("key-value pairs are not framed by 0x01")
    values: dict[str, str] = {}
    for pair in pairs[1:-2].split(KVSEP):
        key, equals, value = pair.partition("=")
        if not equals or not _KEY.fullmatch(key):
            raise MalformedMessage(f"malformed key-value pair {key!r}")
        values.setdefault(key, value)
    bearer = _BEARER.fullmatch(values.get("auth", ""))
    if bearer is None:
        raise MalformedMessage("no auth=Bearer <token>")
    return authzid, bearer.group(1)


@dataclass(frozen=True, slots=True)
class TokenValidator:
    keys: KeySet | None              # None: the unsecured validator (tests only)
    audience: tuple[str, ...]
    issuer: str
    principal_claim: str
    clock_skew_s: int

    def validate(self, token: str) -> ValidToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            raise TokenError(f"malformed token: {error}") from None
        alg = header.get("alg")
        try:
            if self.keys is None:
                if alg != "none":
                    raise TokenError(f"the unsecured validator takes only unsigned tokens "
                                     f"(alg none), not {alg!r}")
                claims = self._decode(token, None, alg)
            else:
                claims = self._verified(token, header, alg)
        except jwt.PyJWTError as error:
            raise TokenError(str(error) or type(error).__name__) from None
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise TokenError(f"claim {self.principal_claim!r} is not a non-empty string")
        exp = claims["exp"]   # PyJWT has checked that it is a number, in the future
        # However far: an int of any size, or inf. Capped without float() (which overflows on a
        # huge int), so the session's lifetime fits SaslAuthenticate's int64; either overflow
        # failed the request with a traceback (tests/security/test_fuzz_handshakes.py).
        return ValidToken(principal, int(min(exp * 1000, MAX_EXPIRES_MS)))

    def _verified(self, token: str, header: dict[str, Any], alg: object) -> dict[str, Any]:
        if not isinstance(alg, str) or alg not in KEY_TYPES:
            raise TokenError(f"signing algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        assert self.keys is not None
        candidates = self.keys.candidates(kid if isinstance(kid, str) else None, alg)
        if not candidates:
            raise TokenError(f"no {KEY_TYPES[alg]} key with id {kid!r} in {self.keys.url}")
        for candidate in candidates:
            try:
                return self._decode(token, candidate.key, alg)
            except jwt.InvalidSignatureError:
                continue   # without a key id, any key of the type may be the one
        raise TokenError("signature verification failed")

    def _decode(self, token: str, key: object, alg: str) -> dict[str, Any]:
        signed = key is not None
        claims: dict[str, Any] = jwt.decode(
            token, key if signed else None, algorithms=[alg] if signed else None,  # type: ignore[arg-type]
            audience=list(self.audience) or None, issuer=self.issuer or None,
            leeway=self.clock_skew_s,
            options={"verify_signature": signed, "verify_exp": True, "verify_nbf": True,
                     "verify_iat": True, "verify_aud": bool(self.audience),
                     "verify_iss": bool(self.issuer), "verify_sub": True, "verify_jti": True,
                     # Kafka's validator requires exp and iat (jose4j's setRequire...).
                     "require": ["exp", "iat", self.principal_claim]})
        return claims


def validator(config: Config) -> TokenValidator:
    """The validator the settings ask for; ``OAuthBearerConfigError`` if they ask for none."""
    url = config.sasl_oauthbearer_jwks_endpoint_url.strip()
    unsecured = config.sasl_oauthbearer_unsecured_validator_enable
    if url and unsecured:
        raise OAuthBearerConfigError(
            "sasl.oauthbearer.jwks.endpoint.url and sasl_oauthbearer_unsecured_validator_enable "
            "are both set: choose signed tokens (the URL) or, for tests only, unsigned ones")
    if not url and not unsecured:
        raise OAuthBearerConfigError(
            "OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (the issuer's keys; "
            "sasl_oauthbearer_unsecured_validator_enable accepts unsigned tokens, for tests only)")
    try:
        keys = KeySet(url, config.sasl_oauthbearer_jwks_endpoint_refresh_ms) if url else None
    except JwksError as error:
        raise OAuthBearerConfigError(f"sasl.oauthbearer.jwks.endpoint.url: {error}") from None
    audience = tuple(part.strip() for part in config.sasl_oauthbearer_expected_audience.split(",")
                     if part.strip())
    return TokenValidator(keys, audience, config.sasl_oauthbearer_expected_issuer.strip(),
                          config.sasl_oauthbearer_sub_claim_name.strip() or "sub",
                          config.sasl_oauthbearer_clock_skew_seconds)
