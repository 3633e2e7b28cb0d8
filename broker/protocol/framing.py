"""Split a byte stream into Kafka request frames. Sans-IO: the caller feeds bytes read from a socket.

Wire layout: ``int32 size (big-endian) | size bytes of frame``. Frames are returned without the
size prefix. A size above socket.request.max.bytes raises FrameTooLargeError and a negative size
InvalidFrameError; after either, the connection must be closed (the framer is left unusable).
"""
from __future__ import annotations

import struct

from .exceptions import FrameTooLargeError, InvalidFrameError

_SIZE = struct.Struct(">i")


class RequestFramer:
    """Accumulates received bytes and yields whole request frames."""

    __slots__ = ("max_request_bytes", "_buf", "_failed")

    def __init__(self, max_request_bytes: int) -> None:
        self.max_request_bytes = max_request_bytes
        self._buf = bytearray()
        self._failed = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[memoryview]:
        """Add received bytes; return every frame now complete, in order.

        Frames are writable memoryviews over their own bytearray (each frame is copied once),
        so record batches inside a Produce frame can be stamped in place without another copy.
        """
        if self._failed:
            raise InvalidFrameError("framer used after a framing error")
        if self._buf:
            self._buf += data
            src = self._buf
        else:
            src = data if isinstance(data, bytes) else bytes(data)
        frames: list[memoryview] = []
        pos = 0
        end = len(src)
        mv = memoryview(src)
        try:
            while end - pos >= 4:
                size = _SIZE.unpack_from(mv, pos)[0]
                if size < 0:
                    self._failed = True
                    raise InvalidFrameError(f"negative frame size {size}")
                if size > self.max_request_bytes:
                    self._failed = True
                    raise FrameTooLargeError(size, self.max_request_bytes)
                if end - pos - 4 < size:
                    break
                # One copy into a bytearray: frames are writable, so Produce can stamp offsets in place.
                frames.append(memoryview(bytearray(mv[pos + 4:pos + 4 + size])))
                pos += 4 + size
            rest = mv[pos:].tobytes() if src is data and pos < end else b""
        finally:
            if src is not data:
                mv.release()
        if src is data:
            self._buf = bytearray(rest)
        elif pos:
            del self._buf[:pos]
        return frames
