"""CRC-32C (Castagnoli), the checksum of magic-2 record batches; pure twin of ``pyx/crc32c.pyx``.

Uses crcmod's C extension. ``value`` continues a previous result, as with ``zlib.crc32``.
"""
from __future__ import annotations

from typing import Union

import crcmod.predefined

Buffer = Union[bytes, bytearray, memoryview]

_crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data``, continuing from ``value`` (0 for a fresh checksum)."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError("crc32c value out of range")
    if isinstance(data, memoryview) and (data.ndim != 1 or data.itemsize != 1 or not data.c_contiguous):
        data = data.cast("B") if data.c_contiguous else data.tobytes()
    return _crc32c(data, value)
