"""Kafka's framing of the records of its internal topics (its coordinators' record serde): a
key is an int16 (the record type, which is the key spec's api key, or the key's version where
the spec has none) then the key's fields; a value is its int16 version then its fields at that
version. The fields are the messages generated from Kafka's specs (``bmq.protocol.messages``).
"""

from __future__ import annotations

from typing import Protocol

from bmq.protocol.primitives import Reader, Writer


class Message(Protocol):
    def write(self, w: Writer, version: int) -> None: ...


def encode(prefix: int, message: Message, version: int = 0) -> bytes:
    """``message``'s fields as ``version``, after the int16 ``prefix``."""
    w = Writer()
    w.write_int16(prefix)
    message.write(w, version)
    return w.getvalue()


def read_prefix(data: bytes) -> tuple[int, Reader]:
    """The int16 a key or value starts with, and a reader at the fields after it."""
    r = Reader(data)
    return r.read_int16(), r
