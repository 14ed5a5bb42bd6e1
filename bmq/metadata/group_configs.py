"""Group configs (KIP-848, KIP-932): values set per consumer or share group with
IncrementalAlterConfigs on a GROUP resource, kept with the cluster's metadata
(bmq/metadata/documents.py), so they hold on every broker and survive restarts."""

from __future__ import annotations

from bmq.metadata.documents import ResourceConfigStore


class GroupConfigStore(ResourceConfigStore):
    """Group id -> config -> value (the group's own; the rest are the broker's defaults)."""

    PATH = "group_configs.json"
    KEY = "groups"
