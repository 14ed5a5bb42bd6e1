"""The public keys that sign OAUTHBEARER tokens: a JSON Web Key Set (RFC 7517) read from
``sasl.oauthbearer.jwks.endpoint.url``, a ``file://`` URL or an ``http(s)://`` one.

The set is read when the broker starts (a set that cannot be read stops the start, rather than
refusing every client later) and again when it is older than
``sasl.oauthbearer.jwks.endpoint.refresh.ms``, or when a token names a key id the set does not
have: an issuer that rotates its keys publishes the new one before signing with it. Such reads
are at most one per ``UNKNOWN_KID_BACKOFF_S``, so tokens with made-up key ids cannot make the
broker fetch the set on every login. Symmetric keys (``kty`` "oct") and encryption keys
(``use`` "enc") are left out: a key anyone can fetch must never verify an HMAC.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from jwt import PyJWK
from jwt.exceptions import PyJWKError

# Each signing algorithm a token may name, and the key type (kty) that verifies it. HS* are
# missing on purpose (a public key would serve as the HMAC secret), and so is "none".
KEY_TYPES = {**{f"RS{bits}": "RSA" for bits in (256, 384, 512)},
             **{f"PS{bits}": "RSA" for bits in (256, 384, 512)},
             **{f"ES{bits}": "EC" for bits in (256, 384, 512)},
             "EdDSA": "OKP"}
log = logging.getLogger(__name__)

UNKNOWN_KID_BACKOFF_S = 10.0
MAX_JWKS_BYTES = 1 << 20
FETCH_TIMEOUT_S = 10.0


class JwksError(ValueError):
    """The key set cannot be read or holds no key that can verify a signature."""


@dataclass(frozen=True, slots=True)
class VerificationKey:
    kid: str | None
    kty: str
    alg: str | None      # the JWK's own "alg", when it names one
    key: Any             # the cryptography public key


def read_url(url: str) -> bytes:
    """The bytes at a ``file://`` or ``http(s)://`` URL (at most ``MAX_JWKS_BYTES``)."""
    parsed = urllib.parse.urlparse(url)
    try:
        if parsed.scheme == "file":
            with open(urllib.parse.unquote(parsed.path), "rb") as file:
                data = file.read(MAX_JWKS_BYTES + 1)
        elif parsed.scheme in ("http", "https"):
            with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:
                data = response.read(MAX_JWKS_BYTES + 1)
        else:
            raise JwksError(f"{url!r}: only file://, http:// and https:// URLs are read")
    except OSError as error:
        raise JwksError(f"cannot read {url}: {error}") from None
    if len(data) > MAX_JWKS_BYTES:
        raise JwksError(f"{url}: larger than {MAX_JWKS_BYTES} bytes")
    return data


def parse_jwks(data: bytes, origin: str = "JWKS") -> list[VerificationKey]:
    try:
        document = json.loads(data)
    except ValueError as error:
        raise JwksError(f"{origin}: not JSON: {error}") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise JwksError(f"{origin}: no \"keys\" array")
    keys: list[VerificationKey] = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        alg = entry.get("alg")
        if alg is not None and alg not in KEY_TYPES:
            continue
        try:
            jwk = PyJWK(entry)
        except PyJWKError:   # a curve or parameters PyJWT cannot use: not a key for us
            continue
        kid = entry.get("kid")
        keys.append(VerificationKey(kid if isinstance(kid, str) else None, entry["kty"], alg,
                                    jwk.key))
    if not keys:
        raise JwksError(f"{origin}: no RSA, EC or OKP signing key")
    return keys


class KeySet:
    """The keys of one JWKS URL, refreshed as the module docstring says. Thread-safe: logins are
    checked on the executor's threads."""

    def __init__(self, url: str, refresh_ms: int) -> None:
        self.url = url
        self._refresh_s = refresh_ms / 1000
        self._lock = threading.Lock()
        self._keys = parse_jwks(read_url(url), url)   # JwksError stops the start
        self._read_at = time.monotonic()
        self._unknown_kid_read_at = 0.0

    def candidates(self, kid: str | None, alg: str) -> list[VerificationKey]:
        """The keys that may have signed a token with this header: the one with its key id (any
        of the right type, if the token names none)."""
        now = time.monotonic()
        if now - self._read_at > self._refresh_s:
            self._reread(now)
        found = _matching(self._keys, kid, alg)
        if not found and kid is not None and now - self._unknown_kid_read_at > \
                UNKNOWN_KID_BACKOFF_S:
            self._unknown_kid_read_at = now
            self._reread(now)
            found = _matching(self._keys, kid, alg)
        return found

    def _reread(self, now: float) -> None:
        with self._lock:
            self._read_at = now   # a failed read is not retried on every login either
            try:
                self._keys = parse_jwks(read_url(self.url), self.url)
            except JwksError as error:
                log.warning("keeping the OAUTHBEARER keys read before: %s", error)
                # Keep the keys we have: an endpoint down for a while must not lock every
                # client out; tokens signed by keys it removed stay valid until their exp.
                return


def _matching(keys: list[VerificationKey], kid: str | None, alg: str) -> list[VerificationKey]:
    kty = KEY_TYPES[alg]
    return [key for key in keys
            if key.kty == kty and (key.alg is None or key.alg == alg)
            and (kid is None or key.kid == kid)]
