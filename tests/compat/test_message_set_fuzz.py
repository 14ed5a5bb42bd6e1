"""The C conversion of message sets (bmq/protocol/_message_sets.c) on damaged input: whatever
bytes a client sends, a Produce gets a Kafka error or a valid v2 batch, never a crash; and
stored batches cut anywhere convert to whole messages or nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from bmq.protocol.errors import KafkaError
from bmq.protocol.message_sets import to_batch, to_message_set
from bmq.protocol.record_codec import build_batch, decode_batch
from bmq.protocol.records import set_base_offset, validate_batches


def _message_set(magic: int, codec: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(6):
        builder.append(i, timestamp=1_700_000_000_000 + i if magic else None,
                       key=None if i == 2 else b"key%d" % i, value=b"value" * i)
    return bytes(builder.build())


SETS = [_message_set(magic, codec) for magic in (0, 1) for codec in (0, 1, 2)]


def _stored() -> bytes:
    """Three batches as a log holds them: records k0..k8 at offsets 0..8."""
    batches, base = [], 0
    for count in (3, 1, 5):
        batch = build_batch([(b"k%d" % (base + i), b"v" * i) for i in range(count)], 0)[0]
        set_base_offset(batch, 0, base)
        batches.append(bytes(batch))
        base += count
    return b"".join(batches)


STORED = _stored()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, len(SETS) - 1), data=st.data())
def test_damaged_message_sets_are_refused_or_converted(which: int, data: st.DataObject) -> None:
    damaged = bytearray(SETS[which])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(damaged) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(damaged)))
    try:
        batch, header = to_batch(bytes(damaged[:cut]))
    except KafkaError:
        return
    validate_batches(batch, 1 << 20)         # a converted set is always a valid v2 batch
    assert len(decode_batch(batch, header)) == header.record_count


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(0, len(STORED)), magic=st.integers(0, 1), first=st.integers(0, 10))
def test_stored_batches_cut_anywhere_convert_to_whole_messages(cut: int, magic: int,
                                                                first: int) -> None:
    converted, count = to_message_set(STORED[:cut], magic, first)
    if converted:
        back, header = to_batch(converted)
        keys = [record.key for record in decode_batch(back, header)]
        assert keys == [b"k%d" % i for i in range(first, first + len(keys))]
        assert count == len(keys)
    else:
        assert count == 0
