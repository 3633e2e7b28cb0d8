"""Record-level errors shared by both twins of ``record_batch`` and the codecs.

``CorruptRecordError`` means the bytes cannot be trusted (bad CRC, bad length, truncation, bad magic, malformed
record framing) and maps to CORRUPT_MESSAGE. ``InvalidRecordError`` means the bytes parse but break a rule
(record count mismatch, offset deltas not 0..n-1) and maps to INVALID_RECORD. The mapping to wire codes is done
once, in ``api/``.
"""
from __future__ import annotations


class RecordError(Exception):
    """Base class; ``message`` is the human-readable reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CorruptRecordError(RecordError):
    """Bytes that fail an integrity check (CORRUPT_MESSAGE)."""


class InvalidRecordError(RecordError):
    """Well-formed bytes that break a record rule (INVALID_RECORD)."""
