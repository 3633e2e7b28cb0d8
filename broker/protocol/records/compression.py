"""Record compression codecs, as Kafka's clients write them.

Codec ids (batch attributes bits 0-2): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Snappy: the Java client writes the xerial/snappy-java stream framing::

    magic b"\\x82SNAPPY\\x00" | version int32 (1) | compatible version int32 (1) |
    (chunk length int32 BE | raw snappy block)*

librdkafka and older clients may send a single raw snappy block; both are accepted on decompress.
LZ4: the LZ4 frame format with independent 64 KiB blocks and no content size. The broken header checksum of
magic-0 messages (KAFKA-3160) is handled in ``legacy.py``.
Zstd: frames may lack the content size, so decompression streams (and reads across concatenated frames).
A produce's validation decodes LZ4, snappy and zstd in the native ``record_batch`` (``compressed_records``: into a
reused buffer, records walked in the same call); this is the pure path, and the native one's fallback.
Decompression reads the caller's buffer in place (no copy of the compressed bytes).
Failures raise ``CorruptRecordError``; an unknown codec raises ``InvalidRecordError``.
"""
from __future__ import annotations

import gzip
import struct
from typing import Any

import lz4.frame
from isal import isal_zlib
import snappy
import zstandard

from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")


def _snappy_compress(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = snappy.compress(bytes(view[start:start + _XERIAL_BLOCK]))
        out.append(_I32.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_block(block: "bytes | bytearray | memoryview") -> bytes:
    """One raw snappy block; one whose length header claims more than snappy can expand to (22x) is refused before
    the decoder allocates that much."""
    claimed, shift = 0, 0
    for b in bytes(block[:5]):
        claimed |= (b & 0x7F) << shift
        if b < 0x80:
            if claimed > 32 * len(block) + 32:
                raise CorruptRecordError("snappy block of %d bytes claims %d decompressed" % (len(block), claimed))
            break
        shift += 7
    return snappy.uncompress(block)


def _snappy_decompress(data: "bytes | bytearray | memoryview") -> bytes:
    if bytes(data[:len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return _snappy_block(data)
    pos = len(_XERIAL_HEADER)
    if len(data) < pos:
        raise CorruptRecordError("truncated xerial snappy header")
    out = []
    data = memoryview(data)
    n = len(data)
    while pos < n:
        if n - pos < 4:
            raise CorruptRecordError("truncated xerial snappy chunk length")
        size = _I32.unpack_from(data, pos)[0]
        pos += 4
        if size < 0 or pos + size > n:
            raise CorruptRecordError("truncated xerial snappy chunk")
        out.append(_snappy_block(data[pos:pos + size]))
        pos += size
    return b"".join(out)


def _zstd_decompress(data: "bytes | bytearray | memoryview") -> bytes:
    dctx = zstandard.ZstdDecompressor()
    out = []
    while data:
        dobj = dctx.decompressobj()
        out.append(dobj.decompress(data))
        if not dobj.eof:
            raise CorruptRecordError("truncated zstd frame")
        data = dobj.unused_data
    return b"".join(out)


def _gzip_decompress(data: "bytes | bytearray | memoryview") -> bytes:
    """Every gzip member of ``data``, concatenated (as Java's GZIPInputStream reads them), through ISA-L's inflate:
    3-7x faster than zlib's on the broker's validation of gzip batches, with the same gzip header and CRC-32
    checks. Compression stays zlib's (``compression.gzip.level`` 1-9 has no ISA-L equivalent)."""
    out = []
    while True:
        dobj = isal_zlib.decompressobj(31)  # 16 + 15: a gzip wrapper, a 32 KiB window
        out.append(dobj.decompress(data))
        if not dobj.eof:
            raise CorruptRecordError("truncated gzip stream")
        data = dobj.unused_data
        if not data:
            return out[0] if len(out) == 1 else b"".join(out)


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` with ``codec`` the way the Java client does."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == SNAPPY:
        return _snappy_compress(bytes(data))
    if codec == LZ4:
        return lz4.frame.compress(bytes(data), block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                  content_checksum=False, store_size=False)
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(bytes(data))
    raise InvalidRecordError("unknown compression codec %d" % codec)


def decompress(codec: int, data: Any) -> bytes:
    """Decompress ``data`` (bytes-like) compressed with ``codec``; garbage raises CorruptRecordError."""
    if codec not in CODEC_NAMES:
        raise InvalidRecordError("unknown compression codec %d" % codec)
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return _gzip_decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return lz4.frame.decompress(data)
        return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except Exception as e:  # each codec library has its own error classes; all mean corrupt input
        raise CorruptRecordError("cannot decompress %s data: %s" % (CODEC_NAMES[codec], e)) from None
