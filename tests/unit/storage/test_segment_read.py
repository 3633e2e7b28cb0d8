"""LogSegment.read's end: whole batches within max bytes (at least the first with KIP-74), found by the record
batch scanner over chunks of the window; checked against a walk over the batch sizes the test laid out, for
windows below and above one scan chunk, with and without offset index entries, and batches larger than a chunk."""
from __future__ import annotations

import random
from typing import Callable

import pytest

from broker.storage import segment as segment_module
from broker.storage.config import LogConfig
from broker.storage.log import Log

from .conftest import batch

CHUNK = segment_module._FETCH_SCAN_CHUNK


def _batch_of_size(size: int) -> bytearray:
    """One single-record batch of exactly ``size`` bytes (record varints make the value length a search)."""
    for value_len in range(max(0, size - 90), size):
        b = batch(1, key=None, value=b"x" * value_len)
        if len(b) == size:
            return b
    raise AssertionError("no batch of %d bytes" % size)


def _lay_out(log: Log, sizes: list[int]) -> list[tuple[int, int]]:
    """Append one batch per size; returns (position, size) of each, offset i in batch i."""
    layout, pos = [], 0
    for size in sizes:
        log.append_as_leader(_batch_of_size(size), 0)
        layout.append((pos, size))
        pos += size
    return layout


def _expected_length(layout: list[tuple[int, int]], first: int, max_bytes: int, max_position: int,
                     min_one: bool) -> int:
    start = layout[first][0]
    limit = min(max_position, start + max_bytes)
    end = start
    for pos, size in layout[first:]:
        if pos + size > limit:
            break
        end = pos + size
    if end == start and min_one and start + layout[first][1] <= max_position:
        return layout[first][1]
    return end - start


def _check_all(log: Log, layout: list[tuple[int, int]], max_bytes_choices: list[int], rng: random.Random,
               cases: int = 60) -> None:
    seg = log.segments[-1]
    for _ in range(cases):
        first = rng.randrange(len(layout))
        max_bytes = rng.choice(max_bytes_choices)
        max_position = rng.choice([seg.size, layout[rng.randrange(first, len(layout))][0] + 1, seg.size - 7])
        min_one = rng.random() < 0.7
        res = seg.read(first, max_bytes, max_position, min_one)
        assert res is not None
        fs, meta = res
        assert meta.relative_position_in_segment == layout[first][0]
        assert fs.length == _expected_length(layout, first, max_bytes, max_position, min_one), \
            (first, max_bytes, max_position, min_one)


@pytest.mark.parametrize("index_interval", [4096, 1 << 30])  # with index entries; with none at all
def test_ends_on_the_last_whole_batch_within_max_bytes(open_log: Callable[..., Log], index_interval: int) -> None:
    rng = random.Random(20)
    log = open_log(LogConfig(index_interval_bytes=index_interval))
    sizes = [rng.choice([120, 700, 5000, 30_000, CHUNK - 3, CHUNK + 1000, 3 * CHUNK]) for _ in range(60)]
    layout = _lay_out(log, sizes)
    _check_all(log, layout, [100, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17, 1 << 20, 8 << 20], rng)


def test_a_length_field_straddling_a_scan_chunk(open_log: Callable[..., Log]) -> None:
    """Without index entries a large window is scanned chunk by chunk; a boundary 1 to 11 bytes before a chunk's
    end leaves the next batch's length field cut in two, to be read from the next chunk."""
    for short in (1, 5, 11, 12):
        log = open_log(LogConfig(index_interval_bytes=1 << 30), name="t-%d" % short)
        # read from offset 0: the scan starts after the first batch; its first chunk ends ``short`` bytes into
        # the third batch
        sizes = [200, CHUNK - short, 300, 400, 500]
        layout = _lay_out(log, sizes)
        seg = log.segments[-1]
        fs, _ = seg.read(0, sum(sizes), -1, True)
        assert fs.length == sum(sizes)
        fs, _ = seg.read(0, sum(sizes) - 1, -1, True)
        assert fs.length == sum(sizes[:-1])
        assert _expected_length(layout, 0, sum(sizes) - 1, seg.size, True) == sum(sizes[:-1])


def test_a_batch_longer_than_a_chunk_is_stepped_over(open_log: Callable[..., Log]) -> None:
    log = open_log(LogConfig(index_interval_bytes=1 << 30))
    sizes = [150, 2 * CHUNK + 5, 150, 3 * CHUNK, 150]
    _lay_out(log, sizes)
    seg = log.segments[-1]
    assert seg.read(0, 1 << 30, -1, True)[0].length == sum(sizes)
    assert seg.read(0, sum(sizes[:4]) + 100, -1, True)[0].length == sum(sizes[:4])
    assert seg.read(0, sum(sizes[:4]) - 1, -1, True)[0].length == sum(sizes[:3])
    # KIP-74: the first batch whole even past max bytes, but never past max_position
    assert seg.read(1, 10, -1, True)[0].length == sizes[1]
    assert seg.read(1, 10, -1, False)[0].length == 0
    assert seg.read(1, 10, 150 + sizes[1] - 1, True)[0].length == 0


def test_a_file_shorter_than_its_recorded_size_ends_the_read_at_its_last_whole_batch(
        open_log: Callable[..., Log]) -> None:
    """A window reaching past the file's end (truncated under the reader) answers what was whole."""
    log = open_log(LogConfig(index_interval_bytes=1 << 30))
    sizes = [150, 1000, 1000, 1000]
    _lay_out(log, sizes)
    seg = log.segments[-1]
    import os
    os.ftruncate(seg.log_file.fd, sum(sizes[:3]) + 20)
    fs, _ = seg.read(0, 1 << 20, sum(sizes), True)
    assert fs.length == sum(sizes[:3])
