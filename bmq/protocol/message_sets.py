"""Message formats v0 and v1: the magic 0/1 message sets of Kafka clients before 0.11, to and
from record batch v2, the one format BMQ stores (issue #36).

Produce v0-2 may carry them: ``to_batch`` turns a message set into one v2 batch, as Kafka's
LogValidator converts old messages for a v2 log (one batch, the producer's codec, offsets
assigned by the log, no producer id). Fetch v0-3 can only read them: ``to_message_set`` turns
stored batches back into messages, as Kafka 2.x's down-conversion did. The per-record loops
(framing, CRC-32, the record encodings) are the C module ``_message_sets``; this module does
what is done once per message set.
"""

from __future__ import annotations

from types import ModuleType

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import RecordDecodeError, compress, decompress, frame_batch
from bmq.protocol.records import BatchHeader

# Where a message's magic byte is, as a v2 batch's: after offset, size and CRC.
_MAGIC_AT = 16
# Produce v3 and Fetch v4 are the first versions that carry record batch v2 only.
FIRST_V2_PRODUCE_VERSION = 3
FIRST_V2_FETCH_VERSION = 4


def is_message_set(records: bytes | bytearray | memoryview) -> bool:
    """Whether a produced record set is v0/v1 messages (Produce v0-2 may carry v2 batches too)."""
    return len(records) > _MAGIC_AT and records[_MAGIC_AT] in (0, 1)


def fetch_magic(version: int) -> int | None:
    """The message format a Fetch version reads: v0-1 magic 0, v2-3 magic 1, None for v2
    batches (v4+)."""
    if version >= FIRST_V2_FETCH_VERSION:
        return None
    return 0 if version < 2 else 1


def _native() -> ModuleType:
    """The C module, imported on first use (as bmq.field_index's): a checkout whose C modules
    were not rebuilt since it appeared (setup.py build_ext) still serves every v2 client."""
    from bmq.protocol import _message_sets

    return _message_sets


def _decompress(codec: int, data: bytes) -> bytes:
    try:
        return decompress(codec, data)
    except RecordDecodeError as error:
        raise _native().LegacyFormatError(ErrorCode.CORRUPT_MESSAGE, str(error)) from None


def _kafka_error(error: ValueError) -> KafkaError:
    code, message = error.args
    return KafkaError(ErrorCode(code), message)


def to_batch(message_set: bytes | bytearray | memoryview) -> tuple[memoryview, BatchHeader]:
    """One RecordBatch v2 (base offset 0, CreateTime, no producer) of the messages of a
    produced v0/v1 message set, compressed with its wrappers' codec. Raises KafkaError:
    CORRUPT_MESSAGE (CRC, framing, undecompressable wrapper), INVALID_RECORD (a compressed
    message inside a wrapper), UNSUPPORTED_COMPRESSION_TYPE (zstd)."""
    native = _native()
    try:
        records, count, first_ts, max_ts, codec = native.up(message_set, _decompress)
    except native.LegacyFormatError as error:
        raise _kafka_error(error) from None
    batch, header = frame_batch(compress(codec, records), count, first_ts, max_ts,
                                attributes=codec)
    return memoryview(batch), header


def to_message_set(batches: bytes | memoryview, magic: int,
                   first_offset: int) -> tuple[bytes, int]:
    """Stored v2 batches as a v0/v1 message set of ``magic``, from ``first_offset`` on (the
    batch holding it starts earlier), and how many records it holds (wrapped ones too, which
    only decompressing could count again). Raises KafkaError UNSUPPORTED_COMPRESSION_TYPE for
    zstd batches, which old clients cannot read."""
    native = _native()
    try:
        converted: tuple[bytes, int] = native.down(batches, magic, first_offset, _decompress,
                                                   compress)
    except native.LegacyFormatError as error:
        raise _kafka_error(error) from None
    return converted
