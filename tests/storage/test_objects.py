"""The object layout (S3): flush objects, manifests, merging, recovery of unlisted objects.

Runs on SeaweedFS S3 and, faster, on a local directory treated as an object store."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import LocalStorage, LogConfig, PartitionLog, Storage, open_storage
from bmq.storage.counting import CountingStorage
from bmq.storage.factory import storage_options
from bmq.storage.log.object_layout import TAIL_OBJECTS, ObjectLayout, object_names
from bmq.storage.segment import segment_stem

from .batches import make_batch, sized_batch, split, with_offset
from .conftest import s3_storage
from .helpers import append, read_batches

CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=300, retention_ms=-1)


@pytest.fixture(params=["local-objects", "s3"])
def ostorage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "s3":
        return s3_storage(request.getfixturevalue("seaweedfs"))
    store = copy.copy(LocalStorage(str(tmp_path / "data")))
    store.supports_append = False
    return store


def _raw(log: PartitionLog) -> list[bytes]:
    return [raw for _, raw in read_batches(log)]


def _manifest(storage: Storage, epoch: int) -> dict[str, object]:
    return dict(json.loads(storage.read_all(f"t/0/manifest/{epoch:010d}.json")))


def _object_each(log: PartitionLog, tags: range) -> list[bytes]:
    """One 500-byte batch per tag, each flushed into an object of its own; the batches."""
    stored = []
    for tag in tags:
        b = sized_batch(500, tag)
        stored.append(with_offset(b, append(log, b)[0]))
        log.flush()
    return stored


def test_every_flush_is_one_object_listed_by_the_manifest(ostorage: Storage) -> None:
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=3)
    assert isinstance(log.layout, ObjectLayout)
    stored = []
    for i in range(5):
        for j in range(3):
            b = sized_batch(400, 10 * i + j)
            base, _ = append(log, b)
            stored.append(with_offset(b, base))
        assert log.flush() == 3 * (i + 1)
        # acks=all: the object and the manifest naming it are stored when flush returns.
        manifest = _manifest(ostorage, 3)
        assert manifest["high_watermark"] == 3 * (i + 1)
        assert len(manifest["segments"]) == i + 1  # type: ignore[arg-type]
    assert object_names(log) == [f"{segment_stem(3 * i, 3, i)}.log" for i in range(5)]
    assert _raw(log) == stored
    # One read spans objects while max_bytes allows.
    assert bytes(log.read(0, 1 << 20)) == b"".join(stored)
    assert bytes(log.read(4, 1000)) == stored[4] + stored[5]
    log.close()
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=3)
    assert _raw(log) == stored
    log.close()


def test_merging_rewrites_small_objects(ostorage: Storage) -> None:
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=1)
    stored = []
    for i in range(24):
        b = sized_batch(500, i, timestamp=100 + i)
        base, _ = append(log, b)
        stored.append(with_offset(b, base))
        log.flush()
    assert len(object_names(log)) == 24
    reader = PartitionLog.open_reader(ostorage, "t", 0, CONFIG)
    assert reader.high_watermark == 24
    merged = log.merge_objects()
    assert merged == 24
    assert len(log.segments.by_offset) - 1 == 2   # 6000-byte objects out of 500-byte ones
    assert _raw(log) == stored
    assert [bytes(log.read(o, 1)) for o in range(24)] == stored
    assert log.offset_for_timestamp(110) == (10, 110)
    # A reader still on the old manifest reads the old objects (deleted only next time) ...
    assert bytes(reader.read(3, 1)) == stored[3]
    log.merge_objects()                            # ... which empties the trash
    assert len(object_names(log)) == 2
    assert bytes(reader.read(5, 1)) == stored[5]   # refreshes after a miss
    assert reader.refresh() is False
    assert [bytes(reader.read(o, 1)) for o in range(24)] == stored
    log.close()
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=1)
    assert _raw(log) == stored
    assert log.offset_for_timestamp(117) == (17, 117)
    assert log.delete_records(13) == 13
    assert _raw(log) == stored[13:]
    assert log.apply_retention(0) == 0
    log.close()
    reader.close()


def test_merging_keeps_the_epoch_history(ostorage: Storage) -> None:
    """A new owner merges objects of each leader epoch apart, the old owner's under their own
    epoch: OffsetForLeaderEpoch still finds where the new epoch began (merged across it, the
    old epoch 'ended' at offset 0, and librdkafka consumers checking their position after the
    move reset to the earliest offset)."""
    old = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=1)
    stored = _object_each(old, range(6))
    old.close()
    new = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=2)
    stored += _object_each(new, range(6, 12))
    assert new.merge_objects() == 12
    assert [(s.base, s.data_epoch) for s in new.segments.by_offset[:-1]] == [(0, 1), (6, 2)]
    assert _raw(new) == stored
    new.close()
    for log in (PartitionLog.open_reader(ostorage, "t", 0, CONFIG),
                PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=3)):
        assert log.end_offset_for_epoch(1, current_epoch=3) == (1, 6)
        assert log.end_offset_for_epoch(2, current_epoch=3) == (2, 12)
        assert _raw(log) == stored
        log.close()


def test_a_reader_never_goes_back_to_a_new_owners_claim(ostorage: Storage) -> None:
    """A new owner's claim copies the manifest as it read it; the old owner may have
    acknowledged more since (its fence check ran before the claim). A reader that already
    follows those records keeps them until the new owner's own manifest (applied, the claim
    took acknowledged records back from fetches: OFFSET_OUT_OF_RANGE, consumers reset)."""
    old = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=1)
    stored = _object_each(old, range(3))
    as_read = _manifest(ostorage, 1)             # what the new owner read: offsets 0-2
    stored += _object_each(old, range(3, 6))
    reader = PartitionLog.open_reader(ostorage, "t", 0, CONFIG)
    assert reader.high_watermark == 6
    claim = {**as_read, "epoch": 2, "data_epoch": 1}
    ostorage.write_atomic("t/0/manifest/0000000002.json", json.dumps(claim).encode())
    assert reader.refresh() is False
    assert reader.high_watermark == 6 and _raw(reader) == stored
    new = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=2)   # recovers offsets 3-5
    assert reader.refresh() is True
    assert reader.high_watermark == 6 and _raw(reader) == stored
    new.close()
    old.close()
    reader.close()


def test_a_reader_follows_tails_without_listing_or_reading_manifests(ostorage: Storage) -> None:
    """What a proxy does after each notice: the owner's tail names its newest objects, so the
    reader's view grows with no LIST and no manifest GET; only reading the data costs GETs.
    A tail that skips objects, or one after a merge, makes it re-read the manifest."""
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=2)
    requests = [0]

    def count() -> None:
        requests[0] += 1

    reader = PartitionLog.open_reader(CountingStorage(ostorage, count), "t", 0, CONFIG)
    stored: list[bytes] = []

    def flush(n: int) -> None:
        for _ in range(n):
            b = sized_batch(300, len(stored))
            base, _ = append(log, b)
            stored.append(with_offset(b, base))
            log.flush()

    flush(1)
    assert reader.advance(log.tail())              # an empty view re-reads the manifest once
    for round_ in range(6):
        flush(1 + round_ % 3)                      # up to three objects between two notices
        before = requests[0]
        assert reader.advance(log.tail())
        assert requests[0] == before               # no storage request at all
        assert reader.high_watermark == len(stored)
        assert [bytes(reader.read(o, 1)) for o in range(len(stored))] == stored
    flush(TAIL_OBJECTS + 1)                        # more than a tail lists: re-read the manifest
    before = requests[0]
    assert reader.advance(log.tail())
    assert requests[0] > before
    assert [bytes(reader.read(o, 1)) for o in range(len(stored))] == stored
    assert log.merge_objects() > 0               # merged objects replace the newest ones
    flush(1)
    assert reader.advance(log.tail())
    assert reader.high_watermark == len(stored)
    log.merge_objects()                          # the merged-away objects are deleted
    assert [bytes(reader.read(o, 1)) for o in range(len(stored))] == stored
    reader.close()
    log.close()


def test_a_late_tail_takes_nothing_back(ostorage: Storage) -> None:
    """Notices may be applied out of order (a catch-up's tail, or a refresh after a tail that
    did not continue the view, then an older notice): an older tail changes neither the high
    watermark nor the last stable offset, or read_committed consumers stop at its end until
    the next notice, which a partition written no more never sends."""
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=2)
    tails = []
    for i in range(2):
        append(log, sized_batch(300, i))
        log.flush()
        tails.append(log.tail())
    for first in (tails[1], None):      # the newer tail, or a refresh, comes first
        reader = PartitionLog.open_reader(ostorage, "t", 0, CONFIG)
        reader.advance(first)
        assert reader.advance(tails[0]) is False
        assert reader.high_watermark == reader.last_stable_offset() == 2
        reader.close()
    log.close()


def test_unlisted_objects_of_the_data_epoch_are_recovered(ostorage: Storage) -> None:
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=2)
    stored = []
    for i in range(3):
        b = make_batch([b"v%d" % i])
        append(log, b)
        stored.append(with_offset(b, i))
        log.flush()
    log._shut()
    # A crash between an object's PUT and the manifest's: the object exists, unlisted.
    extra = with_offset(make_batch([b"unlisted"]), 3)
    ostorage.write_atomic(f"t/0/{segment_stem(3, 2, 3)}.log", extra)
    # Objects that must not be taken: a stale epoch's, one that does not continue the
    # offsets, one with a bad CRC.
    ostorage.write_atomic(f"t/0/{segment_stem(3, 1, 50)}.log",
                          with_offset(make_batch([b"stale"]), 3))
    ostorage.write_atomic(f"t/0/{segment_stem(9, 2, 4)}.log",
                          with_offset(make_batch([b"gap"]), 9))
    bad = bytearray(with_offset(make_batch([b"bad crc"]), 4))
    bad[-2] ^= 0xFF
    ostorage.write_atomic(f"t/0/{segment_stem(4, 2, 5)}.log", bytes(bad))
    log = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=5)
    assert _raw(log) == [*stored, extra]
    assert log.high_watermark == 4
    assert f"{segment_stem(3, 1, 50)}.log" in object_names(log)
    log.checkpoint()    # garbage goes with the first merge, not during the takeover
    assert f"{segment_stem(3, 1, 50)}.log" not in object_names(log)   # a fenced epoch's
    b = make_batch([b"next"])
    append(log, b)
    log.flush()
    assert _raw(log) == [*stored, extra, with_offset(b, 4)]
    log.close()


def test_stale_owner_manifests_and_objects_are_ignored(ostorage: Storage) -> None:
    a = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=1)
    append(a, make_batch([b"a0"]))
    a.flush()
    b = PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=2)
    a.fence_check = lambda: None  # type: ignore[method-assign]
    append(a, make_batch([b"a1-stale"]))
    a.flush()                        # PUTs an object and the epoch-1 manifest
    assert _manifest(ostorage, 1)["high_watermark"] == 2
    assert b.high_watermark == 1
    reader = PartitionLog.open_reader(ostorage, "t", 0, CONFIG)
    assert reader.high_watermark == 1 and reader.leader_epoch == 2
    append(b, make_batch([b"b1"]))
    b.flush()
    assert reader.refresh() and reader.high_watermark == 2
    (header,) = split(reader.read(1, 1000))
    assert bytes(reader.read(1, 1000)).endswith(b"b1\x00")
    assert header.base_offset == 1
    with pytest.raises(KafkaError) as info:
        PartitionLog.open(ostorage, "t", 0, CONFIG, epoch=1)
    assert info.value.code == ErrorCode.FENCED_LEADER_EPOCH
    reader.close()
    b.close()
    a._shut()


def test_s3_url_uses_the_standard_environment(seaweedfs: object, monkeypatch:
                                              pytest.MonkeyPatch) -> None:
    from tests.seaweedfs import SeaweedFS

    assert isinstance(seaweedfs, SeaweedFS)
    monkeypatch.setenv("AWS_ENDPOINT_URL", seaweedfs.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweedfs.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweedfs.secret_key)
    url = seaweedfs.url(f"env/{os.getpid()}")
    assert storage_options(url)["config"]["endpoint"] == seaweedfs.endpoint_url
    storage = open_storage(url)
    assert not storage.supports_append
    storage.write_atomic("a/b", b"hello")
    assert storage.read_all("a/b") == b"hello"
    assert storage.read_range("a/b", 1, 3) == b"ell"
    assert storage.list("a") == ["b"]
    storage.delete_tree("a")
    assert storage.list("a") == []


@pytest.mark.parametrize("interval_ms", [0, 1500])
def test_object_store_flushes_of_a_partition_are_paced(ostorage: Storage,
                                                      interval_ms: int) -> None:
    """``object_flush_interval_ms``: acks=all appends arriving within the interval share one
    flush (one object), every one is still acknowledged, and a drain waits for a deferred
    flush. With 0 every append that finds the writer idle gets its own object."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from bmq.writepath.partitions import PartitionManager

    async def run() -> tuple[int, int]:
        with ThreadPoolExecutor(4) as executor:
            manager = PartitionManager(ostorage, executor, None, interval_ms)
            partition = await manager.open("t", 0, CONFIG)
            acks = []
            for i in range(8):
                _, last = append(partition.log, make_batch([b"v%d" % i]))
                partition.schedule_flush()
                acks.append(partition.durable(last))
                await asyncio.sleep(0.1)  # the previous flush is done by then
            await asyncio.wait_for(asyncio.gather(*acks), 10)
            flushed = len(object_names(partition.log))
            append(partition.log, make_batch([b"last"]))
            partition.schedule_flush()
            await asyncio.wait_for(partition.drain(), 10)
            assert partition.log.high_watermark == 9 and partition.log.pending_bytes() == 0
            partition.log.close()
            return flushed, len(object_names(partition.log))

    flushed, after_drain = asyncio.run(run())
    if interval_ms:
        assert flushed <= 2          # the first append at once, the other 7 together
    else:
        assert flushed >= 6          # (a slow flush under load may take two at once)
    assert after_drain == flushed + 1


def test_s3_failures_are_os_errors(seaweedfs: object) -> None:
    """The log treats storage failures as OSError (retry a checkpoint, fail a flush with
    KAFKA_STORAGE_ERROR): an S3 store that cannot be reached or refuses the credentials raises
    OSError, and a missing object is still FileNotFoundError."""
    from tests.conftest import free_port
    from tests.seaweedfs import SeaweedFS

    assert isinstance(seaweedfs, SeaweedFS)
    unreachable = open_storage(f"s3://{seaweedfs.bucket}/down", {
        **seaweedfs.storage_options(), "endpoint_url": f"http://127.0.0.1:{free_port()}"})
    with pytest.raises(OSError) as refused:
        unreachable.write_atomic("a", b"x")
    assert not isinstance(refused.value, FileNotFoundError)
    assert "max_retries: 5" in str(refused.value)
    impatient = open_storage(f"s3://{seaweedfs.bucket}/down", {
        **seaweedfs.storage_options(), "endpoint_url": f"http://127.0.0.1:{free_port()}",
        "max_retries": "0"})
    with pytest.raises(OSError, match="max_retries: 0,"):
        impatient.write_atomic("a", b"x")
    wrong_secret = open_storage(seaweedfs.url("denied"), {
        **seaweedfs.storage_options(), "secret": "not-the-secret"})
    with pytest.raises(PermissionError):
        wrong_secret.write_atomic("a", b"x")
    storage = s3_storage(seaweedfs)
    with pytest.raises(FileNotFoundError):
        storage.read_all("missing")
    with pytest.raises(FileNotFoundError):
        storage.read_range("missing", 0, 10)
