"""The quota manager counts a request's bytes only for a client a byte rate applies to: with
quotas configured for someone else, a produce of many partitions costs everyone else nothing
but a (cached) quota lookup."""

from __future__ import annotations

from pathlib import Path

from bmq.metadata.documents import StorageDocuments
from bmq.metadata.quotas import PRODUCER_BYTE_RATE, USER, QuotaStore, entity_of
from bmq.protocol.messages import REQUEST_APIS, ProduceRequest
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.security.quotas import QuotaManager
from bmq.storage.local import LocalStorage

PRODUCE = REQUEST_APIS["ProduceRequest"][0]


class _MeasuredRecords(bytes):
    """Records that count how often their length is asked: the quota's byte count."""

    measured = 0

    def __len__(self) -> int:
        type(self).measured += 1
        return super().__len__()


def _produce(partitions: int, size: int) -> ProduceRequest:
    data = [PartitionProduceData(index=i, records=_MeasuredRecords(b"x" * size))
            for i in range(partitions)]
    return ProduceRequest(acks=-1, timeout_ms=1000,
                          topic_data=[TopicProduceData(name="t", partition_data=data)])


def test_only_a_client_with_a_byte_rate_has_its_bytes_counted(tmp_path: Path) -> None:
    store = QuotaStore(StorageDocuments(LocalStorage(str(tmp_path))))
    store.change(lambda quotas: quotas.update(
        {entity_of([(USER, "alice")]): {PRODUCER_BYTE_RATE: 1000.0}}))
    manager = QuotaManager(store)

    _MeasuredRecords.measured = 0
    assert manager.throttle(PRODUCE, "bob", "c", _produce(100, 100_000), None, 0.001) == 0
    assert _MeasuredRecords.measured == 0

    # The same request from alice is counted, partition by partition, and throttled.
    assert manager.throttle(PRODUCE, "alice", "c", _produce(100, 100_000), None, 0.001) > 0
    assert _MeasuredRecords.measured == 100
