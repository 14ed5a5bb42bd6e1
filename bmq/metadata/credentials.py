"""SCRAM credentials of `bmq serve`: what SCRAM-SHA-256/512 (and PLAIN) check passwords against.

Only salted credentials are kept, as Kafka keeps them (RFC 5802): per user and mechanism the salt,
the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"); never the password, nor SaltedPassword. They live in one JSON
document, ``scram_credentials.json``, in the data directory's ``meta/`` storage beside the topics,
written atomically; the broker holds them in memory and is their one writer while it runs
(`bmq user add` takes the data directory's lock, so it works only with no broker running).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from bmq.storage import Storage


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str           # "SCRAM-SHA-256" or "SCRAM-SHA-512"
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_json(self) -> dict[str, object]:
        encode = base64.b64encode
        return {"salt": encode(self.salt).decode(), "iterations": self.iterations,
                "stored_key": encode(self.stored_key).decode(),
                "server_key": encode(self.server_key).decode()}

    @classmethod
    def from_json(cls, mechanism: str, doc: dict[str, object]) -> ScramCredential:
        decode = base64.b64decode
        return cls(mechanism, decode(str(doc["salt"])), int(str(doc["iterations"])),
                   decode(str(doc["stored_key"])), decode(str(doc["server_key"])))


class CredentialStore:
    """User -> mechanism -> credential, cached in memory, saved on every change."""

    PATH = "scram_credentials.json"

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> CredentialStore:
        self._users = {}
        if self._storage.exists(self.PATH):
            doc = json.loads(self._storage.read_all(self.PATH))
            for user, mechanisms in doc.get("users", {}).items():
                self._users[user] = {mechanism: ScramCredential.from_json(mechanism, cred)
                                     for mechanism, cred in mechanisms.items()}
        return self

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def of_user(self, user: str) -> list[ScramCredential]:
        return list(self._users.get(user, {}).values())

    def users(self) -> list[str]:
        return sorted(self._users)

    def upsert(self, user: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[credential.mechanism] = credential
        self._save()

    def delete(self, user: str, mechanism: str) -> bool:
        """Whether there was such a credential."""
        mechanisms = self._users.get(user, {})
        if mechanisms.pop(mechanism, None) is None:
            return False
        if not mechanisms:
            del self._users[user]
        self._save()
        return True

    def _save(self) -> None:
        doc = {"users": {user: {mechanism: cred.to_json() for mechanism, cred in creds.items()}
                         for user, creds in sorted(self._users.items())}}
        self._storage.write_atomic(self.PATH, json.dumps(doc, sort_keys=True).encode())
