"""What the produce path does inside a topic's batches, for the topics whose configs ask for it.

Batches stay opaque bytes unless a topic sets compression.type to a codec (the broker then
recompresses every batch sent with another codec, as Kafka's log validator does) or
cleanup.policy=compact (every record needs a key: Kafka refuses keyless records with
INVALID_RECORD). Topics with neither pay one check of two settings.
"""

from __future__ import annotations

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import CODEC_IDS, RecordDecodeError, decode_batch, recompress_batch
from bmq.protocol.records import BatchHeader, validate_batches
from bmq.storage import LogConfig


def needs_conversion(config: LogConfig) -> bool:
    return config.compact or config.compression_type != "producer"


class InvalidRecordsError(KafkaError):
    """INVALID_RECORD naming the records at fault (their index in the batch): the Produce
    response's record_errors (KIP-467), from which clients fail exactly those records and the
    rest of the batch with a retriable "different record" error."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(ErrorCode.INVALID_RECORD, message)
        self.record_errors = record_errors


def require_keys(records: memoryview, headers: list[BatchHeader], where: str) -> None:
    """A compacted topic's rule: every record has a key, else INVALID_RECORD naming the
    keyless ones (``where``: the topic-partition, for the message)."""
    position = 0
    for header in headers:
        batch = records[position : position + header.size]
        position += header.size
        try:
            keyless = [i for i, r in enumerate(decode_batch(batch, header)) if r.key is None]
        except RecordDecodeError as error:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
        if keyless:
            message = (f"Compacted topic cannot accept message without key in topic "
                       f"partition {where}.")
            raise InvalidRecordsError(message, [(index, message) for index in keyless])


def convert_batches(records: memoryview, headers: list[BatchHeader], config: LogConfig,
                    where: str) -> tuple[memoryview, list[BatchHeader]]:
    """The record set to append and its headers: ``records`` itself unless a batch had to be
    recompressed. Raises KafkaError (INVALID_RECORD, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE)."""
    if config.compact:
        require_keys(records, headers, where)
    codec = CODEC_IDS.get(config.compression_type)
    if codec is None or all(header.compression == codec for header in headers):
        return records, headers
    parts: list[bytes | memoryview] = []
    position = 0
    for header in headers:
        batch = records[position : position + header.size]
        position += header.size
        if header.compression == codec:
            parts.append(batch)
            continue
        try:
            parts.append(recompress_batch(batch, header, codec, config.compression_level))
        except RecordDecodeError as error:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
    converted = memoryview(bytearray(b"".join(parts)))
    # As Kafka: the recompressed batch must fit max.message.bytes too.
    return converted, validate_batches(converted, config.max_message_bytes)
