"""Reader/Writer primitives."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bmq.protocol.primitives import (
    PART_THRESHOLD,
    ZERO_UUID,
    DecodeError,
    Reader,
    Writer,
    append_varint,
    encode_uvarint,
    encode_varint,
    read_uvarint,
    records_length,
    records_view,
    skip_tagged_fields,
)

# (writer method, reader method, strategy)
CASES: list[tuple[str, str, st.SearchStrategy[Any]]] = [
    ("write_int8", "read_int8", st.integers(-(2**7), 2**7 - 1)),
    ("write_int16", "read_int16", st.integers(-(2**15), 2**15 - 1)),
    ("write_int32", "read_int32", st.integers(-(2**31), 2**31 - 1)),
    ("write_int64", "read_int64", st.integers(-(2**63), 2**63 - 1)),
    ("write_uint16", "read_uint16", st.integers(0, 2**16 - 1)),
    ("write_uint32", "read_uint32", st.integers(0, 2**32 - 1)),
    ("write_float64", "read_float64", st.floats(allow_nan=False)),
    ("write_bool", "read_bool", st.booleans()),
    ("write_uvarint", "read_uvarint", st.integers(0, 2**32 - 1)),
    ("write_varint", "read_varint", st.integers(-(2**31), 2**31 - 1)),
    ("write_uvarlong", "read_uvarlong", st.integers(0, 2**64 - 1)),
    ("write_varlong", "read_varlong", st.integers(-(2**63), 2**63 - 1)),
    ("write_uuid", "read_uuid", st.uuids() | st.just(ZERO_UUID)),
    ("write_string", "read_string", st.text(max_size=50)),
    ("write_nullable_string", "read_nullable_string", st.none() | st.text(max_size=50)),
    ("write_compact_string", "read_compact_string", st.text(max_size=300)),
    (
        "write_compact_nullable_string",
        "read_compact_nullable_string",
        st.none() | st.text(max_size=50),
    ),
    ("write_bytes", "read_bytes", st.binary(max_size=50)),
    ("write_nullable_bytes", "read_nullable_bytes", st.none() | st.binary(max_size=50)),
    ("write_compact_bytes", "read_compact_bytes", st.binary(max_size=300)),
    (
        "write_compact_nullable_bytes",
        "read_compact_nullable_bytes",
        st.none() | st.binary(max_size=50),
    ),
]


@pytest.mark.parametrize(("wname", "rname", "strategy"), CASES, ids=[c[1] for c in CASES])
def test_round_trip_and_truncation(
    wname: str, rname: str, strategy: st.SearchStrategy[Any]
) -> None:
    @settings(max_examples=40, deadline=None, database=None)
    @given(value=strategy)
    def run(value: Any) -> None:
        w = Writer()
        getattr(w, wname)(value)
        data = w.getvalue()
        assert w.size == len(data)
        r = Reader(data)
        assert getattr(r, rname)() == value
        assert r.remaining() == 0
        for cut in range(len(data)):
            with pytest.raises(DecodeError):
                getattr(Reader(data[:cut]), rname)()

    run()


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**31 - 1, b"\xff\xff\xff\xff\x07"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_encoding(value: int, encoded: bytes) -> None:
    assert encode_uvarint(value) == encoded
    assert read_uvarint(memoryview(encoded), 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")],
)
def test_varint_zigzag(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert Reader(encoded).read_varint() == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_append_varint_appends_what_encode_varint_returns(value: int) -> None:
    buf = bytearray(b"head")
    append_varint(buf, value)
    assert buf == b"head" + encode_varint(value)


def test_overlong_varint_is_rejected() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff\xff\x01").read_uvarint()
    with pytest.raises(DecodeError):
        Reader(b"\xff" * 11).read_varlong()
    with pytest.raises(ValueError):
        encode_uvarint(-1)


def test_invalid_lengths_raise_decode_error() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xfe").read_string()  # -2
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff").read_string()  # null where not nullable
    with pytest.raises(DecodeError):
        Reader(b"\x00").read_compact_string()  # null where not nullable
    with pytest.raises(DecodeError):
        Reader(b"\x00\x02\xc3\x28").read_string()  # invalid UTF-8
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xfe").read_nullable_bytes()
    with pytest.raises(DecodeError):
        Reader(b"\x00\x00\x00\x05abc").read_array_length()  # more elements than bytes
    with pytest.raises(DecodeError):
        Reader(b"abc").read_raw(-1)


def test_reader_accepts_bytes_bytearray_memoryview() -> None:
    data = b"\x00\x00\x00\x2a"
    for buf in (data, bytearray(data), memoryview(data), memoryview(bytearray(data))):
        assert Reader(buf).read_int32() == 42
    # non-byte memoryviews are cast to bytes
    words = memoryview(bytearray(8)).cast("I")
    assert Reader(words).remaining() == 8
    r = Reader(data, 2)
    assert r.pos == 2 and r.remaining() == 2


def test_records_are_views_not_copies() -> None:
    buf = bytearray(b"\x00\x00\x00\x04abcd\xff\xff\xff\xff\x05wxyz")
    r = Reader(buf)
    v = r.read_records()
    assert isinstance(v, memoryview)
    assert v.obj is buf
    buf[4] = ord("Z")
    assert bytes(v) == b"Zbcd"
    assert r.read_records() is None
    v2 = r.read_compact_records()
    assert v2 is not None and bytes(v2) == b"wxyz"


def test_writer_keeps_large_buffers_as_parts() -> None:
    big = bytearray(PART_THRESHOLD * 2)
    big_view = memoryview(bytes(PART_THRESHOLD))
    small = b"tiny"
    w = Writer()
    w.write_int32(1)
    w.write_records([big, small, big_view])
    w.write_int16(2)
    parts = w.parts()
    assert any(p is big for p in parts)
    assert any(p is big_view for p in parts)
    total = len(big) + len(small) + len(big_view)
    assert w.size == 4 + 4 + total + 2 == sum(len(p) for p in parts)
    data = w.getvalue()
    r = Reader(data)
    assert r.read_int32() == 1
    v = r.read_records()
    assert v is not None and bytes(v) == bytes(big) + small + bytes(big_view)
    assert r.read_int16() == 2
    assert records_length([big, small]) == len(big) + len(small)
    assert records_length(None) == -1


def test_writer_null_records_and_empty() -> None:
    w = Writer()
    assert w.size == 0 and w.getvalue() == b"" and w.parts() == []
    w.write_records(None)
    w.write_compact_records(None)
    w.write_compact_records(b"")
    assert w.getvalue() == b"\xff\xff\xff\xff\x00\x01"


def test_skip_tagged_fields() -> None:
    section = b"\x02\x00\x03abc\x81\x01\x00"  # tag 0 (3 bytes), tag 129 (empty)
    assert skip_tagged_fields(memoryview(section + b"!"), 0) == len(section)
    r = Reader(section)
    assert r.read_tagged_fields() == {0: b"abc", 129: b""}
    for cut in range(len(section)):
        with pytest.raises(DecodeError):
            Reader(section[:cut]).skip_tagged_fields()


def test_uuid_round_trip() -> None:
    u = uuid.uuid4()
    w = Writer()
    w.write_uuid(u)
    w.write_uuid(ZERO_UUID)
    r = Reader(w.getvalue())
    assert r.read_uuid() == u
    assert r.read_uuid() is ZERO_UUID


@pytest.mark.parametrize(
    "method",
    [
        Writer.write_array_length,
        Writer.write_compact_array_length,
    ],
)
def test_array_lengths(method: Callable[[Writer, int | None], None]) -> None:
    for n in (None, 0, 5, 1000):
        w = Writer()
        method(w, n)
        r = Reader(w.getvalue() + b"\x00" * 1000)
        read = (
            r.read_array_length
            if method is Writer.write_array_length
            else r.read_compact_array_length
        )
        assert read() == (-1 if n is None else n)


def test_records_view() -> None:
    buf = bytearray(b"abc")
    mv = memoryview(buf)
    assert records_view(mv) is mv
    assert records_view(None) is None
    assert records_view(buf).obj is buf  # type: ignore[union-attr]
    assert records_view([b"a", bytearray(b"b"), memoryview(b"c")]) == b"abc"
