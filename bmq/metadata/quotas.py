"""Client quotas as cluster metadata (Kafka's model): an entity is a user, a client id or both,
each either named or the ``<default>`` (a null name on the wire); each entity has values for
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` (and
``controller_mutation_rate``, kept but not enforced). They are kept in ``quotas.json`` with the
cluster's metadata (bmq/metadata/documents.py), beside the SCRAM credentials and ACLs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from bmq.metadata.documents import DocumentStore

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


Quotas = dict[Entity, dict[str, float]]


class QuotaStore(DocumentStore[Quotas]):
    """Every entity's quota values, held in memory; a change is saved before it is seen."""

    PATH = "quotas.json"

    @property
    def quotas(self) -> Quotas:
        return self.value

    def change(self, change: Callable[[Quotas], None]) -> None:
        """Let ``change`` edit the current quotas in place, and save them (blocking: a worker
        thread's); ``change`` may run more than once, each time on newer quotas."""

        def changed(quotas: Quotas) -> Quotas:
            change(quotas)
            return quotas

        self._change(changed)

    def _parse(self, data: bytes | None) -> Quotas:
        quotas: Quotas = {}
        for item in json.loads(data).get("quotas", []) if data is not None else ():
            user, client = item["entity"]
            quotas[(user, client)] = {k: float(v) for k, v in item["values"].items()}
        return quotas

    def _serialize(self, value: Quotas) -> bytes:
        return json.dumps({"quotas": [{"entity": list(entity), "values": values}
                                      for entity, values in value.items() if values]},
                          indent=1).encode()
