"""Request/response headers: versions, round trips, kio conformance, malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as KioResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from protocol_kio_support import kio_encode

from bmq.protocol.headers import (
    RequestHeader,
    read_request_header,
    read_response_header,
    request_header_version,
    response_header_version,
    write_request_header,
    write_response_header,
)
from bmq.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES
from bmq.protocol.primitives import DecodeError, Reader, Writer, encode_uvarint

PRODUCE, FETCH, METADATA, API_VERSIONS, SASL_HANDSHAKE = 0, 1, 3, 18, 17


def encode_request_header(h: RequestHeader) -> bytes:
    w = Writer()
    write_request_header(w, h)
    return w.getvalue()


@pytest.mark.parametrize(
    ("api_key", "version", "req", "resp"),
    [
        (PRODUCE, 3, 1, 0),
        (PRODUCE, 8, 1, 0),
        (PRODUCE, 9, 2, 1),
        (PRODUCE, 13, 2, 1),
        (FETCH, 11, 1, 0),
        (FETCH, 12, 2, 1),
        (METADATA, 8, 1, 0),
        (METADATA, 9, 2, 1),
        (API_VERSIONS, 2, 1, 0),
        (API_VERSIONS, 3, 2, 0),  # ApiVersions responses always use header v0
        (API_VERSIONS, 4, 2, 0),
        (API_VERSIONS, 99, 2, 0),  # a newer-than-known version is still flexible
        (SASL_HANDSHAKE, 1, 1, 0),  # never flexible
        (9999, 5, 1, 0),  # unknown api key
        (-1, 0, 1, 0),
    ],
)
def test_header_versions(api_key: int, version: int, req: int, resp: int) -> None:
    assert request_header_version(api_key, version) == req
    assert response_header_version(api_key, version) == resp


def test_header_versions_follow_flexible_versions_of_every_api() -> None:
    for key, cls in REQUEST_TYPES.items():
        flex = cls.FLEXIBLE_MIN_VERSION
        for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
            flexible = flex is not None and v >= flex
            assert request_header_version(key, v) == (2 if flexible else 1)
            resp_flex = RESPONSE_TYPES[key].FLEXIBLE_MIN_VERSION
            assert resp_flex == flex
            expected = 0 if key == API_VERSIONS else (1 if flexible else 0)
            assert response_header_version(key, v) == expected


@settings(max_examples=150, deadline=None, database=None)
@given(
    api_key=st.sampled_from([*sorted(REQUEST_TYPES), 500, -3]),
    version=st.integers(0, 20),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=40),
)
def test_request_header_round_trip_matches_kio(
    api_key: int, version: int, correlation_id: int, client_id: str | None
) -> None:
    h = RequestHeader(api_key, version, correlation_id, client_id)
    data = encode_request_header(h)
    kio_cls = (
        KioRequestHeaderV2 if request_header_version(api_key, version) == 2 else KioRequestHeaderV1
    )
    kio_h = kio_cls(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    assert data == kio_encode(kio_cls, kio_h)
    body = b"\x01\x02\x03"
    r = Reader(data + body)
    assert read_request_header(r) == h
    assert r.pos == len(data)
    assert r.remaining() == len(body)


def test_v2_client_id_is_a_classic_string() -> None:
    data = encode_request_header(RequestHeader(PRODUCE, 9, 7, "abc"))
    assert data == b"\x00\x00\x00\x09\x00\x00\x00\x07\x00\x03abc\x00"
    data = encode_request_header(RequestHeader(PRODUCE, 9, 7, None))
    assert data == b"\x00\x00\x00\x09\x00\x00\x00\x07\xff\xff\x00"
    data = encode_request_header(RequestHeader(PRODUCE, 8, 7, "abc"))
    assert data == b"\x00\x00\x00\x08\x00\x00\x00\x07\x00\x03abc"


def _tagged_section(fields: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(encode_uvarint(len(fields)))
    for tag, value in fields:
        out += encode_uvarint(tag) + encode_uvarint(len(value)) + value
    return bytes(out)


def test_v2_unknown_tagged_fields_are_skipped() -> None:
    base = encode_request_header(RequestHeader(METADATA, 12, 42, "client"))[:-1]
    tags = _tagged_section([(0, b"x" * 200), (5, b""), (1000, b"\x00\x01")])
    body = b"BODY"
    r = Reader(base + tags + body)
    assert read_request_header(r) == RequestHeader(METADATA, 12, 42, "client")
    assert bytes(r.buf[r.pos :]) == body


def test_unknown_api_key_is_decoded_as_v1() -> None:
    data = encode_request_header(RequestHeader(4242, 3, 1, "x"))
    r = Reader(data + b"\x00")
    assert read_request_header(r) == RequestHeader(4242, 3, 1, "x")
    assert r.remaining() == 1  # no tagged section consumed


@pytest.mark.parametrize(
    "header",
    [
        RequestHeader(PRODUCE, 9, 1, "producer-1"),
        RequestHeader(PRODUCE, 7, 1, "producer-1"),
        RequestHeader(API_VERSIONS, 3, 5, None),
        RequestHeader(4242, 0, 5, "z"),
    ],
)
def test_truncated_request_header_raises_decode_error(header: RequestHeader) -> None:
    data = encode_request_header(header)
    if request_header_version(header.api_key, header.api_version) == 2:
        data = data[:-1] + _tagged_section([(3, b"abc")])
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            read_request_header(Reader(data[:cut]))
    assert read_request_header(Reader(data)) == header


def test_malformed_request_header() -> None:
    good = encode_request_header(RequestHeader(PRODUCE, 3, 1, "ab"))
    bad_len = good[:8] + b"\xff\xfe" + good[10:]  # client_id length -2
    with pytest.raises(DecodeError):
        read_request_header(Reader(bad_len))
    bad_utf8 = good[:10] + b"\xff\xfe"
    with pytest.raises(DecodeError):
        read_request_header(Reader(bad_utf8))
    flex = encode_request_header(RequestHeader(PRODUCE, 9, 1, "ab"))[:-1]
    with pytest.raises(DecodeError):  # varint that never ends
        read_request_header(Reader(flex + b"\xff" * 6))
    with pytest.raises(DecodeError):  # tagged field longer than the input
        read_request_header(Reader(flex + b"\x01\x00\x10abc"))


@pytest.mark.parametrize("version", [0, 1])
def test_response_header_matches_kio(version: int) -> None:
    for correlation_id in (0, 1, -1, 2**31 - 1, -(2**31)):
        w = Writer()
        write_response_header(w, correlation_id, version)
        kio_cls = KioResponseHeaderV1 if version else KioResponseHeaderV0
        assert w.getvalue() == kio_encode(kio_cls, kio_cls(correlation_id=correlation_id))
        r = Reader(w.getvalue())
        assert read_response_header(r, version) == correlation_id
        assert r.remaining() == 0
