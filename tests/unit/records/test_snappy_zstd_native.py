"""Snappy and zstd: the native decoders (cramjam's decompress_raw_into per raw snappy block, libzstd's
ZSTD_decompressDCtx per zstd frame, into a reused buffer, records walked in the same call) and the pure path
(compression.decompress: python-snappy, zstandard streaming) agree on every framing Kafka's clients write and on
the odd ones the native decoders leave to the pure path; corrupt data raises CorruptRecordError (or, for records a
valid stream does not frame, InvalidRecordError) in both twins, never crashes."""
from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import threading
from typing import Any, Callable

import cramjam
import pytest
import snappy
import zstandard

from broker.accel import load
from broker.protocol.records import compression
from broker.protocol.records.batch_info import RECORD_BATCH_OVERHEAD
from broker.protocol.records.builder import build_batch, encode_record
from broker.protocol.records.compression import GZIP, LZ4, NONE, SNAPPY, XERIAL_MAGIC, ZSTD
from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError

NATIVE = load("record_batch", "native")
PURE = load("record_batch", "pure")
TWINS = [PURE, NATIVE]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

_rng = random.Random(1919)
DATA = {
    "text": b"".join(b"record %d payload " % i for i in range(40000)),
    "random": _rng.randbytes(300_000),
    "mixed": b"".join(_rng.randbytes(5000) + bytes(20000) for _ in range(12)),
    "small": b"abc" * 7,
    "one": b"x",
    "empty": b"",
}


def _no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the native twin's fallback to compression.decompress fail, to prove it decoded the data itself."""
    def boom(codec: int, data: Any) -> bytes:
        raise AssertionError("native twin fell back to compression.decompress")
    monkeypatch.setattr(NATIVE, "_decompress", boom)


def _fallbacks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the native twin's calls of its fallback (compression.decompress)."""
    calls: list[int] = []

    def counting(codec: int, data: Any) -> bytes:
        calls.append(codec)
        return compression.decompress(codec, data)
    monkeypatch.setattr(NATIVE, "_decompress", counting)
    return calls


def _outcome(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except (CorruptRecordError, InvalidRecordError) as e:
        return (type(e).__name__,)


def _flip(data: bytes, pos: int) -> bytes:
    b = bytearray(data)
    b[pos] ^= 0x5A
    return bytes(b)


def test_native_decoders_are_loaded():
    assert NATIVE.SNAPPY_NATIVE is True and NATIVE.ZSTD_NATIVE is True
    assert PURE.SNAPPY_NATIVE is False and PURE.ZSTD_NATIVE is False and PURE.ZSTD_LIBRARY is None
    assert NATIVE.ZSTD_LIBRARY and "zstandard" in NATIVE.ZSTD_LIBRARY  # the package's own libzstd first


# ---- snappy ------------------------------------------------------------------------------------------------------

def _raw(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def _xerial(data: bytes, block: int = 32 * 1024, versions: tuple[int, int] = (1, 1)) -> bytes:
    """The xerial framing with ``block``-byte chunks (snappy-java writes 32 KiB)."""
    out = [XERIAL_MAGIC, struct.pack(">ii", *versions)]
    for start in range(0, len(data), block):
        chunk = _raw(data[start:start + block])
        out.append(struct.pack(">i", len(chunk)))
        out.append(chunk)
    return b"".join(out)


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("framing", ["raw", "xerial 32K", "xerial 1K", "xerial 1M", "xerial v2", "compress"])
def test_snappy_decodes_natively_and_purely(monkeypatch, name, framing):
    data = DATA[name]
    if framing == "raw":
        body = _raw(data)
    elif framing == "compress":
        body = compression.compress(SNAPPY, data)
    elif framing == "xerial v2":
        body = _xerial(data, versions=(2, 1))  # the versions are not checked (as before)
    else:
        body = _xerial(data, {"xerial 32K": 32768, "xerial 1K": 1024, "xerial 1M": 1 << 20}[framing])
    assert compression.decompress(SNAPPY, memoryview(bytearray(body))) == data
    assert PURE.decompress_records(SNAPPY, body) == data
    _no_fallback(monkeypatch)
    assert NATIVE.decompress_records(SNAPPY, memoryview(bytearray(body))) == data
    assert NATIVE.decompress_records(SNAPPY, body) == data


def test_python_snappy_and_cramjam_framings_are_read_alike():
    """python-snappy's compress (the raw format librdkafka sends) decodes natively to what it decodes purely."""
    data = DATA["text"][:100_000]
    for body in (snappy.compress(data), _raw(data), compression.compress(SNAPPY, data)):
        assert NATIVE.decompress_records(SNAPPY, body) == PURE.decompress_records(SNAPPY, body) == data


def test_snappy_header_only_and_empty_blocks():
    header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for twin in TWINS:
        assert twin.decompress_records(SNAPPY, header) == b""  # no chunk: nothing
        assert twin.decompress_records(SNAPPY, b"\x00") == b""  # a raw block of length 0
        assert twin.decompress_records(SNAPPY, header + struct.pack(">i", 1) + b"\x00") == b""


def test_a_long_length_varint_falls_back(monkeypatch):
    """A length header of more than 5 bytes (snappy's own decoder takes up to 10): left to the pure path."""
    body = b"\x85\x80\x80\x80\x80\x00" + b"\x10abcde"
    calls = _fallbacks(monkeypatch)
    assert NATIVE.decompress_records(SNAPPY, body) == PURE.decompress_records(SNAPPY, body) == b"abcde"
    assert calls == [SNAPPY]


SNAPPY_CORRUPT = {
    "garbage": b"\x05garbage that is not snappy",
    "empty": b"",
    "truncated raw block": _raw(DATA["text"])[:500],
    "length over what snappy expands to": b"\xff\xff\xff\xff\x0f" + b"\x00" * 20,
    "length over 2^32": b"\xff\xff\xff\xff\x7f" + b"\x00" * 20,
    "unterminated length": b"\x80" * 12,
    "short length": _raw(b"abcdefgh" * 100)[:1] + b"\x01" + _raw(b"abcdefgh" * 100)[2:],
    "truncated xerial header": XERIAL_MAGIC + b"\x00\x00\x00",
    "truncated chunk length": XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"\x00\x00",
    "truncated chunk": _xerial(DATA["text"])[:1000],
    "negative chunk length": XERIAL_MAGIC + struct.pack(">iii", 1, 1, -5) + b"abcde",
    "empty chunk": XERIAL_MAGIC + struct.pack(">iii", 1, 1, 0),
    "garbage chunk": XERIAL_MAGIC + struct.pack(">iii", 1, 1, 6) + b"\x0a\x00abc\xff",
    "good then bad chunk": _xerial(DATA["small"]) + struct.pack(">i", 4) + b"\x7f\xff\xff\xff",
}


@pytest.mark.parametrize("name", sorted(SNAPPY_CORRUPT))
def test_corrupt_snappy_raises_corrupt_record_error(name):
    body = SNAPPY_CORRUPT[name]
    for twin in TWINS:
        with pytest.raises(CorruptRecordError):
            twin.decompress_records(SNAPPY, body)
        with pytest.raises(CorruptRecordError):
            twin.compressed_records(SNAPPY, body, 1, True)


def test_every_snappy_truncation_and_byte_flip_agrees_between_twins():
    records = b"".join(encode_record(i, 0, b"k%d" % i, DATA["mixed"][i * 300:(i + 1) * 300], []) for i in range(200))
    rng = random.Random(11)
    for body in (_xerial(records, 16384), _raw(records)):
        cases = [body[:i] for i in range(0, len(body), max(1, len(body) // 200))]
        cases += [_flip(body, rng.randrange(len(body))) for _ in range(300)]
        cases += [_flip(body, i) for i in range(30)]  # the xerial header, chunk lengths, the length varint
        for case in cases:
            assert _outcome(PURE.decompress_records, SNAPPY, case) == _outcome(NATIVE.decompress_records, SNAPPY, case)
            assert _outcome(PURE.compressed_records, SNAPPY, case, 200, True) == \
                _outcome(NATIVE.compressed_records, SNAPPY, case, 200, True)


# ---- zstd --------------------------------------------------------------------------------------------------------

def _zstd(data: bytes, level: int = 3, size: bool = True, checksum: bool = False) -> bytes:
    return zstandard.ZstdCompressor(level=level, write_content_size=size, write_checksum=checksum).compress(data)


def _zstd_streamed(data: bytes, piece: int = 10_000) -> bytes:
    """As zstd-jni's ZstdOutputStream (Kafka's Java producer) writes: streamed, no content size, several blocks."""
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    out = [cobj.compress(data[i:i + piece]) for i in range(0, len(data), piece)]
    out.append(cobj.flush())
    return b"".join(out)


ZSTD_SHAPES: dict[str, Callable[[bytes], bytes]] = {
    "sized": _zstd,
    "unsized": lambda d: _zstd(d, size=False),
    "checksum": lambda d: _zstd(d, checksum=True),
    "unsized checksum": lambda d: _zstd(d, size=False, checksum=True),
    "level 1": lambda d: _zstd(d, 1),
    "level 19": lambda d: _zstd(d, 19),
    "streamed": _zstd_streamed,
    "two frames": lambda d: _zstd(d[:len(d) // 2]) + _zstd_streamed(d[len(d) // 2:]),
}


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("shape", sorted(ZSTD_SHAPES))
def test_zstd_decodes_natively_and_purely(monkeypatch, name, shape):
    data = DATA[name]
    body = ZSTD_SHAPES[shape](data)
    assert compression.decompress(ZSTD, memoryview(bytearray(body))) == data
    assert PURE.decompress_records(ZSTD, body) == data
    _no_fallback(monkeypatch)
    assert NATIVE.decompress_records(ZSTD, memoryview(bytearray(body))) == data
    assert NATIVE.decompress_records(ZSTD, body) == data


def test_empty_zstd_data_is_no_records():
    for twin in TWINS:
        assert twin.decompress_records(ZSTD, b"") == b""
        with pytest.raises(InvalidRecordError):
            twin.compressed_records(ZSTD, b"", 1, False)


def _rle_frame(blocks: int, window_log: int = 17) -> bytes:
    """A zstd frame of ``blocks`` one-byte RLE blocks, no content size: its decompressed bound is blocks x the
    block size (here 128 KiB) while it decodes to ``blocks`` bytes."""
    out = [struct.pack("<I", 0xFD2FB528), b"\x00", bytes([(window_log - 10) << 3])]
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        out.append(struct.pack("<I", last | (1 << 1) | (1 << 3))[:3] + b"r")
    return b"".join(out)


def _with_window(frame: bytes, descriptor: int) -> bytes:
    assert frame[4] & 0x20 == 0  # has a window descriptor
    return frame[:5] + bytes([descriptor]) + frame[6:]


ZSTD_FALLBACKS = {
    "skippable frame first": (struct.pack("<II", 0x184D2A50, 4) + b"abcd" + _zstd(b"hello" * 100), b"hello" * 100),
    "skippable frame after": (_zstd(b"hello" * 100) + struct.pack("<II", 0x184D2A5F, 2) + b"ab", b"hello" * 100),
    "bound over 64 MiB": (_rle_frame(520), b"r" * 520),
    "window 2^28": (_with_window(_zstd_streamed(DATA["text"]), (28 - 10) << 3), None),
    "window 2^27 + 1/8": (_with_window(_zstd_streamed(DATA["text"]), ((27 - 10) << 3) | 1), None),
    "dictionary id": (zstandard.ZstdCompressor(dict_data=zstandard.train_dictionary(
        1024, [b"sample %d data" % i * 10 for i in range(1000)])).compress(b"sample 5 data" * 10), None),
    "trailing junk": (_zstd(b"hello" * 100) + b"junk12345", None),
    "trailing partial magic": (_zstd(b"hello" * 100) + b"\x28\xb5", None),
}


@pytest.mark.parametrize("name", sorted(ZSTD_FALLBACKS))
def test_odd_zstd_data_falls_back(monkeypatch, name):
    """Frames the native decoder leaves to the pure path get its result (data or CorruptRecordError)."""
    body, expected = ZSTD_FALLBACKS[name]
    assert _outcome(PURE.decompress_records, ZSTD, body) == (("ok", expected) if expected is not None
                                                             else ("CorruptRecordError",))
    calls = _fallbacks(monkeypatch)
    assert _outcome(NATIVE.decompress_records, ZSTD, body) == _outcome(PURE.decompress_records, ZSTD, body)
    assert calls == [ZSTD]


def test_window_at_the_limit_decodes_natively(monkeypatch):
    body = _with_window(_zstd_streamed(DATA["text"]), (27 - 10) << 3)
    _no_fallback(monkeypatch)
    assert NATIVE.decompress_records(ZSTD, body) == DATA["text"]


def _zstd_corrupt() -> dict[str, bytes]:
    good = _zstd(DATA["mixed"], checksum=True)
    sized = _zstd(DATA["text"])
    out = {
        "garbage": b"\x00garbage that is not zstd at all",
        "magic only": struct.pack("<I", 0xFD2FB528),
        "truncated": _zstd_streamed(DATA["text"])[:-5],
        "truncated header": good[:5],
        "bad checksum": good[:-1] + bytes([good[-1] ^ 1]),
        "flipped content under a checksum": _flip(good, len(good) // 2),
        "reserved block type": struct.pack("<I", 0xFD2FB528) + b"\x00\x38" + struct.pack("<I", 1 | (3 << 1))[:3],
        "content size too small": sized[:6] + struct.pack("<I", len(DATA["text"]) - 1) + sized[10:],
    }
    assert sized[4] >> 6 == 2 and sized[4] & 0x20  # a 4-byte content size at 5..8, no window descriptor
    out["content size too small"] = sized[:5] + struct.pack("<I", len(DATA["text"]) - 1) + sized[9:]
    out["content size too large"] = sized[:5] + struct.pack("<I", len(DATA["text"]) + 1) + sized[9:]
    return out


ZSTD_CORRUPT = _zstd_corrupt()


@pytest.mark.parametrize("name", sorted(ZSTD_CORRUPT))
def test_corrupt_zstd_raises_corrupt_record_error(name):
    body = ZSTD_CORRUPT[name]
    for twin in TWINS:
        with pytest.raises(CorruptRecordError):
            twin.decompress_records(ZSTD, body)
        with pytest.raises(CorruptRecordError):
            twin.compressed_records(ZSTD, body, 1, True)


def test_every_zstd_truncation_and_byte_flip_agrees_between_twins():
    records = b"".join(encode_record(i, 0, b"k%d" % i, DATA["mixed"][i * 300:(i + 1) * 300], []) for i in range(200))
    rng = random.Random(13)
    for body in (_zstd(records), _zstd_streamed(records, 7000), _zstd(records, checksum=True)):
        cases = [body[:i] for i in range(0, len(body), max(1, len(body) // 200))]
        cases += [_flip(body, rng.randrange(len(body))) for _ in range(300)]
        cases += [_flip(body, i) for i in range(20)]  # every header byte and the first block header
        for case in cases:
            assert _outcome(PURE.decompress_records, ZSTD, case) == _outcome(NATIVE.decompress_records, ZSTD, case)
            assert _outcome(PURE.compressed_records, ZSTD, case, 200, True) == \
                _outcome(NATIVE.compressed_records, ZSTD, case, 200, True)


def test_a_huge_zstd_output_then_small_ones():
    """A slot's buffer grows past its keep limit (then is freed) and the next calls still decode."""
    big = bytes(20 << 20)
    assert NATIVE.decompress_records(ZSTD, _zstd(big)) == big
    assert NATIVE.decompress_records(ZSTD, _zstd_streamed(DATA["text"])) == DATA["text"]
    assert NATIVE.decompress_records(ZSTD, _zstd(b"")) == b""


# ---- records: the one call a produce makes -----------------------------------------------------------------------

RECORDS = [(None if i % 7 == 3 else b"k%d" % i, os.urandom(50) + b"a" * 50, [("h", b"v")] if i % 5 == 0 else [],
            1700000000000 + i) for i in range(1000)]
NULLS = [i for i, r in enumerate(RECORDS) if r[0] is None]


def _section(records: list, codec: int) -> bytes:
    return build_batch(records, compression=codec)[RECORD_BATCH_OVERHEAD:]


@pytest.mark.parametrize("twin", TWINS, ids=["pure", "native"])
@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_records_walks_and_finds_null_keys(monkeypatch, twin, codec):
    section = _section(RECORDS, codec)
    if twin is NATIVE and codec != GZIP:
        _no_fallback(monkeypatch)
    assert twin.compressed_records(codec, memoryview(bytearray(section)), 1000, True) == NULLS
    assert twin.compressed_records(codec, section, 1000, False) == []
    keyed = [r for r in RECORDS if r[0] is not None]
    assert twin.compressed_records(codec, _section(keyed, codec), len(keyed), True) == []
    with pytest.raises(InvalidRecordError):
        twin.compressed_records(codec, section, 1001, False)
    with pytest.raises(InvalidRecordError):
        twin.compressed_records(codec, section, 999, True)
    with pytest.raises(InvalidRecordError):
        twin.compressed_records(codec, section, -1, True)
    bad = encode_record(0, 0, b"k", b"v", [])[:-1]  # a record cut short inside valid compressed data
    with pytest.raises(CorruptRecordError):
        twin.compressed_records(codec, compression.compress(codec, bad), 1, False)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_iter_records_agree(codec):
    batch = build_batch(RECORDS[:300], compression=codec)
    assert NATIVE.iter_records(batch) == PURE.iter_records(batch)
    assert [r.key for r in NATIVE.iter_records(memoryview(bytearray(batch)))] == [r[0] for r in RECORDS[:300]]


def test_unknown_codec_is_invalid():
    for twin in TWINS:
        with pytest.raises(InvalidRecordError):
            twin.compressed_records(7, b"abc", 1, False)


@pytest.mark.parametrize("codec", [SNAPPY, ZSTD, LZ4], ids=["snappy", "zstd", "lz4"])
def test_concurrent_native_decodes(codec):
    """More threads than reused buffers decode at once (without the GIL): each gets a buffer (and zstd context) of
    its own when the slots are taken, and every output is right."""
    bodies = [(compression.compress(codec, DATA[n]), DATA[n]) for n in ("text", "random", "mixed")]
    records = _section(RECORDS, codec)
    errors: list[str] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            body, data = rng.choice(bodies)
            if NATIVE.decompress_records(codec, body) != data:
                errors.append("wrong output")
            if NATIVE.compressed_records(codec, records, 1000, True) != NULLS:
                errors.append("wrong null keys")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


_NO_ZSTD = """
import ctypes
real = ctypes.CDLL
def only_others(name, *args, **kwargs):
    if "zst" in str(name):  # zstandard's backend and libzstd
        raise OSError("no such library")
    return real(name, *args, **kwargs)
ctypes.CDLL = only_others
"""
_NO_CRAMJAM_INTO = """
import cramjam
del cramjam.snappy.decompress_raw_into
"""
_SYSTEM_ZSTD = """
import ctypes
real = ctypes.CDLL
def system_only(name, *args, **kwargs):
    if "zstandard" in str(name):
        raise OSError("no such library")
    return real(name, *args, **kwargs)
ctypes.CDLL = system_only
"""
_CHECK = """
import zstandard
from broker._native import record_batch
from broker.protocol.records.builder import encode_record
from broker.protocol.records.compression import SNAPPY, ZSTD, compress
print(record_batch.SNAPPY_NATIVE, record_batch.ZSTD_NATIVE, record_batch.ZSTD_LIBRARY)
body = b"".join(encode_record(i, 0, None if i == 1 else b"k", b"v" * 300, []) for i in range(300))
for codec in (SNAPPY, ZSTD):
    data = compress(codec, body)
    assert record_batch.decompress_records(codec, data) == body
    assert record_batch.compressed_records(codec, data, 300, True) == [1]
unsized = zstandard.ZstdCompressor(write_content_size=False).compress(body)
assert record_batch.compressed_records(ZSTD, unsized, 300, True) == [1]
print("decoded")
"""


@pytest.mark.parametrize("setup,expected", [
    (_NO_ZSTD, "True False None"),
    (_NO_CRAMJAM_INTO, "False True "),
    (_SYSTEM_ZSTD, "True True libzstd.so.1"),
], ids=["no libzstd", "no cramjam decompress_raw_into", "the system's libzstd"])
def test_without_the_libraries_functions_the_native_twin_falls_back(setup, expected):
    r = subprocess.run([sys.executable, "-c", setup + _CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "decoded" in r.stdout, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith(expected), r.stdout
