"""LZ4 frames: the native decoder (python-lz4's LZ4_decompress_safe into a reused buffer, records walked in the same
call) and the pure one (compression.decompress: lz4.frame) agree with lz4.frame on every frame shape, the native one
decodes Kafka's frames itself (independent blocks) and leaves the others to the pure path, and corrupt frames raise
CorruptRecordError in both, never crash."""
from __future__ import annotations

import os
import random
import struct
import threading
from typing import Any, Callable

import lz4.block
import lz4.frame
import pytest

from broker.accel import load
from broker.protocol.records import compression
from broker.protocol.records.batch_info import RECORD_BATCH_OVERHEAD
from broker.protocol.records.builder import build_batch, encode_record
from broker.protocol.records.compression import LZ4
from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError

LZ4_MAGIC = 0x184D2204
NATIVE = load("record_batch", "native")
PURE = load("record_batch", "pure")
TWINS = [PURE, NATIVE]

_rng = random.Random(19)
#: compressible text, incompressible bytes (stored blocks) and both mixed: every kind of block
DATA = {
    "text": b"".join(b"record %d payload " % i for i in range(40000)),
    "random": _rng.randbytes(300_000),
    "mixed": b"".join(_rng.randbytes(5000) + bytes(20000) for _ in range(12)),
    "small": b"abc" * 7,
    "empty": b"",
}
BLOCK_SIZES = [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB, lz4.frame.BLOCKSIZE_MAX1MB,
               lz4.frame.BLOCKSIZE_MAX4MB]


def _frame(data: bytes, block_size: int = lz4.frame.BLOCKSIZE_MAX64KB, linked: bool = False, size: bool = False,
           block_sum: bool = False, content_sum: bool = False) -> bytes:
    return lz4.frame.compress(data, block_size=block_size, block_linked=linked, store_size=size,
                              block_checksum=block_sum, content_checksum=content_sum)


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 (the frame's header checksum), written out from the spec to build frames by hand."""
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    n, pos = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed & m, (seed - p1) & m]
        while pos + 16 <= n:
            for i in range(4):
                v[i] = (rotl((v[i] + struct.unpack_from("<I", data, pos)[0] * p2) & m, 13) * p1) & m
                pos += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while pos + 4 <= n:
        h = (rotl((h + struct.unpack_from("<I", data, pos)[0] * p3) & m, 17) * p4) & m
        pos += 4
    for b in data[pos:]:
        h = (rotl((h + b * p5) & m, 11) * p1) & m
    h = ((h ^ (h >> 15)) * p2) & m
    h = ((h ^ (h >> 13)) * p3) & m
    return h ^ (h >> 16)


def _no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the native twin's fallback to compression.decompress fail, to prove it decoded a frame itself."""
    def boom(codec: int, data: Any) -> bytes:
        raise AssertionError("native twin fell back to compression.decompress")
    monkeypatch.setattr(NATIVE, "_decompress", boom)


def test_native_decoder_is_loaded():
    assert NATIVE.LZ4_NATIVE is True and PURE.LZ4_NATIVE is False


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("size,block_sum,content_sum", [(False, False, False), (True, False, False),
                                                        (False, True, False), (False, False, True),
                                                        (True, True, True)])
def test_independent_frames_decode_natively_and_purely(monkeypatch, name, block_size, size, block_sum,
                                                       content_sum):
    data = DATA[name]
    frame = _frame(data, block_size, False, size, block_sum, content_sum)
    assert lz4.frame.decompress(frame) == data
    assert compression.decompress(LZ4, memoryview(bytearray(frame))) == data
    assert PURE.lz4_decompress(frame) == data
    _no_fallback(monkeypatch)
    assert NATIVE.lz4_decompress(memoryview(bytearray(frame))) == data
    assert NATIVE.decompress_records(LZ4, frame) == data


def test_xxh32_known_values():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    desc = _frame(b"x", size=True)[4:15]
    assert (xxh32(desc[:-1]) >> 8) & 0xFF == desc[-1]


def test_stored_blocks_are_copied(monkeypatch):
    """A frame of uncompressed ("stored") blocks, written by hand: high bit of the block size set."""
    blocks = [DATA["random"][i:i + 1000] for i in range(0, 5000, 1000)]
    frame = _hand_frame([(b, True) for b in blocks] + [(lz4.block.compress(DATA["small"], store_size=False), False)])
    expected = b"".join(blocks) + DATA["small"]
    assert PURE.lz4_decompress(frame) == expected
    _no_fallback(monkeypatch)
    assert NATIVE.lz4_decompress(frame) == expected


def _hand_frame(blocks: list[tuple[bytes, bool]], flg: int = 0x60, bd: int = 0x40, end: bytes = b"\0\0\0\0") -> bytes:
    """An LZ4 frame of (block, stored) pairs with a correct header checksum."""
    desc = bytes([flg, bd])
    out = [struct.pack("<I", LZ4_MAGIC), desc, bytes([(xxh32(desc) >> 8) & 0xFF])]
    for block, stored in blocks:
        out.append(struct.pack("<I", len(block) | (0x80000000 if stored else 0)))
        out.append(block)
    out.append(end)
    return b"".join(out)


def _fallbacks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the native twin's calls of its fallback (compression.decompress)."""
    calls: list[int] = []

    def counting(codec: int, data: Any) -> bytes:
        calls.append(codec)
        return compression.decompress(codec, data)
    monkeypatch.setattr(NATIVE, "_decompress", counting)
    return calls


@pytest.mark.parametrize("name", ["text", "mixed"])
def test_linked_frames_fall_back(monkeypatch, name):
    data = DATA[name]
    frame = _frame(data, linked=True)
    assert frame[4] & 0x20 == 0  # really linked (one-block frames are written independent)
    assert PURE.lz4_decompress(frame) == data
    calls = _fallbacks(monkeypatch)
    assert NATIVE.lz4_decompress(frame) == data
    assert calls == [LZ4]


@pytest.mark.parametrize("flg,bd", [(0x61, 0x40), (0x62, 0x40), (0xA0, 0x40), (0x60, 0x30), (0x60, 0x41),
                                    (0x60, 0xC0)])
def test_unusual_headers_fall_back(monkeypatch, flg, bd):
    """Dictionary id, reserved bits, another version, unknown block size: left to lz4.frame (whose errors they
    get)."""
    frame = _hand_frame([(b"abc", True)], flg=flg, bd=bd)
    calls = _fallbacks(monkeypatch)
    outcome = _outcome(NATIVE.lz4_decompress, frame)
    assert calls == [LZ4] and outcome == _outcome(PURE.lz4_decompress, frame)


def test_trailing_bytes_after_the_end_mark_are_ignored_as_lz4_frame_does():
    frame = _frame(DATA["text"])
    assert lz4.frame.decompress(frame + b"junk") == DATA["text"]
    for twin in TWINS:
        assert twin.lz4_decompress(frame + b"junk") == DATA["text"]


def _outcome(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except (CorruptRecordError, InvalidRecordError) as e:
        return (type(e).__name__,)


CORRUPT = {
    "garbage": b"\x00garbage that is not compressed at all",
    "magic only": struct.pack("<I", LZ4_MAGIC),
    "no end mark": _frame(DATA["text"])[:-4],
    "truncated block": _frame(DATA["text"])[:200],
    "truncated block size": _frame(DATA["text"])[:9],
    "block over the block max": _hand_frame([(b"x" * 70000, True)]),
    "compressed block over the block max": _hand_frame([(lz4.block.compress(bytes(70000), store_size=False),
                                                         False)]),
    "compressed block size over the block max": _hand_frame([(lz4.block.compress(DATA["random"][:70000],
                                                                                 store_size=False), False)]),
    "bad block": _hand_frame([(b"\xff" * 50, False)]),
    "bad header checksum": _frame(DATA["text"])[:6] + b"\x00" + _frame(DATA["text"])[7:],
    "reserved bit": _hand_frame([(b"abc", True)], flg=0x62),
    "bad block max id": _hand_frame([(b"abc", True)], bd=0x30),
    "missing content checksum": _frame(DATA["text"], content_sum=True)[:-4],
}


def _flip(frame: bytes, pos: int) -> bytes:
    b = bytearray(frame)
    b[pos] ^= 0x5A
    return bytes(b)


def _checksummed() -> dict[str, bytes]:
    out = {}
    f = _frame(DATA["mixed"], block_sum=True)
    out["bad block checksum"] = _flip(f, 12)
    f = _frame(DATA["mixed"], content_sum=True)
    out["bad content checksum"] = _flip(f, len(f) - 2)
    out["content flipped under a content checksum"] = _flip(f, 40)
    f = _frame(DATA["text"], size=True)
    desc = bytearray(f[4:14])
    desc[2:10] = struct.pack("<Q", len(DATA["text"]) + 1)
    out["wrong content size"] = f[:4] + bytes(desc) + bytes([(xxh32(desc) >> 8) & 0xFF]) + f[15:]
    return out


@pytest.mark.parametrize("name", sorted(CORRUPT) + sorted(_checksummed()))
def test_corrupt_frames_raise_corrupt_record_error(name):
    frame = CORRUPT.get(name) or _checksummed()[name]
    for twin in TWINS:
        with pytest.raises(CorruptRecordError):
            twin.lz4_decompress(frame)
        with pytest.raises(CorruptRecordError):
            twin.lz4_frame_records(frame, 1, True)


def test_every_truncation_and_byte_flip_agrees_between_twins():
    frames = [_frame(DATA["mixed"][:70000]), _frame(DATA["mixed"][:70000], size=True, block_sum=True,
                                                        content_sum=True)]
    rng = random.Random(7)
    for frame in frames:
        cases = [frame[:i] for i in range(0, len(frame), max(1, len(frame) // 300))]
        cases += [_flip(frame, rng.randrange(len(frame))) for _ in range(300)]
        cases += [_flip(frame, i) for i in range(24)]  # every header byte and the first block sizes
        for case in cases:
            assert _outcome(PURE.lz4_decompress, case) == _outcome(NATIVE.lz4_decompress, case)


def _records_section(records: list, codec: int = LZ4) -> tuple[bytes, int]:
    batch = build_batch(records, compression=codec)
    return batch[RECORD_BATCH_OVERHEAD:], len(records)


RECORDS = [(None if i % 7 == 3 else b"k%d" % i, os.urandom(50) + b"a" * 50, [("h", b"v")] if i % 5 == 0 else [],
            1700000000000 + i) for i in range(1000)]


@pytest.mark.parametrize("twin", TWINS, ids=["pure", "native"])
def test_lz4_frame_records_walks_and_finds_null_keys(monkeypatch, twin):
    section, count = _records_section(RECORDS)
    nulls = [i for i, r in enumerate(RECORDS) if r[0] is None]
    if twin is NATIVE:
        _no_fallback(monkeypatch)
    assert twin.lz4_frame_records(memoryview(bytearray(section)), count, True) == nulls
    assert twin.lz4_frame_records(section, count, False) == []
    keyed, n = _records_section([r for r in RECORDS if r[0] is not None])
    assert twin.lz4_frame_records(keyed, n, True) == []
    with pytest.raises(InvalidRecordError):
        twin.lz4_frame_records(section, count + 1, False)
    with pytest.raises(InvalidRecordError):
        twin.lz4_frame_records(section, count - 1, True)
    with pytest.raises(InvalidRecordError):
        twin.lz4_frame_records(section, -1, True)
    bad = encode_record(0, 0, b"k", b"v", [])[:-1]  # a record cut short inside a valid frame
    with pytest.raises(CorruptRecordError):
        twin.lz4_frame_records(_frame(bad), 1, False)


@pytest.mark.parametrize("twin", TWINS, ids=["pure", "native"])
def test_lz4_frame_records_of_linked_frames(twin):
    body = b"".join(encode_record(i, 0, None if i == 2 else b"k", b"v" * 100, []) for i in range(800))
    assert twin.lz4_frame_records(_frame(body, linked=True), 800, True) == [2]


def test_concurrent_native_decodes_use_their_own_buffers():
    """Decoding runs without the GIL on a shared buffer: a second thread meanwhile must get a buffer of its own."""
    frames = [(_frame(DATA[n]), DATA[n]) for n in ("text", "random", "mixed")]
    errors: list[str] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(150):
            frame, data = rng.choice(frames)
            if NATIVE.lz4_decompress(frame) != data:
                errors.append("wrong output")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_huge_output_then_small_ones():
    """The shared buffer grows past its keep limit (then is freed) and the next calls still decode."""
    big = bytes(20 << 20)
    assert NATIVE.lz4_decompress(_frame(big, lz4.frame.BLOCKSIZE_MAX4MB)) == big
    assert NATIVE.lz4_decompress(_frame(DATA["text"])) == DATA["text"]
    assert NATIVE.lz4_decompress(_frame(b"")) == b""


_NO_SYMBOLS = """
import ctypes
def no_library(*args, **kwargs):
    raise OSError("no such library")
ctypes.CDLL = no_library
"""
_WRONG_SYMBOL = """
import ctypes
real = ctypes.CDLL
class WrongXXH32:
    def __init__(self, *args, **kwargs):
        self._lib = real(*args, **kwargs)
    def __getattr__(self, name):
        return getattr(self._lib, "XXH64" if name == "XXH32" else name)
ctypes.CDLL = WrongXXH32
"""
_CHECK = """
import lz4.frame
from broker._native import record_batch
from broker.protocol.records.builder import encode_record
assert record_batch.LZ4_NATIVE is False
body = b"".join(encode_record(i, 0, None if i == 1 else b"k", b"v" * 300, []) for i in range(300))
frame = lz4.frame.compress(body, block_linked=False, store_size=False)
assert record_batch.lz4_decompress(frame) == body
assert record_batch.lz4_frame_records(frame, 300, True) == [1]
print("fell back")
"""


@pytest.mark.parametrize("setup", [_NO_SYMBOLS, _WRONG_SYMBOL], ids=["symbols missing", "symbol misbehaves"])
def test_without_working_lz4_symbols_the_native_twin_falls_back(setup):
    """python-lz4's symbols not found, or found but not decoding the self-test frame: the pure path decodes."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    r = subprocess.run([sys.executable, "-c", setup + _CHECK], cwd=root, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "fell back" in r.stdout, r.stdout + r.stderr
