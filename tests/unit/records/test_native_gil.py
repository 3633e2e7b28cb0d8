"""The hot native functions release the GIL on large inputs: CRC-32C, the record walk, and the decoding of LZ4,
zstd and snappy batches (with their record walk).

How it is seen: with a switch interval of half a second (the calls take milliseconds), a thread waiting for the GIL only gets it when the thread
holding it releases it. A spinner thread counts (and gives the GIL back at once, by ``time.sleep(0)``) while the
main thread makes one call: if its count moved during the call, the call released the GIL. A call holding the GIL
throughout (a bytes copy) is checked not to let it move, so the probe cannot pass by accident."""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from broker.accel import load
from broker.protocol.records.builder import build_batch, encode_record
from broker.protocol.records.compression import LZ4, SNAPPY, ZSTD, compress

NATIVE = load("record_batch", "native")
CRC = load("crc32c", "native")


class _Probe:
    def __init__(self) -> None:
        self.count = 0
        self.stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        while not self.stop:
            self.count += 1
            time.sleep(0)

    def moved_during(self, fn: Callable[[], Any], tries: int = 50) -> bool:
        """Whether the spinner ran during one of up to ``tries`` calls of fn."""
        for _ in range(tries):
            time.sleep(0.001)  # let the spinner reach its wait for the GIL
            before = self.count
            fn()
            if self.count != before:
                return True
        return False


@pytest.fixture
def probe() -> Iterator[_Probe]:
    interval = sys.getswitchinterval()
    p = _Probe()
    sys.setswitchinterval(0.5)
    try:
        p.thread.start()
        time.sleep(0.01)
        yield p
    finally:
        p.stop = True
        sys.setswitchinterval(interval)
        p.thread.join(10)


#: ~20 MB of records (200,000 of ~100 B): each call takes milliseconds
BODY = b"".join(encode_record(i, 0, b"k%d" % (i % 1000), os.urandom(40) + b"v" * 50, []) for i in range(200_000))
COUNT = 200_000


def test_the_probe_sees_a_call_that_holds_the_gil(probe):
    assert not probe.moved_during(lambda: bytes(bytearray(BODY)), tries=3)


def test_crc32c_releases_the_gil(probe):
    assert probe.moved_during(lambda: CRC.crc32c(BODY))


def test_record_walk_releases_the_gil(probe):
    assert probe.moved_during(lambda: NATIVE.validate_records(BODY, COUNT))
    assert probe.moved_during(lambda: NATIVE.null_key_records(BODY, COUNT))


def test_batch_crc_check_releases_the_gil(probe):
    batch = build_batch([(b"k", BODY[i:i + 100_000], [], 0) for i in range(0, len(BODY), 100_000)])
    assert probe.moved_during(lambda: NATIVE.validate_batches(batch, True))


@pytest.mark.parametrize("codec", [LZ4, ZSTD, SNAPPY], ids=["lz4", "zstd", "snappy"])
def test_compressed_batch_decoding_releases_the_gil(probe, codec):
    data = compress(codec, BODY)
    assert len(data) > 16384  # over the no-GIL threshold
    assert NATIVE.compressed_records(codec, data, COUNT, False) == []  # decoded natively, no error
    assert probe.moved_during(lambda: NATIVE.compressed_records(codec, data, COUNT, False))
    assert probe.moved_during(lambda: NATIVE.compressed_records(codec, data, COUNT, True))
    assert probe.moved_during(lambda: NATIVE.decompress_records(codec, data))


def test_a_small_batch_keeps_the_gil(probe):
    """Below the threshold LZ4 and zstd decode with the GIL held (releasing it would cost more than the decode)."""
    small = b"".join(encode_record(i, 0, b"k", b"v" * 20, []) for i in range(100))
    for codec in (LZ4, ZSTD):
        data = compress(codec, small)
        assert len(data) < 16384
        assert not probe.moved_during(lambda: NATIVE.compressed_records(codec, data, 100, False), tries=3)

