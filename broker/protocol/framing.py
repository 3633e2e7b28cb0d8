"""Split a byte stream into Kafka request frames. Sans-IO: the caller feeds bytes read from a socket.

Wire layout: ``int32 size (big-endian) | size bytes of frame``. Frames are returned without the
size prefix. A size above socket.request.max.bytes raises FrameTooLargeError and a negative size
InvalidFrameError; after either, the connection must be closed (the framer is left unusable).

Each frame is copied exactly once, into a bytearray of its own allocated as soon as its size
is known; a large Produce request arriving in many socket reads is not re-copied as it grows.
Frames are writable memoryviews, so record batches can be stamped in place.
"""
from __future__ import annotations

import struct

from .exceptions import FrameTooLargeError, InvalidFrameError

_SIZE = struct.Struct(">i")


class RequestFramer:
    """Accumulates received bytes and yields whole request frames."""

    __slots__ = ("max_request_bytes", "_head", "_frame", "_filled", "_failed")

    def __init__(self, max_request_bytes: int) -> None:
        self.max_request_bytes = max_request_bytes
        self._head = bytearray()  # a size prefix received in pieces
        self._frame: bytearray | None = None  # the frame being filled
        self._filled = 0
        self._failed = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a frame."""
        if self._frame is not None:
            return 4 + self._filled  # the size prefix plus what has arrived of the frame
        return len(self._head)

    def _start_frame(self, size: int) -> None:
        if size < 0:
            self._failed = True
            raise InvalidFrameError(f"negative frame size {size}")
        if size > self.max_request_bytes:
            self._failed = True
            raise FrameTooLargeError(size, self.max_request_bytes)
        self._frame = bytearray(size)
        self._filled = 0

    def feed(self, data: bytes) -> list[memoryview]:
        """Add received bytes; return every frame now complete, in order."""
        if self._failed:
            raise InvalidFrameError("framer used after a framing error")
        frames: list[memoryview] = []
        mv = memoryview(data)
        pos, end = 0, len(mv)
        while pos < end:
            frame = self._frame
            if frame is None:
                if self._head or end - pos < 4:
                    take = min(4 - len(self._head), end - pos)
                    self._head += mv[pos:pos + take]
                    pos += take
                    if len(self._head) < 4:
                        break
                    size = _SIZE.unpack(self._head)[0]
                    self._head.clear()
                else:
                    size = _SIZE.unpack_from(mv, pos)[0]
                    pos += 4
                self._start_frame(size)
                frame = self._frame
                assert frame is not None
            take = min(len(frame) - self._filled, end - pos)
            if take:
                frame[self._filled:self._filled + take] = mv[pos:pos + take]
                self._filled += take
                pos += take
            if self._filled == len(frame):
                frames.append(memoryview(frame))
                self._frame = None
                self._filled = 0
        return frames
