"""The proxy's produce router keeps an idempotent producer's batches in order per partition
(``bmq.client.produce``), finding the producer in the batch header. An old client's message set
(formats v0/v1, Produce v0-2) has no producer: the bytes where a record batch has one are a
message's key or value, which read as a producer id held its batches as if idempotent."""

from __future__ import annotations

import struct

from kafka.record.legacy_records import LegacyRecordBatchBuilder

from bmq.client.produce import _PRODUCER, _PRODUCER_AT, _producer
from tests.integration.kwire import Record, build_record_batch


def test_a_v0_v1_message_set_has_no_producer_a_v2_batch_has_its_own() -> None:
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        builder.append(0, timestamp=1_700_000_000_000 if magic else None, key=b"k",
                       value=b"\x00" * 64)
        message_set = bytes(builder.build())
        assert _PRODUCER.unpack_from(message_set, _PRODUCER_AT)[0] >= 0    # looks like one
        assert _producer(message_set) is None
    batch = build_record_batch([Record(None, b"v")], producer_id=2001, producer_epoch=3,
                               base_sequence=7)
    assert _producer(batch) == (2001, 3, 7)
    assert struct.unpack_from(">q", batch, _PRODUCER_AT)[0] == 2001
