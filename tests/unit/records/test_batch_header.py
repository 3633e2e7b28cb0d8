"""The one batch-header view (``batch_header`` and its single-field accessors) and the keyed record walk of a
compacted-topic append (``null_key_records``): same answers from both twins, on valid and on garbage input."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.records.builder import build_batch, encode_record
from broker.protocol.records.compression import decompress
from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError

RECORDS = [(b"k1", b"v1", [], 1000), (None, b"v2", [], 1007), (b"k3", None, [], 1003), (None, None, [], 1001)]


def test_batch_header_is_what_validation_reports(impl):
    buf = build_batch(RECORDS, base_offset=40, producer_id=7, producer_epoch=2, base_sequence=5,
                      partition_leader_epoch=3, is_transactional=True) + build_batch(RECORDS[:1], compression=1)
    infos = impl.record_batch.validate_batches(buf)
    assert [impl.record_batch.batch_header(buf, i.position) for i in infos] == infos
    # only the 61 header bytes need be there; a chunk read from a file reports the file position
    second = infos[1].position
    assert impl.record_batch.batch_header(buf[second:second + 61], 0, 5000) == infos[1]._replace(position=5000)
    assert impl.record_batch.batch_header(memoryview(buf), second) == infos[1]


def test_batch_header_refuses_what_is_not_a_header(impl):
    batch = bytearray(build_batch(RECORDS))
    for short in (batch[:16], batch[:60], b""):
        with pytest.raises(CorruptRecordError):
            impl.record_batch.batch_header(short)
    with pytest.raises(CorruptRecordError):
        impl.record_batch.batch_header(batch, len(batch) + 10)
    batch[16] = 3
    with pytest.raises(CorruptRecordError):
        impl.record_batch.batch_header(batch)
    with pytest.raises(ValueError):
        impl.record_batch.batch_header(batch, -1)


def test_batch_header_of_legacy_entries_matches_the_scan(impl):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        for i in range(3):
            builder.append(i + 10, timestamp=5000 + i, key=b"k", value=b"v%d" % i)
        buf = bytes(builder.build())
        infos, _ = impl.record_batch.scan_batches(buf)
        assert [impl.record_batch.batch_header(buf, i.position) for i in infos] == infos
        last = infos[-1].position
        assert impl.record_batch.batch_header(buf[last:last + (26 if magic else 18)]) == infos[-1]._replace(position=0)
        with pytest.raises(CorruptRecordError):
            impl.record_batch.batch_header(buf[last:last + (25 if magic else 17)])
        assert (impl.record_batch.batch_magic(buf, last), impl.record_batch.batch_size(buf, last)) == \
            (magic, infos[-1].size)
        assert not impl.record_batch.is_transactional(buf, last) and impl.record_batch.producer_id(buf, last) == -1


def test_accessors(impl):
    rb = impl.record_batch
    batch = build_batch(RECORDS, producer_id=2**40, producer_epoch=-7 & 0x7FFF, base_sequence=0, is_transactional=True)
    assert (rb.batch_size(batch), rb.batch_magic(batch), rb.is_transactional(batch)) == (len(batch), 2, True)
    assert (rb.producer_id(batch), rb.producer_epoch(batch)) == (2**40, -7 & 0x7FFF)
    two = build_batch(RECORDS[:1]) + batch
    at = len(two) - len(batch)
    assert (rb.batch_size(two, at), rb.producer_id(two, at), rb.is_transactional(two, at)) == (len(batch), 2**40, True)
    assert (rb.producer_id(two), rb.producer_epoch(two), rb.is_transactional(two)) == (-1, -1, False)
    # without a whole header: the "no such batch" answers, as the callers need them
    assert (rb.batch_size(batch[:11]), rb.batch_size(batch[:12])) == (-1, len(batch))
    assert (rb.batch_magic(batch[:16]), rb.batch_magic(batch[:17])) == (-1, 2)
    assert (rb.is_transactional(batch[:60]), rb.producer_id(batch[:60]), rb.producer_epoch(batch[:60])) == \
        (False, -1, -1)
    not_v2 = bytearray(batch)
    not_v2[16] = 1
    assert (rb.is_transactional(not_v2), rb.producer_id(not_v2), rb.producer_epoch(not_v2)) == (False, -1, -1)
    for fn in (rb.batch_size, rb.batch_magic, rb.is_transactional, rb.producer_id, rb.producer_epoch):
        with pytest.raises(ValueError):
            fn(batch, -1)


@pytest.mark.parametrize("codec", [0, 1, 3])
def test_null_key_records_names_the_keyless(impl, codec):
    batch = build_batch(RECORDS, compression=codec)
    records = batch[61:] if codec == 0 else decompress(codec, batch[61:])
    assert impl.record_batch.null_key_records(records, 4) == [1, 3]
    assert impl.record_batch.null_key_records(b"", 0) == []
    keyed = b"".join(encode_record(i, 0, b"k", b"v") for i in range(3))
    assert impl.record_batch.null_key_records(keyed, 3) == []
    with pytest.raises(InvalidRecordError):
        impl.record_batch.null_key_records(records, 5)
    with pytest.raises(InvalidRecordError):
        impl.record_batch.null_key_records(records, -1)
    with pytest.raises(CorruptRecordError):
        impl.record_batch.null_key_records(b"\x80", 1)


# ---- differential ----------------------------------------------------------------------------------------

def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return ("error", type(e))


@st.composite
def _headers(draw):
    """Batches, legacy-looking entries and garbage, some with their header fields overwritten."""
    kind = draw(st.sampled_from(["batch", "garbage", "patched"]))
    if kind == "garbage":
        return draw(st.binary(max_size=90))
    buf = bytearray(build_batch(draw(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=4)),
                                                          st.binary(max_size=4)), max_size=3)),
                                producer_id=draw(st.integers(-1, 2**62)), producer_epoch=draw(st.integers(-1, 2**15 - 1)),
                                is_transactional=draw(st.booleans())))
    if kind == "patched":
        struct.pack_into(">i", buf, 8, draw(st.sampled_from([-2**31, -12, -1, 0, 5, 2**31 - 1])))
        buf[16] = draw(st.sampled_from([0, 1, 2, 3, 255]))
        buf[22] = draw(st.integers(0, 255))
        del buf[draw(st.integers(0, len(buf))):]
    return bytes(buf)


@settings(max_examples=300)
@given(_headers(), st.integers(0, 70), st.integers(-1, 10**6))
def test_differential_header_view(both, buf, position, file_position):
    pure, native = both
    assert _outcome(pure.record_batch.batch_header, buf, position, file_position) == \
        _outcome(native.record_batch.batch_header, buf, position, file_position)
    for name in ("batch_size", "batch_magic", "is_transactional", "producer_id", "producer_epoch"):
        assert _outcome(getattr(pure.record_batch, name), buf, position) == \
            _outcome(getattr(native.record_batch, name), buf, position), name


@settings(max_examples=200, deadline=None)  # no timing: the CI machine is shared
@given(st.one_of(st.binary(max_size=80),
                 st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=3)), st.binary(max_size=3)), max_size=4)
                 .map(lambda rs: b"".join(encode_record(i, 0, k, v) for i, (k, v) in enumerate(rs)))),
       st.integers(-1, 5))
def test_differential_null_key_records(both, data, count):
    pure, native = both
    assert _outcome(pure.record_batch.null_key_records, data, count) == \
        _outcome(native.record_batch.null_key_records, data, count)
    # the same verdict on framing as validate_records
    assert _outcome(pure.record_batch.validate_records, data, count)[0] == \
        _outcome(pure.record_batch.null_key_records, data, count)[0]
