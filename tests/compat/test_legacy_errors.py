"""An old client gets the error code its API version knows (issue #36,
bmq.protocol.legacy_errors): a broker with ``delete.topic.enable=false`` answers DeleteTopics
v0-2 INVALID_REQUEST, as Kafka did before TOPIC_DELETION_DISABLED (v3, KIP-322), and today's
clients TOPIC_DELETION_DISABLED."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.integration.helpers import create_topic

pytestmark = pytest.mark.broker(env={"BMQ_DELETE_TOPIC_ENABLE": "false"})


def test_deletion_disabled_as_old_admin_clients_know_it(broker: Any, topic: str) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import InvalidRequestError

    create_topic(broker.bootstrap, topic)
    old = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1))
    try:
        with pytest.raises(InvalidRequestError):
            old.delete_topics([topic])
    finally:
        old.close()
    today = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        today.delete_topics([topic])[topic].result(timeout=30)
    assert refused.value.args[0].code() == ConfluentError.TOPIC_DELETION_DISABLED
