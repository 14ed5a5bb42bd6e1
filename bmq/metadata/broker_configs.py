"""Dynamic broker configs, as Kafka's `kafka-configs --entity-type brokers` sets them: values
changed at run time with AlterConfigs or IncrementalAlterConfigs on a BROKER resource, for one
broker (the resource name is its id) or as the cluster-wide default (an empty name). They are
kept with the cluster's metadata (bmq/metadata/documents.py: `bmq serve`'s ``meta/``, or
ZooKeeper), so every broker sees a change, and they survive restarts."""

from __future__ import annotations

from bmq.metadata.documents import ResourceConfigStore

CLUSTER_DEFAULT = ""


class BrokerConfigStore(ResourceConfigStore):
    """Broker id (or "" for the cluster-wide default) -> dynamic config -> value."""

    PATH = "broker_configs.json"
    KEY = "brokers"
