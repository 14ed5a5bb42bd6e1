"""An OAuth issuer for tests: RSA and EC signing keys made here, the JWKS file a broker reads
them from (``sasl.oauthbearer.jwks.endpoint.url = file://...``) and JWTs signed with them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER, AUDIENCE = "https://issuer.test", "bmq"


@dataclass
class Issuer:
    """Signing keys by key id (``rsa-1`` RS256, ``ec-1`` ES256) and the JWKS of their public
    halves."""

    jwks_path: Path
    keys: dict[str, tuple[str, Any]] = field(default_factory=dict)   # kid -> (alg, private key)

    @classmethod
    def create(cls, directory: Path) -> Issuer:
        issuer = cls(directory / "jwks.json")
        issuer.add_key("rsa-1", "RS256", rsa.generate_private_key(65537, 2048))
        issuer.add_key("ec-1", "ES256", ec.generate_private_key(ec.SECP256R1()))
        return issuer

    @property
    def url(self) -> str:
        return self.jwks_path.as_uri()

    def add_key(self, kid: str, alg: str, key: Any) -> None:
        self.keys[kid] = (alg, key)
        self.write_jwks()

    def write_jwks(self) -> None:
        entries = []
        for kid, (alg, key) in self.keys.items():
            algorithm = RSAAlgorithm if alg.startswith("RS") else ECAlgorithm
            entry = json.loads(algorithm.to_jwk(key.public_key()))
            entries.append({**entry, "kid": kid, "alg": alg, "use": "sig"})
        self.jwks_path.write_text(json.dumps({"keys": entries}))

    def token(self, sub: str = "alice", kid: str = "rsa-1", lifetime_s: float = 3600,
              key: Any = None, **claims: Any) -> str:
        """A token for ``sub`` signed with key ``kid`` (or with ``key``, under that kid)."""
        alg, own_key = self.keys[kid]
        now = time.time()
        payload = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now),
                   "exp": int(now + lifetime_s), **claims}
        return jwt.encode(payload, key or own_key, algorithm=alg, headers={"kid": kid})


def unsigned_token(sub: str = "alice", lifetime_s: float = 3600) -> str:
    """What librdkafka's unsecured token maker sends: header {"alg":"none"}, empty signature."""
    now = time.time()
    return jwt.encode({"sub": sub, "iat": int(now), "exp": int(now + lifetime_s)}, None,
                      algorithm="none")


def client_message(token: str, authzid: str = "") -> bytes:
    """RFC 7628's initial client response, as librdkafka and Kafka's client send it."""
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()
