from __future__ import annotations

import struct
import zlib

import lz4.frame
import pytest
import snappy
import zstandard
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from broker._pure.record_batch import iter_records
from broker.protocol.records.compression import XERIAL_MAGIC, compress, decompress
from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records.legacy import convert_legacy_message_set

DATA = b"".join(b"record %d payload " % i for i in range(20000))  # > several snappy/lz4 blocks


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip(codec):
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, memoryview(compress(codec, b""))) == b""


def test_gzip_reads_every_member_and_refuses_truncated_or_corrupt_streams():
    import gzip
    a, b = gzip.compress(DATA[:7000], mtime=0), gzip.compress(DATA[7000:9000], mtime=0)
    assert decompress(1, a + b) == DATA[:9000]  # concatenated members, as Java's GZIPInputStream reads them
    assert decompress(1, bytearray(a)) == DATA[:7000]
    flipped = bytearray(a)
    flipped[-6] ^= 0xFF  # the CRC-32 of the trailer
    for bad in (a[:-3], a[:20], b"not gzip at all", bytes(flipped)):
        with pytest.raises(CorruptRecordError):
            decompress(1, bad)


def test_snappy_writes_xerial_and_reads_raw():
    out = compress(2, DATA)
    assert out.startswith(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    assert decompress(2, snappy.compress(DATA)) == DATA


def test_lz4_frame_has_no_content_size_and_independent_blocks():
    info = lz4.frame.get_frame_info(compress(3, DATA))
    assert info["content_size"] == 0 and not info["block_linked"]


def test_zstd_without_content_size_and_multiple_frames():
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    frame = cctx.compress(DATA[:5000])
    assert decompress(4, frame) == DATA[:5000]
    obj = cctx.compressobj()
    streamed = obj.compress(DATA[5000:]) + obj.flush()
    assert decompress(4, frame + streamed) == DATA


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_is_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x00garbage that is not compressed at all")


def test_truncated_is_corrupt():
    for codec in (1, 3, 4):
        with pytest.raises(CorruptRecordError):
            decompress(codec, compress(codec, DATA)[:-10])


def test_unknown_codec():
    with pytest.raises(InvalidRecordError):
        decompress(5, b"x")
    with pytest.raises(InvalidRecordError):
        compress(7, b"x")


def _legacy_set(magic, codec, n=5):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1000 + i, key=None if i == 2 else b"k%d" % i, value=b"v%d" % i)
    return bytes(builder.build())


def _expected(magic, n=5):
    return [(i, 1000 + i if magic == 1 else -1, None if i == 2 else b"k%d" % i, b"v%d" % i) for i in range(n)]


@pytest.mark.parametrize("magic,codec", [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
def test_convert_kafka_python_legacy_sets(magic, codec):
    batch = convert_legacy_message_set(_legacy_set(magic, codec))
    records = iter_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == _expected(magic)


def _wrap_v0(codec: int, value: bytes) -> bytes:
    body = struct.pack(">bb", 0, codec) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 4, len(msg)) + msg


def test_convert_magic0_lz4_with_broken_header_checksum():
    inner = _legacy_set(0, 0)
    frame = bytearray(lz4.frame.compress(inner, store_size=False, block_linked=False))
    frame[6] ^= 0x5A  # header checksum as old Kafka computed it: not the standard one
    with pytest.raises(CorruptRecordError):
        decompress(3, bytes(frame))  # a standard decoder rejects it
    records = iter_records(convert_legacy_message_set(_wrap_v0(3, bytes(frame))))
    assert [(r.key, r.value) for r in records] == [(k, v) for _, _, k, v in _expected(0)]


def test_convert_rejects_bad_input():
    good = _legacy_set(1, 0)
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        convert_legacy_message_set(bytes(bad))  # CRC
    with pytest.raises(CorruptRecordError):
        convert_legacy_message_set(good[:-3])  # truncated
    with pytest.raises(CorruptRecordError):
        convert_legacy_message_set(_wrap_v0(1, b"not gzip"))
    assert convert_legacy_message_set(b"") == b""
