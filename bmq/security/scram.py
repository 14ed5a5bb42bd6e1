"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) with the standard library only.

The server side of one exchange (``ScramExchange``) and how credentials are made from a password
or from the SaltedPassword AlterUserScramCredentials carries. Kafka's rules: 4096 to 16384
iterations; user names in SCRAM messages escape "," and "=" as "=2C" and "=3D".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from bmq.metadata.credentials import ScramCredential

# Kafka's ScramMechanism type ids (DescribeUserScramCredentials, AlterUserScramCredentials).
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_TYPE = {type_id: name for name, (_, type_id) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192


class ScramError(ValueError):
    """The exchange failed: bad message, unknown user or wrong proof."""


def _hash(mechanism: str) -> str:
    return MECHANISMS[mechanism][0]


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password, salt, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes,
                           iterations: int) -> ScramCredential:
    digest = _hash(mechanism)
    client_key = hmac.digest(salted, b"Client Key", digest)
    return ScramCredential(mechanism, salt, iterations, hashlib.new(digest, client_key).digest(),
                           hmac.digest(salted, b"Server Key", digest))


def make_credential(mechanism: str, password: str,
                    iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    salt = os.urandom(32)
    return credential_from_salted(
        mechanism, salt, salted_password(mechanism, password.encode(), salt, iterations),
        iterations)


def password_matches(credential: ScramCredential, password: bytes) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (what PLAIN checks)."""
    salted = salted_password(credential.mechanism, password, credential.salt,
                             credential.iterations)
    made = credential_from_salted(credential.mechanism, credential.salt, salted,
                                  credential.iterations)
    return hmac.compare_digest(made.stored_key, credential.stored_key)


def _attributes(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        found.setdefault(key, value)
    return found


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(slots=True)
class ScramExchange:
    """The server side of one SCRAM exchange: two client messages, two answers."""

    mechanism: str
    user: str = ""
    _credential: ScramCredential | None = None
    _client_first_bare: str = ""
    _server_first: str = ""
    _nonce: str = ""
    _gs2_header: str = ""

    def client_first(self, message: bytes) -> str:
        """Parse client-first-message; returns the user name to look up."""
        text = message.decode("utf-8", errors="strict")
        gs2_flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if gs2_flag not in ("n", "y") or not bare:   # "p=" (channel binding) Kafka refuses too
            raise ScramError("unsupported or malformed GS2 header")
        self._gs2_header = f"{gs2_flag},{authzid},"
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or "m" in attributes:
            raise ScramError("client-first-message needs n= and r=")
        self.user = attributes["n"].replace("=2C", ",").replace("=3D", "=")
        if authzid and authzid.removeprefix("a=") != self.user:
            raise ScramError("authorization id differs from the user name")
        self._client_first_bare = bare
        self._nonce = attributes["r"]
        return self.user

    def server_first(self, credential: ScramCredential, server_nonce: str = "") -> bytes:
        """``server_nonce``: random unless given (RFC 7677's worked example gives it)."""
        self._credential = credential
        self._nonce += server_nonce or _b64(os.urandom(24))
        self._server_first = (f"r={self._nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def client_final(self, message: bytes) -> bytes:
        """Check client-final-message's proof; the server-final-message, or ``ScramError``."""
        credential = self._credential
        if credential is None:
            raise ScramError("client-final-message before client-first-message")
        text = message.decode("utf-8", errors="strict")
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final-message has no proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce:
            raise ScramError("nonce mismatch")
        if attributes.get("c") != _b64(self._gs2_header.encode()):
            raise ScramError("channel binding mismatch")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError as error:
            raise ScramError("proof is not base64") from error
        digest = _hash(credential.mechanism)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, digest)
        if len(proof) != len(signature):
            raise ScramError("invalid proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(),
                                   credential.stored_key):
            raise ScramError("invalid proof")
        server_signature = hmac.digest(credential.server_key, auth_message, digest)
        return f"v={_b64(server_signature)}".encode()
