"""Dynamic broker configs, as Kafka's `kafka-configs --entity-type brokers` sets them: values
changed at run time with AlterConfigs or IncrementalAlterConfigs on a BROKER resource, for one
broker (the resource name is its id) or as the cluster-wide default (an empty name). They are
kept with the cluster's metadata (bmq/metadata/documents.py: `bmq serve`'s ``meta/``, or
ZooKeeper), so every broker sees a change, and they survive restarts."""

from __future__ import annotations

import json
from collections.abc import Callable

from bmq.metadata.documents import DocumentStore

CLUSTER_DEFAULT = ""
# Resource name ("" for the cluster-wide default, else a broker id) -> config name -> value.
DynamicConfigs = dict[str, dict[str, str]]


class BrokerConfigStore(DocumentStore[DynamicConfigs]):
    PATH = "broker_configs.json"

    def of(self, resource: str) -> dict[str, str]:
        """The dynamic values set for one broker id, or for the cluster default."""
        return dict(self.value.get(resource, {}))

    def change(self, resource: str, change: Callable[[dict[str, str]], None]) -> None:
        """Let ``change`` edit the resource's values in place and save them (blocking: a worker
        thread's); ``change`` may run more than once, each time on newer values."""

        def changed(value: DynamicConfigs) -> DynamicConfigs:
            configs = value.setdefault(resource, {})
            change(configs)
            if not configs:
                del value[resource]
            return value

        self._change(changed)

    def _parse(self, data: bytes | None) -> DynamicConfigs:
        if data is None:
            return {}
        return {str(k): {str(n): str(v) for n, v in c.items()}
                for k, c in json.loads(data).get("brokers", {}).items()}

    def _serialize(self, value: DynamicConfigs) -> bytes:
        return json.dumps({"brokers": value}, indent=1, sort_keys=True).encode()
