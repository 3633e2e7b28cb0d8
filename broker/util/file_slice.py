"""A byte range of an open file, sent with sendfile() instead of being read into memory.

Storage returns these from reads; the protocol encoder passes them through untouched as
one part of a response; the network layer writes them with ``loop.sendfile``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol


class HasFileno(Protocol):
    """What a slice needs of its file: the descriptor (pread, sendfile)."""

    def fileno(self) -> int: ...


@dataclass(frozen=True)
class FileSlice:
    """``length`` bytes of ``file`` starting at ``position``. The file stays owned by its segment."""

    file: HasFileno
    position: int
    length: int

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """Read the bytes (for TLS, tests and tools, where zero-copy is impossible)."""
        return os.pread(self.file.fileno(), self.length, self.position)
