"""Client quotas as cluster metadata (Kafka's model): an entity is a user, a client id or both,
each either named or the ``<default>`` (a null name on the wire); each entity has values for
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` (and
``controller_mutation_rate``, kept but not enforced). `bmq serve` keeps them in the data
directory's ``meta/quotas.json``, written atomically, beside the SCRAM credentials and ACLs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from bmq.storage import Storage

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
              "controller_mutation_rate")

# An entity: (user, client id), each a name, None for ``<default>``, or ABSENT.
ABSENT = ""
Entity = tuple[str | None, str | None]


def entity_of(components: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from (type, name) pairs (name None: the default); ValueError if malformed."""
    found: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type not in ENTITY_TYPES:
            raise ValueError(f"unknown entity type {entity_type!r} (user, client-id)")
        if entity_type in found:
            raise ValueError(f"entity type {entity_type} given twice")
        if name == ABSENT:
            raise ValueError(f"an empty {entity_type} name")
        found[entity_type] = name
    if not found:
        raise ValueError("an entity needs a user or a client-id")
    return (found.get(USER, ABSENT), found.get(CLIENT_ID, ABSENT))


def components(entity: Entity) -> list[tuple[str, str | None]]:
    return [(t, n) for t, n in zip(ENTITY_TYPES, entity, strict=True) if n != ABSENT]


class QuotaStore:
    """Every entity's quota values, in memory, saved on every change."""

    PATH = "quotas.json"

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.quotas: dict[Entity, dict[str, float]] = {}

    def load(self) -> QuotaStore:
        self.quotas = {}
        if self._storage.exists(self.PATH):
            for item in json.loads(self._storage.read_all(self.PATH)).get("quotas", []):
                user, client = item["entity"]
                self.quotas[(user, client)] = {k: float(v) for k, v in item["values"].items()}
        return self

    def save(self, quotas: dict[Entity, dict[str, float]]) -> None:
        doc = {"quotas": [{"entity": list(entity), "values": values}
                          for entity, values in quotas.items() if values]}
        self._storage.write_atomic(self.PATH, json.dumps(doc, indent=1).encode())
        self.quotas = {e: dict(v) for e, v in quotas.items() if v}
