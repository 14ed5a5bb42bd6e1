"""``bmq.index.fields`` on a view (a topic with ``bmq.view.source``) is refused with
INVALID_CONFIG, through CreateTopics, AlterConfigs, IncrementalAlterConfigs and `bmq index
create`, and nothing changes: a view has no log of its own to index (its source has)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.conftest import BrokerFactory
from tests.index.test_index_query import bmq

VIEW = {"bmq.view.source": "", "bmq.view.filter": "TAG = 'paid'"}


def _refused(future: Future[Any], view: str) -> None:
    with pytest.raises(KafkaException) as failure:
        future.result(15)
    error = failure.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert f"bmq.index.fields: {view} is a view of" in error.str()


def test_index_fields_on_a_view_are_refused(broker_factory: BrokerFactory, topic: str) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(15)
    view, indexed = f"{topic}-paid", f"{topic}-indexed"
    configs = {**VIEW, "bmq.view.source": topic}
    _refused(admin.create_topics([NewTopic(indexed, -1, config={
        **configs, "bmq.index.fields": "order_id"})])[indexed], indexed)
    assert indexed not in admin.list_topics(timeout=10).topics

    admin.create_topics([NewTopic(view, -1, config=configs)])[view].result(15)
    legacy = ConfigResource(ResourceType.TOPIC, view,
                            set_config={**configs, "bmq.index.fields": "order_id"})
    _refused(admin.alter_configs([legacy])[legacy], view)
    incremental = ConfigResource(ResourceType.TOPIC, view, incremental_configs=[
        ConfigEntry("bmq.index.fields", "key", incremental_operation=AlterConfigOpType.SET)])
    _refused(admin.incremental_alter_configs([incremental])[incremental], view)
    refused = bmq("index", "create", view, "--field", "key", "-b", broker.bootstrap,
                  check=False)
    assert refused.returncode == 1
    assert "INVALID_CONFIG" in refused.stderr and "is a view of" in refused.stderr

    described = ConfigResource(ResourceType.TOPIC, view)
    after = admin.describe_configs([described])[described].result(15)
    assert after["bmq.index.fields"].value in ("", None)
    assert after["bmq.view.filter"].value == configs["bmq.view.filter"]
    # The source indexes as before.
    bmq("index", "create", topic, "--field", "key", "-b", broker.bootstrap)
