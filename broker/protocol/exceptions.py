"""Protocol violations by a peer. These close the connection; they never become wire error codes
(unlike broker.errors.KafkaError subclasses, which api/ turns into per-request codes)."""
from __future__ import annotations


class ProtocolError(Exception):
    """Base class: the peer broke the Kafka wire protocol."""


class MalformedMessageError(ProtocolError):
    """A request/response body or header cannot be parsed (truncated, bad length, bad UTF-8...)."""


class TruncatedHeaderError(MalformedMessageError):
    """The frame is too short to hold even the fixed part of a request header."""


class InvalidFrameError(ProtocolError):
    """A size prefix is negative."""


class FrameTooLargeError(ProtocolError):
    """A size prefix exceeds socket.request.max.bytes."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={max_bytes}")
        self.size = size
        self.max_bytes = max_bytes
