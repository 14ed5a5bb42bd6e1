"""SCRAM credentials: what SCRAM-SHA-256/512 (and PLAIN) check passwords against.

Only salted credentials are kept, as Kafka keeps them (RFC 5802): per user and mechanism the salt,
the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"); never the password, nor SaltedPassword. They live in one JSON
document, ``scram_credentials.json``, with the cluster's metadata (bmq/metadata/documents.py:
`bmq serve`'s ``meta/`` directory, or ZooKeeper in cluster mode); every node holds them in memory.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from bmq.metadata.documents import DocumentStore


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


Users = dict[str, dict[str, ScramCredential]]


class CredentialStore(DocumentStore[Users]):
    """User -> mechanism -> credential, held in memory; a change is saved before it is seen."""

    PATH = "scram_credentials.json"

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.value.get(user, {}).get(mechanism)

    def of_user(self, user: str) -> list[ScramCredential]:
        return list(self.value.get(user, {}).values())

    def users(self) -> list[str]:
        return sorted(self.value)

    def alter(self, deletions: list[tuple[str, str]], upsertions: list[tuple[str, ScramCredential]]
              ) -> list[tuple[str, str]]:
        """Delete (user, mechanism) pairs and add or replace credentials, in one change (blocking:
        a worker thread's); the deletions that found a credential."""
        deleted: list[tuple[str, str]] = []

        def change(users: Users) -> Users:
            deleted.clear()
            for user, mechanism in deletions:
                mechanisms = users.get(user, {})
                if mechanisms.pop(mechanism, None) is not None:
                    deleted.append((user, mechanism))
                if not mechanisms:
                    users.pop(user, None)
            for user, credential in upsertions:
                users.setdefault(user, {})[credential.mechanism] = credential
            return users

        self._change(change)
        return deleted

    def _parse(self, data: bytes | None) -> Users:
        if data is None:
            return {}
        return {user: {mechanism: ScramCredential.from_json(mechanism, cred)
                       for mechanism, cred in mechanisms.items()}
                for user, mechanisms in json.loads(data).get("users", {}).items()}

    def _serialize(self, value: Users) -> bytes:
        doc = {"users": {user: {mechanism: cred.to_json() for mechanism, cred in creds.items()}
                         for user, creds in sorted(value.items())}}
        return json.dumps(doc, sort_keys=True).encode()
