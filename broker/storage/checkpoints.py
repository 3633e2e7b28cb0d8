"""Kafka's checkpoint files, written atomically (tmp file + fsync + rename + fsync of the dir).

Offset checkpoints (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint, cleaner-offset-checkpoint) are text, '\\n' line endings::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- "topic partition offset", one line each
    other 3 0

partition.metadata (one per partition directory)::

    version: 0
    topic_id: <base64url topic id, 22 chars>

The leader-epoch-checkpoint uses the same version/count header with "epoch start_offset"
lines; see leader_epoch_file.py.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
from typing import Callable, Iterable, Optional, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0


def atomic_write(path: str, data: bytes, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new file, never a mix.

    ``sync=False`` skips both fsyncs: for per-partition files whose owner makes them durable later, with its
    segments' flush and before the recovery point moves past what they describe (see ``fsync_file``)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(path) or ".")


def fsync_file(path: str) -> bool:
    """fsync an existing file by path; False when it no longer exists."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


_libc: Optional[ctypes.CDLL] = None


def sync_filesystem(path: str) -> None:
    """Make everything written to the filesystem holding ``path`` durable with one ``syncfs`` (``sync`` where
    syncfs is missing): at shutdown, one call instead of an fsync per segment, index and checkpoint of every
    partition."""
    global _libc
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fn = getattr(_libc, "syncfs", None)
        if fn is None or fn(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def fsync_dir(dir_path: str) -> None:
    """fsync a directory so renames and creations in it survive a crash.

    A failed fsync raises (EIO, EROFS...: the renames may be lost, so the caller's I/O error handling takes the dir
    offline, as Kafka's Utils.flushDir does); a directory that cannot be opened, or a filesystem that cannot fsync
    a directory (EINVAL, ENOTSUP), is skipped."""
    try:
        fd = os.open(dir_path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_checkpoint(path: str, version: int, lines: Iterable[str], sync: bool = True) -> None:
    """Write the version line, the count line and one line per entry (Kafka's CheckpointFile)."""
    body = list(lines)
    text = "%d\n%d\n" % (version, len(body)) + "".join(line + "\n" for line in body)
    atomic_write(path, text.encode("utf-8"), sync)


def read_checkpoint(path: str, expected_version: int, parse: Callable[[list[str]], T]) -> list[T]:
    """Parse a checkpoint file; a missing file reads as empty, a malformed one raises ValueError."""
    try:
        with open(path, "rb", buffering=0) as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:  # Kafka creates checkpoint files empty (CheckpointFile's constructor) and reads them as empty
        return []
    if int(lines[0].strip()) != expected_version:
        raise ValueError("unrecognized checkpoint version %r in %s" % (lines[0], path))
    if len(lines) < 2:  # a version line alone reads as empty too (CheckpointFile.CheckpointReadBuffer.read)
        return []
    count = int(lines[1].strip())
    entries = lines[2:]
    if len(entries) != count:
        raise ValueError("malformed checkpoint %s: expected %d entries, found %d" % (path, count, len(entries)))
    out = []
    for line in entries:
        parts = line.split()
        try:
            out.append(parse(parts))
        except (ValueError, IndexError):
            raise ValueError("malformed line %r in checkpoint %s" % (line, path)) from None
    return out


class OffsetCheckpointFile:
    """A ``topic partition offset`` checkpoint (recovery point, log start offset, HW, cleaner)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        write_checkpoint(
            self.path, CHECKPOINT_VERSION, ("%s %d %d" % (t, p, o) for (t, p), o in offsets.items())
        )

    def read(self) -> dict[tuple[str, int], int]:
        def parse(parts: list[str]) -> tuple[tuple[str, int], int]:
            if len(parts) != 3:
                raise ValueError
            return (parts[0], int(parts[1])), int(parts[2])

        return dict(read_checkpoint(self.path, CHECKPOINT_VERSION, parse))


def write_partition_metadata(dir_path: str, topic_id: str, sync: bool = True) -> str:
    """Write ``partition.metadata`` (``topic_id`` is the base64url string form of the topic UUID); returns its
    path. Kafka flushes it asynchronously (its "flush-metadata-file" task); ``sync=False`` leaves that to the
    caller."""
    text = "version: %d\ntopic_id: %s" % (PARTITION_METADATA_VERSION, topic_id)  # no final newline, as Kafka
    path = os.path.join(dir_path, "partition.metadata")
    atomic_write(path, text.encode("utf-8"), sync)
    return path


def read_partition_metadata(dir_path: str) -> str | None:
    """The topic id stored in ``partition.metadata``, or None when the file is absent."""
    path = os.path.join(dir_path, "partition.metadata")
    try:
        with open(path, "r", encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return None
    if lines == [""]:
        # written without fsync and lost in a crash (its rename survived): absent, rewritten from the controller's
        # topic id by the next LeaderAndIsr
        logger.warning("Empty partition.metadata in %s; treating it as absent", dir_path)
        return None
    if len(lines) < 2 or not lines[0].startswith("version: ") or not lines[1].startswith("topic_id: "):
        raise ValueError("malformed partition.metadata in %s" % dir_path)
    if int(lines[0][len("version: "):]) != PARTITION_METADATA_VERSION:
        raise ValueError("unrecognized partition.metadata version in %s" % dir_path)
    return lines[1][len("topic_id: "):].strip()
