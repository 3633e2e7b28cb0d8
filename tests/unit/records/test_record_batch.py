from __future__ import annotations

import inspect
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.accel import load
from broker.protocol.records.batch_info import BatchInfo
from broker.protocol.records.builder import build_batch, encode_record
from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError

RECORDS = [(b"k1", b"v1", [("h", b"x"), ("n", None)], 1000), (None, b"v2", [], 1007), (b"k3", None, [], 1003)]


def _fix_crc(buf: bytearray, pos: int = 0) -> bytearray:
    crc = load("crc32c", "pure").crc32c(bytes(buf[pos + 21:]))
    struct.pack_into(">I", buf, pos + 17, crc)
    return buf


def _raw_batch(body: bytes, count: int, last_offset_delta: int | None = None, attributes: int = 0) -> bytearray:
    """A magic-2 batch with arbitrary record bytes and a valid CRC."""
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    after = struct.pack(">hiqqqhii", attributes, lod, 0, 0, -1, -1, -1, count) + body
    return _fix_crc(bytearray(struct.pack(">qiibI", 0, 9 + len(after), -1, 2, 0) + after))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_build_validate_iter_round_trip(impl, codec):
    batch = build_batch(RECORDS, base_offset=42, compression=codec, producer_id=7, producer_epoch=1,
                        base_sequence=10, partition_leader_epoch=3)
    [info] = impl.record_batch.validate_batches(batch)
    assert isinstance(info, BatchInfo)
    assert (info.position, info.size, info.base_offset, info.last_offset) == (0, len(batch), 42, 44)
    assert (info.magic, info.compression, info.record_count, info.partition_leader_epoch) == (2, codec, 3, 3)
    assert (info.base_timestamp, info.max_timestamp, info.producer_id, info.base_sequence) == (1000, 1007, 7, 10)
    assert not info.is_transactional and not info.is_control and info.timestamp_type == 0
    records = impl.record_batch.iter_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in records] == [
        (42, 1000, b"k1", b"v1", [("h", b"x"), ("n", None)], 10),
        (43, 1007, None, b"v2", [], 11),
        (44, 1003, b"k3", None, [], 12),
    ]


def test_flags_and_empty_batch(impl):
    batch = build_batch([], is_transactional=True, is_control=True, timestamp_type=1)
    [info] = impl.record_batch.validate_batches(batch)
    assert info.is_transactional and info.is_control and info.timestamp_type == 1
    assert info.record_count == 0 and impl.record_batch.iter_records(batch) == []


def test_multiple_batches_and_views(impl):
    buf = build_batch(RECORDS) + build_batch(RECORDS[:1], compression=1)
    infos = impl.record_batch.validate_batches(memoryview(buf))
    assert [i.position for i in infos] == [0, infos[0].size]
    assert infos[1].end == len(buf)
    assert impl.record_batch.validate_batches(b"") == []


def _expect(impl, buf, exc, check_crc=True):
    with pytest.raises(exc):
        impl.record_batch.validate_batches(buf, check_crc)


def test_validate_errors(impl):
    good = bytearray(build_batch(RECORDS))
    _expect(impl, good[:-1], CorruptRecordError)  # truncated
    _expect(impl, good[:10], CorruptRecordError)  # truncated header
    bad = bytearray(good)
    bad[good.index(b"v1")] ^= 1  # payload byte: framing intact
    _expect(impl, bad, CorruptRecordError)  # CRC
    assert impl.record_batch.validate_batches(bad, False)[0].record_count == 3
    bad = bytearray(good)
    bad[16] = 1
    _expect(impl, bad, CorruptRecordError)  # magic
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, 48)
    _expect(impl, bad, CorruptRecordError)  # length below minimum
    bad = _fix_crc(bytearray(good))
    struct.pack_into(">h", bad, 21, 5)
    _expect(impl, _fix_crc(bad), CorruptRecordError)  # unknown codec
    bad = bytearray(good)
    struct.pack_into(">i", bad, 57, -1)
    _expect(impl, _fix_crc(bad), InvalidRecordError)  # negative count
    bad = bytearray(good)
    struct.pack_into(">i", bad, 57, 4)
    _expect(impl, _fix_crc(bad), InvalidRecordError)  # count above records
    bad = bytearray(good)
    struct.pack_into(">ii", bad, 53, -1, 2)
    _expect(impl, _fix_crc(bad), InvalidRecordError)  # records left over
    bad = bytearray(good)
    struct.pack_into(">i", bad, 23, 5)
    _expect(impl, _fix_crc(bad), InvalidRecordError)  # lastOffsetDelta


def test_offset_deltas_must_be_sequential(impl):
    body = encode_record(0, 0, b"a", b"b") + encode_record(5, 0, b"a", b"b")
    _expect(impl, _raw_batch(body, 2), InvalidRecordError)
    with pytest.raises(InvalidRecordError):
        impl.record_batch.validate_records(body, 2)
    impl.record_batch.validate_records(body[:len(body) // 2], 1)


def test_malformed_record_framing(impl):
    rec = bytearray(encode_record(0, 0, b"key", b"value"))
    rec[0] += 2  # record length claims more than its fields
    _expect(impl, _raw_batch(bytes(rec) + b"\x00\x00", 1), CorruptRecordError)
    bad_key = b"\x0a\x00\x00\x00" + b"\x03" + b"xxxxx"  # key length -2
    _expect(impl, _raw_batch(bad_key, 1), CorruptRecordError)
    with pytest.raises(CorruptRecordError):
        impl.record_batch.validate_records(b"\x80", 1)


def test_compressed_batch_header_only_then_validate_records(impl):
    from broker.protocol.records.compression import compress
    body = encode_record(0, 0, b"a", b"b") + encode_record(7, 0, b"a", b"b")
    batch = _raw_batch(compress(1, body), 2, attributes=1)
    assert impl.record_batch.validate_batches(batch)[0].record_count == 2  # header checks only
    with pytest.raises(InvalidRecordError):
        impl.record_batch.iter_records(batch)


def test_scan_torn_tail_and_ranges(impl):
    a, b = build_batch(RECORDS, base_offset=0), build_batch(RECORDS[:1], base_offset=3)
    buf = a + b + a[:40]
    infos, end = impl.record_batch.scan_batches(buf)
    assert [i.base_offset for i in infos] == [0, 3] and end == len(a) + len(b)
    infos, end = impl.record_batch.scan_batches(buf, len(a), len(a) + len(b))
    assert [i.base_offset for i in infos] == [3] and end == len(a) + len(b)
    infos, end = impl.record_batch.scan_batches(buf, 0, len(a) + 5)
    assert len(infos) == 1 and end == len(a)
    corrupt = bytearray(a + b)
    corrupt[len(a) + 30] ^= 0xFF
    assert impl.record_batch.scan_batches(corrupt)[1] == len(a) + len(b)  # header-only: CRC not checked
    assert impl.record_batch.scan_batches(corrupt, check_crc=True)[1] == len(a)
    assert impl.record_batch.scan_batches(b"\x00" * 5) == ([], 0)


def test_scan_legacy_entries(impl):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        for i in range(3):
            builder.append(i + 10, timestamp=5000 + i, key=b"k", value=b"v%d" % i)
        buf = bytes(builder.build())
        infos, end = impl.record_batch.scan_batches(buf + buf[:20], check_crc=True)
        assert end == len(buf)
        assert [(i.magic, i.base_offset, i.last_offset) for i in infos] == [(magic, o, o) for o in (10, 11, 12)]
        assert infos[0].max_timestamp == (5000 if magic == 1 else -1)
        bad = bytearray(buf)
        bad[-1] ^= 1
        assert impl.record_batch.scan_batches(bad, check_crc=True)[1] == infos[2].position


def test_in_place_stamps_keep_crc_valid(impl):
    buf = bytearray(build_batch(RECORDS) * 2)
    size = len(buf) // 2
    impl.record_batch.stamp_base_offset(buf, size, 1000)
    impl.record_batch.stamp_partition_leader_epoch(buf, size, 9)
    impl.record_batch.set_log_append_time(buf, size, 123456)
    infos = impl.record_batch.validate_batches(buf)  # CRC checked
    assert (infos[1].base_offset, infos[1].partition_leader_epoch, infos[1].max_timestamp) == (1000, 9, 123456)
    assert infos[1].timestamp_type == 1 and infos[0].timestamp_type == 0
    assert [r.timestamp for r in impl.record_batch.iter_records(buf[size:])] == [123456] * 3
    with pytest.raises(TypeError):
        impl.record_batch.stamp_base_offset(bytes(buf), 0, 1)
    with pytest.raises(ValueError):
        impl.record_batch.stamp_base_offset(buf, size + 1, 1)
    with pytest.raises(ValueError):
        impl.record_batch.set_log_append_time(buf[:-1], size, 1)


def test_assign_offsets_stamps_every_batch_in_one_pass(impl):
    buf = bytearray(build_batch(RECORDS) + build_batch(RECORDS[:1], compression=1) + build_batch(RECORDS[:2]))
    sizes = [i.size for i in impl.record_batch.validate_batches(buf)]
    appended, max_ts, offset_of_max_ts, num_records, valid = impl.record_batch.assign_offsets(buf, 100, 7, True, -1)
    assert appended == [(102, 1007, sizes[0]), (103, 1000, sizes[1]), (105, 1007, sizes[2])]
    assert (max_ts, offset_of_max_ts, num_records, valid) == (1007, 102, 6, len(buf))
    infos = impl.record_batch.validate_batches(buf)  # CRCs still valid: offsets and epochs lie outside them
    assert [(i.base_offset, i.partition_leader_epoch, i.timestamp_type) for i in infos] == [(100, 7, 0), (103, 7, 0),
                                                                                             (104, 7, 0)]


def test_assign_offsets_log_append_time_and_kept_epoch(impl):
    buf = bytearray(build_batch(RECORDS, partition_leader_epoch=3) * 2)
    appended, max_ts, offset_of_max_ts, num_records, _ = impl.record_batch.assign_offsets(buf, 0, 9, False, 5000)
    assert [a[:2] for a in appended] == [(2, 5000), (5, 5000)] and (max_ts, offset_of_max_ts) == (5000, 2)
    infos = impl.record_batch.validate_batches(buf)  # the CRC was recomputed for the new maxTimestamp
    assert [(i.partition_leader_epoch, i.timestamp_type, i.max_timestamp) for i in infos] == [(3, 1, 5000)] * 2


def test_assign_offsets_refuses_what_stamping_refuses(impl):
    batch = bytearray(build_batch(RECORDS))
    assert impl.record_batch.assign_offsets(bytearray(), 0, 0, True, -1) == ([], -1, -1, 0, 0)
    with pytest.raises(TypeError):
        impl.record_batch.assign_offsets(bytes(batch), 0, 0, True, -1)
    with pytest.raises(ValueError):
        impl.record_batch.assign_offsets(batch + batch[:30], 0, 0, True, -1)  # a torn second batch
    bad = bytearray(batch)
    bad[16] = 1
    with pytest.raises(ValueError):
        impl.record_batch.assign_offsets(bad, 0, 0, True, -1)


def test_kafka_python_v2_batch_parity(impl):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    for codec in (0, 1, 2, 3, 4):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=5, producer_epoch=0, base_sequence=0, batch_size=1 << 20)
        for i in range(20):
            builder.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * i, headers=[("h", b"%d" % i)])
        buf = bytes(builder.build())
        [info] = impl.record_batch.validate_batches(buf)
        assert (info.record_count, info.compression, info.producer_id) == (20, codec, 5)
        records = impl.record_batch.iter_records(buf)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
            (i, 1000 + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)]) for i in range(20)]


def test_kafka_python_reads_our_batches():
    from kafka.record.default_records import DefaultRecordBatch
    for codec in (0, 1, 2, 3, 4):
        batch = DefaultRecordBatch(build_batch(RECORDS, base_offset=5, compression=codec))
        assert batch.validate_crc()
        assert [(r.offset, r.key, r.value, list(r.headers)) for r in batch] == [
            (5 + i, k, v, [(hk, hv) for hk, hv in h]) for i, (k, v, h, _) in enumerate(RECORDS)]


def test_twins_expose_same_public_names():
    for name in ("crc32c", "varint", "record_batch", "offset_index"):
        pure, native = load(name, "pure"), load(name, "native")
        public = {n for n in dir(pure) if not n.startswith("_") and callable(getattr(pure, n))
                  and getattr(getattr(pure, n), "__module__", None) == pure.__name__}
        native_public = {n for n in dir(native) if not n.startswith("_") and callable(getattr(native, n))
                         and getattr(getattr(native, n), "__module__", None) == native.__name__}
        assert public == native_public, name
        for fn in public:  # same parameter names, kinds and defaults (binding=True gives natives signatures)
            sig_p, sig_n = inspect.signature(getattr(pure, fn)), inspect.signature(getattr(native, fn))
            assert [(q.name, q.kind, q.default) for q in sig_p.parameters.values()] == \
                [(q.name, q.kind, q.default) for q in sig_n.parameters.values()], (name, fn)


# ---- differential: native == pure on valid and corrupted input -------------------------------------------

def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return ("error", type(e))


_record = st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.one_of(st.none(), st.binary(max_size=40)),
                    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                             max_size=2),
                    st.integers(0, 2**40))


@st.composite
def _buffers(draw):
    batches = [build_batch(draw(st.lists(_record, max_size=4)), base_offset=draw(st.integers(0, 2**40)),
                           compression=draw(st.sampled_from([0, 0, 0, 1, 3])))
               for _ in range(draw(st.integers(1, 3)))]
    buf = bytearray(b"".join(batches))
    for _ in range(draw(st.integers(0, 3))):  # corruptions
        kind = draw(st.sampled_from(["flip", "truncate", "set", "fixcrc"]))
        if kind == "flip" and buf:
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] ^= draw(st.integers(1, 255))
        elif kind == "truncate":
            del buf[draw(st.integers(0, len(buf))):]
        elif kind == "set" and len(buf) > 61:
            i = draw(st.integers(61, len(buf) - 1))
            buf[i] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif kind == "fixcrc" and len(buf) >= 61 and struct.unpack_from(">i", buf, 8)[0] + 12 <= len(buf):
            end = struct.unpack_from(">i", buf, 8)[0] + 12
            if end >= 21:
                struct.pack_into(">I", buf, 17, load("crc32c", "pure").crc32c(bytes(buf[21:end])))
    return bytes(buf)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(_buffers(), st.booleans())
def test_differential_validate_scan(both, buf, check_crc):
    pure, native = both
    assert _outcome(pure.record_batch.validate_batches, buf, check_crc) == \
        _outcome(native.record_batch.validate_batches, buf, check_crc)
    assert _outcome(pure.record_batch.scan_batches, buf, 0, -1, check_crc) == \
        _outcome(native.record_batch.scan_batches, buf, 0, -1, check_crc)
    assert _outcome(pure.record_batch.iter_records, buf) == _outcome(native.record_batch.iter_records, buf)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(_buffers(), st.integers(0, 2**40), st.integers(-1, 2**31 - 1), st.booleans(), st.sampled_from([-1, 0, 2**41]))
def test_differential_assign_offsets(both, buf, base_offset, epoch, stamp_epoch, append_time):
    pure, native = both
    pure_buf, native_buf = bytearray(buf), bytearray(buf)
    assert _outcome(pure.record_batch.assign_offsets, pure_buf, base_offset, epoch, stamp_epoch, append_time) == \
        _outcome(native.record_batch.assign_offsets, native_buf, base_offset, epoch, stamp_epoch, append_time)
    assert pure_buf == native_buf


@settings(max_examples=200)
@given(st.binary(max_size=80), st.integers(-1, 4))
def test_differential_validate_records_garbage(both, data, count):
    pure, native = both
    assert _outcome(pure.record_batch.validate_records, data, count) == \
        _outcome(native.record_batch.validate_records, data, count)


_RECORD = st.tuples(st.one_of(st.none(), st.binary(max_size=6)), st.one_of(st.none(), st.binary(max_size=8)),
                    st.lists(st.tuples(st.sampled_from(["h", "hk"]), st.one_of(st.none(), st.binary(max_size=4))),
                             max_size=2))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_RECORD, max_size=6), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
       st.integers(-1, 1), st.integers(0, 10**6))
def test_differential_walk_of_damaged_records(both, records, flips, count_shift, cut):
    """The record walk of both twins on real record bytes with a few bytes changed, the count off by one or the
    end cut: the same outcome, null-key indexes included (garbage alone rarely gets past the first record)."""
    pure, native = both
    body = bytearray(build_batch([(k, v, h, 1000 + i) for i, (k, v, h) in enumerate(records)])[61:])
    for at, byte in flips:
        if body:
            body[at % len(body)] = byte
    if cut % 7 == 0 and body:
        del body[cut % len(body):]
    count = len(records) + count_shift
    for fn in ("validate_records", "null_key_records"):
        assert _outcome(getattr(pure.record_batch, fn), bytes(body), count) == \
            _outcome(getattr(native.record_batch, fn), bytes(body), count)


@settings(max_examples=100)
@given(st.binary(max_size=120), st.booleans())
def test_differential_scan_garbage(both, data, check_crc):
    pure, native = both
    assert _outcome(pure.record_batch.scan_batches, data, 0, -1, check_crc) == \
        _outcome(native.record_batch.scan_batches, data, 0, -1, check_crc)
