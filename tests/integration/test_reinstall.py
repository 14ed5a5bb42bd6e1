"""A running broker answers every API after its package files are replaced (`pip install .`
over an editable install, as the README's extras once said): it imports what it serves once it
listens, so removing the message and handler modules under it changes nothing for clients.
Before, every new connection failed with ModuleNotFoundError while the broker kept listening."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

import bmq
from tests.conftest import BrokerFactory
from tests.integration.helpers import round_trip_in_a_group


def test_a_broker_serves_on_after_its_files_are_removed(broker_factory: BrokerFactory,
                                                        tmp_path: Path) -> None:
    package = tmp_path / "installed" / "bmq"
    shutil.copytree(Path(bmq.__file__).parent, package)
    broker = broker_factory(env={"PYTHONPATH": str(package.parent), "BMQ_LOG_LEVEL": "DEBUG"})
    deadline = time.monotonic() + 30
    while "loaded the" not in broker.log_text():
        assert time.monotonic() < deadline, broker.log_text()[-2000:]
        time.sleep(0.1)
    for served in ("protocol/messages", "broker/handlers", "security/handlers"):
        shutil.rmtree(package / served)
    round_trip_in_a_group(broker.bootstrap, 50)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert admin.list_consumer_groups(request_timeout=10).result().valid
    [described] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    assert described.result(timeout=10)
    assert "ModuleNotFoundError" not in broker.log_text()
