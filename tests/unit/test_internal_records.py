"""The internal topics' records and batches, byte for byte as BMQ wrote them before their keys
and values were generated from Kafka's specs and every batch went through one codec: the
expected bytes here are what the hand-written encoders wrote (captured from them before they
were replaced), so a change in the generator or the specs that moves a byte fails here. Each
record is also decoded back.
"""

import uuid

import pytest

from bmq.coordinators.groups import records as groups
from bmq.coordinators.share import records as share
from bmq.coordinators.share.partition import RecordState, Run
from bmq.coordinators.transactions import records as txn
from bmq.protocol.record_codec import Record, build_batch, decode_batch, encode_batch
from bmq.protocol.records import crc_ok

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
OFFSET_KEY = groups.OffsetKey("grp \u00e9", "topic", 7)
OFFSET_VALUE = groups.OffsetValue(42, 5, "meta \u00e9", 1000, -1)
GROUP_VALUE = groups.GroupValue("consumer", 3, "range", "m1", 123, [
    groups.MemberValue("m1", "i1", "c", "/h", 3000, 6000, b"sub", b"asg"),
    groups.MemberValue("m2", None, "c2", "", 1, 2, b"", b"")])
EMPTY_GROUP_VALUE = groups.GroupValue("", 0, None, None, -1, [])
TXN = txn.TxnMetadata("txn-1", 1000, 3, 60000, txn.TxnState.ONGOING,
                      {("b", 2), ("a", 1), ("a", 0)}, 1700000000000, 1699999999000)
SHARE_KEY = share.StateKey("sg", TOPIC_ID, 4)


def unhex(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


EXPECTED = {
    "offset key": unhex(
        "0001000667727020c3a90005746f70696300000007"),
    "group key": unhex(
        "00020003677270"),
    "consumer group key": unhex(
        "000300026367"),
    "offset value": unhex(
        "0000000000000000002a0000000500076d65746120c3a900000000000003e8ffffffffffffffff"),
    "group value": unhex(
        "00000008636f6e73756d657200000003000572616e676500026d31000000000000007b0000000200"
        "026d310002693100016300022f6800000bb800001770000000037375620000000361736700026d32"
        "ffff00026332000000000001000000020000000000000000"),
    "empty group value": unhex(
        "0000000000000000ffffffffffffffffffffffff00000000"),
    "transaction key": unhex(
        "0000000574786e2d31"),
    "transaction value": unhex(
        "000000000000000003e800030000ea60010000000200016100000002000000000000000100016200"
        "000001000000020000018bcfe568000000018bcfe56418"),
    "empty transaction value": unhex(
        "000000000000000000050000000000640000000000ffffffffffffffffffffffffffffffff"),
    "share snapshot key": unhex(
        "0000000273671234567812345678123456781234567800000004"),
    "share update key": unhex(
        "0001000273671234567812345678123456781234567800000004"),
}


def encoded() -> dict[str, bytes]:
    return {
        "offset key": groups.encode_key(OFFSET_KEY),
        "group key": groups.encode_key(groups.GroupKey("grp")),
        "consumer group key": groups.encode_key(groups.ConsumerGroupKey("cg")),
        "offset value": groups.encode_value(OFFSET_VALUE),
        "group value": groups.encode_value(GROUP_VALUE),
        "empty group value": groups.encode_value(EMPTY_GROUP_VALUE),
        "transaction key": txn.encode_key("txn-1"),
        "transaction value": txn.encode_value(TXN),
        "empty transaction value": txn.encode_value(txn.TxnMetadata("x", 5, 0, 100)),
        "share snapshot key": share.encode_key(SHARE_KEY, True),
        "share update key": share.encode_key(SHARE_KEY, False),
    }


@pytest.mark.parametrize("label", list(EXPECTED))
def test_keys_and_values_are_the_bytes_bmq_wrote(label: str) -> None:
    assert encoded()[label] == EXPECTED[label]


def test_consumer_offsets_records_decode_back() -> None:
    assert groups.decode_record(EXPECTED["offset key"], EXPECTED["offset value"]) == \
        (OFFSET_KEY, OFFSET_VALUE)
    assert groups.decode_record(EXPECTED["group key"], EXPECTED["group value"]) == \
        (groups.GroupKey("grp"), GROUP_VALUE)
    assert groups.decode_record(EXPECTED["group key"], EXPECTED["empty group value"]) == \
        (groups.GroupKey("grp"), EMPTY_GROUP_VALUE)
    assert groups.decode_record(EXPECTED["consumer group key"], None) == \
        (groups.ConsumerGroupKey("cg"), None)
    assert groups.decode_key(b"\x00\x63" + EXPECTED["group key"][2:]) is None  # unknown type


def test_transaction_records_decode_back() -> None:
    assert txn.decode_key(EXPECTED["transaction key"]) == "txn-1"
    meta = txn.decode_value("txn-1", EXPECTED["transaction value"])
    assert (meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state,
            meta.partitions, meta.update_ms, meta.start_ms) == \
        (TXN.producer_id, TXN.producer_epoch, TXN.timeout_ms, TXN.state, TXN.partitions,
         TXN.update_ms, TXN.start_ms)
    assert txn.decode_value("x", EXPECTED["empty transaction value"]).partitions == set()


def test_share_records_decode_back() -> None:
    runs = [Run(10, 19, RecordState.ACKNOWLEDGED, 1, available_at=-1)]
    for snapshot in (True, False):
        record = share.decode(share.encode_key(SHARE_KEY, snapshot), share.encode_value(5, runs))
        assert record is not None
        assert (record.key, record.snapshot, record.start_offset) == (SHARE_KEY, snapshot, 5)
        assert [(r.first, r.last, r.state) for r in record.runs or []] == \
            [(10, 19, RecordState.ACKNOWLEDGED)]


def test_batches_are_the_bytes_bmq_wrote() -> None:
    offsets = build_batch([(EXPECTED["offset key"], EXPECTED["offset value"]),
                           (EXPECTED["group key"], None)], 1700000000123, 7)[0]
    assert offsets == unhex(
        "00000000000000000000008300000007022455761a0000000000010000018bcfe5687b0000018bcf"
        "e5687bffffffffffffffffffffffffffff0000000284010000002a0001000667727020c3a9000574"
        "6f706963000000074e0000000000000000002a0000000500076d65746120c3a900000000000003e8"
        "ffffffffffffffff001a0000020e000200036772700100")
    transactional = build_batch([(b"k", b"v")], 5, 2, (1000, 3))[0]
    assert transactional == unhex(
        "00000000000000000000003a00000002026672308900100000000000000000000000050000000000"
        "00000500000000000003e80003ffffffff0000000110000000026b027600")
    marker = txn.marker_batch(1000, 3, True, 9, 1700000000000, 4)[0]
    assert marker == unhex(
        "000000000000000000000042000000040259e99e410030000000000000018bcfe568000000018bcf"
        "e5680000000000000003e80003ffffffff000000012000000008000000010c00000000000900")
    records = [Record(0, 1000, b"k", b"v", [("h", b"x"), ("n", None)]),
               Record(1, 990, None, b"w", [])]
    with_headers, header = encode_batch(records, 3)
    assert with_headers == unhex(
        "0000000000000000000000490000000302b5da7e0700000000000100000000000003de0000000000"
        "0003e8ffffffffffffffffffffffffffff000000021e001400026b02760402680278026e010e0000"
        "0201027700")
    assert crc_ok(with_headers, 0, header)
    assert decode_batch(with_headers, header) == records
