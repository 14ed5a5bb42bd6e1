"""kill -9 of `bmq serve` while it saves ACLs (meta/acls.json) and client quotas
(meta/quotas.json): the broker starts again and every ACL and quota whose request was
acknowledged is there, with nothing that was never asked for.

Several connections send CreateAcls and AlterClientQuotas at once, one change per request, so
the files are rewritten all the time and the kill lands in a write (or between the write and
the rename) more often than not. The changes being concurrent matters: before each change of a
document was made under one lock (bmq/metadata/documents.py), two of them both started from
the same saved set and the second save dropped the first's acknowledged entry (this test, on
that code: 240 CreateAcls acknowledged, 71 kept)."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable

import pytest

from bmq.metadata.acls import Operation, PatternType, Permission, ResourceType
from bmq.metadata.quotas import CLIENT_ID, PRODUCER_BYTE_RATE
from bmq.protocol.messages import (
    AlterClientQuotasRequest,
    CreateAclsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
)
from bmq.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from bmq.protocol.messages.create_acls_request import AclCreation
from bmq.protocol.messages.describe_client_quotas_request import ComponentData
from tests.conftest import BrokerFactory, BrokerProcess
from tests.groups.wire import RawClient

AUTHORIZER = {"authorizer.class.name": "bmq", "super.users": "User:ANONYMOUS"}
WRITERS = 3         # connections per kind
MATCH_ANY = 2       # DescribeClientQuotas: any entity name of the component's type


def _rate(name: str) -> float:
    """Each client id's quota is its own value, so a value from another change shows."""
    return 1000.0 + sum(name.encode())


def _create_acl(client: RawClient, name: str) -> bool:
    creation = AclCreation(resource_type=ResourceType.TOPIC, resource_name=name,
                           resource_pattern_type=PatternType.LITERAL, principal="User:crash",
                           host="*", operation=Operation.READ, permission_type=Permission.ALLOW)
    answer = client.call(CreateAclsRequest(creations=[creation]), 3)
    return bool(answer.results[0].error_code == 0)


def _set_quota(client: RawClient, name: str) -> bool:
    entry = EntryData(entity=[EntityData(entity_type=CLIENT_ID, entity_name=name)],
                      ops=[OpData(key=PRODUCER_BYTE_RATE, value=_rate(name))])
    answer = client.call(AlterClientQuotasRequest(entries=[entry]), 1)
    return bool(answer.entries[0].error_code == 0)


def _acls(bootstrap: str) -> set[str]:
    """The resource names of every ACL of principal User:crash."""
    with RawClient(bootstrap) as client:
        answer = client.call(DescribeAclsRequest(
            resource_type_filter=ResourceType.ANY, resource_name_filter=None,
            pattern_type_filter=PatternType.ANY, principal_filter="User:crash",
            host_filter=None, operation=Operation.ANY, permission_type=Permission.ANY), 3)
    assert answer.error_code == 0, answer.error_message
    return {resource.resource_name for resource in answer.resources}


def _quotas(bootstrap: str) -> dict[str, float]:
    """client id -> producer byte rate, of every client-id quota."""
    with RawClient(bootstrap) as client:
        answer = client.call(DescribeClientQuotasRequest(components=[
            ComponentData(entity_type=CLIENT_ID, match_type=MATCH_ANY, match=None)]), 1)
    assert answer.error_code == 0, answer.error_message
    return {str(entry.entity[0].entity_name): value.value
            for entry in answer.entries or [] for value in entry.values
            if value.key == PRODUCER_BYTE_RATE}


class _Writers:
    """Connections that each send one change after another until the broker dies, and what
    was sent and what was acknowledged."""

    def __init__(self, broker: BrokerProcess, kind: str,
                 change: Callable[[RawClient, str], bool], prefix: str) -> None:
        self.sent: set[str] = set()
        self.acked: set[str] = set()
        self._threads = [threading.Thread(target=self._write, daemon=True,
                                          args=(broker.bootstrap, change, f"{prefix}-{kind}{w}"))
                         for w in range(WRITERS)]
        for thread in self._threads:
            thread.start()

    def _write(self, bootstrap: str, change: Callable[[RawClient, str], bool],
               prefix: str) -> None:
        try:
            with RawClient(bootstrap, timeout=20) as client:
                for i in itertools.count():
                    name = f"{prefix}-{i}"
                    self.sent.add(name)     # before the request: it may be kept unanswered
                    if change(client, name):
                        self.acked.add(name)
        except OSError:     # the broker was killed (reset, closed, or refused)
            return

    def join(self) -> None:
        for thread in self._threads:
            thread.join(30)
            assert not thread.is_alive()


def _kill_rounds(broker: BrokerProcess, rounds: int, seed: int) -> None:
    rnd = random.Random(seed)
    acked_acls: set[str] = set()
    sent_acls: set[str] = set()
    acked_quotas: set[str] = set()
    sent_quotas: set[str] = set()
    for round_ in range(rounds):
        acls = _Writers(broker, "acl", _create_acl, f"r{round_}")
        quotas = _Writers(broker, "quota", _set_quota, f"r{round_}")
        # Let every writer get going, then kill at a moment the test does not choose.
        deadline = time.monotonic() + 20
        while min(len(acls.acked), len(quotas.acked)) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rnd.uniform(0.05, 0.5))
        broker.kill()
        acls.join()
        quotas.join()
        assert min(len(acls.acked), len(quotas.acked)) >= 20, "the writers hardly wrote"
        acked_acls |= acls.acked
        sent_acls |= acls.sent
        acked_quotas |= quotas.acked
        sent_quotas |= quotas.sent
        broker.start()
        found_acls = _acls(broker.bootstrap)
        lost = acked_acls - found_acls
        assert not lost, f"acknowledged ACLs lost: {sorted(lost)[:10]} ({len(lost)})"
        assert found_acls <= sent_acls
        found_quotas = _quotas(broker.bootstrap)
        lost = acked_quotas - found_quotas.keys()
        assert not lost, f"acknowledged quotas lost: {sorted(lost)[:10]} ({len(lost)})"
        assert found_quotas.keys() <= sent_quotas
        assert all(value == _rate(name) for name, value in found_quotas.items())
    assert "Traceback" not in broker.log_text()


def test_kill_9_while_saving_acls_and_quotas(broker_factory: BrokerFactory) -> None:
    _kill_rounds(broker_factory(config=AUTHORIZER), rounds=1, seed=1)


@pytest.mark.slow
def test_kill_9_while_saving_acls_and_quotas_many_times(broker_factory: BrokerFactory) -> None:
    _kill_rounds(broker_factory(config=AUTHORIZER), rounds=8, seed=2)
