"""Micro-benchmarks of the accelerated modules, native and pure side by side (ops/s and MB/s).

    python tools/bench/micro_bench.py [--fast]

Mirrors Kafka's jmh Crc32CBenchmark / ByteUtilsBenchmark / record benchmarks. Figures only; no assertions.
The lz4/snappy/zstd rows are a produce's validation of a batch of 1,000 records of 100 B (decode + record walk,
``compressed_records``; MB/s of decompressed records), then the LZ4 frame decoders side by side (lz4.frame on a copy,
as the validator did before issue 19, compression.decompress's lz4.frame on the caller's buffer, the native decoder),
then that validation per codec before and after the native decoders (``compression.decompress`` then the native
record walk, as the validator did, against ``compressed_records``), in interleaved rounds, in CPU us per record.
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import crcmod.predefined  # noqa: E402
import lz4.frame  # noqa: E402
import snappy  # noqa: E402
import zstandard  # noqa: E402

from broker.accel import load  # noqa: E402
from broker.protocol.records.batch_info import RECORD_BATCH_OVERHEAD  # noqa: E402
from broker.protocol.records.builder import build_batch  # noqa: E402
from broker.protocol.records.compression import GZIP, LZ4, SNAPPY, XERIAL_MAGIC, ZSTD, decompress  # noqa: E402


def bench(fn: Callable[[], Any], min_time: float, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call (best of 3 rounds of at least ``min_time`` / 3), by ``clock``."""
    n = 1
    while True:
        t0 = clock()
        for _ in range(n):
            fn()
        dt = clock() - t0
        if dt >= min_time / 10:
            break
        n *= 4
    best = dt / n
    for _ in range(2):
        t0 = clock()
        for _ in range(n):
            fn()
        best = min(best, (clock() - t0) / n)
    return best


def fmt(per_call: float, nbytes: int) -> str:
    ops = 1.0 / per_call
    mbs = " %9.1f MB/s" % (nbytes * ops / 1e6) if nbytes else " " * 15
    return "%12.0f ops/s%s" % (ops, mbs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="short runs (CI smoke)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved before/after rounds per codec")
    args = parser.parse_args()
    min_time = 0.05 if args.fast else 0.5
    impls = {"native": {m: load(m, "native") for m in ("crc32c", "varint", "record_batch", "offset_index")},
             "pure": {m: load(m, "pure") for m in ("crc32c", "varint", "record_batch", "offset_index")}}

    kib, mib = os.urandom(1024), os.urandom(1 << 20)
    records = [(b"key-%06d" % i, os.urandom(100), [], 1_700_000_000_000 + i) for i in range(9000)]
    batch = build_batch(records)
    log = b"".join(build_batch(records[i:i + 10], base_offset=i) for i in range(0, 9000, 10))
    index = b"".join(struct.pack(">ii", i * 10, i * 4096) for i in range(100_000))
    tindex = b"".join(struct.pack(">qi", 1_700_000_000_000 + i * 7, i * 10) for i in range(100_000))
    enc = impls["pure"]["varint"].encode_varint(-123456789)
    lz4_records = [(None, os.urandom(50) + b"a" * 50, [], 1_700_000_000_000 + i) for i in range(1000)]
    lz4_section = build_batch(lz4_records, compression=LZ4)[RECORD_BATCH_OVERHEAD:]
    lz4_plain = decompress(LZ4, lz4_section)
    sections = {name: build_batch(lz4_records, compression=codec)[RECORD_BATCH_OVERHEAD:]
                for name, codec in (("gzip", GZIP), ("snappy", SNAPPY), ("lz4", LZ4), ("zstd", ZSTD))}
    # Kafka's Java producer streams zstd (zstd-jni): no content size in the frame; librdkafka's snappy is one raw block
    sections["zstd, no content size"] = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(lz4_plain)
    sections["snappy, raw block"] = snappy.compress(lz4_plain)
    assert sections["snappy"].startswith(XERIAL_MAGIC)
    codec_of = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD, "zstd, no content size": ZSTD,
                "snappy, raw block": SNAPPY}

    cases: list[tuple[str, int, Callable[[dict], Callable[[], Any]]]] = [
        ("crc32c 1 KiB", 1024, lambda m: lambda: m["crc32c"].crc32c(kib)),
        ("crc32c 1 MiB", 1 << 20, lambda m: lambda: m["crc32c"].crc32c(mib)),
        ("encode_varint", 0, lambda m: lambda: m["varint"].encode_varint(-123456789)),
        ("decode_varint", 0, lambda m: lambda: m["varint"].decode_varint(enc, 0)),
        ("validate_batches %d KiB x9000 rec" % (len(batch) >> 10), len(batch),
         lambda m: lambda: m["record_batch"].validate_batches(batch)),
        ("scan_batches %d KiB x900 batches" % (len(log) >> 10), len(log),
         lambda m: lambda: m["record_batch"].scan_batches(log)),
        ("scan_batches + CRC", len(log), lambda m: lambda: m["record_batch"].scan_batches(log, 0, -1, True)),
        ("index_lookup 100k entries", 0, lambda m: lambda: m["offset_index"].index_lookup(index, 100_000, 543_210)),
        ("time_index_lookup 100k", 0,
         lambda m: lambda: m["offset_index"].time_index_lookup(tindex, 100_000, 1_700_000_000_123_456)),
        ("lz4 batch 1000 x 100 B: decode+walk", len(lz4_plain),
         lambda m: lambda: m["record_batch"].lz4_frame_records(lz4_section, 1000, False)),
        ("  + null keys (compacted topic)", len(lz4_plain),
         lambda m: lambda: m["record_batch"].lz4_frame_records(lz4_section, 1000, True)),
        ("snappy batch 1000 x 100 B: decode+walk", len(lz4_plain),
         lambda m: lambda: m["record_batch"].compressed_records(SNAPPY, sections["snappy"], 1000, False)),
        ("zstd batch 1000 x 100 B: decode+walk", len(lz4_plain),
         lambda m: lambda: m["record_batch"].compressed_records(ZSTD, sections["zstd"], 1000, False)),
    ]
    print("%-36s %-34s %-34s %s" % ("benchmark", "native", "pure", "speed-up"))
    for name, nbytes, make in cases:
        t_native = bench(make(impls["native"]), min_time)
        t_pure = bench(make(impls["pure"]), min_time)
        print("%-36s %s   %s   %6.1fx" % (name, fmt(t_native, nbytes), fmt(t_pure, nbytes), t_pure / t_native))

    crcmod_fn = crcmod.predefined.mkCrcFun("crc-32c")
    native_crc = impls["native"]["crc32c"]
    print("\ncrc32c vs crcmod (hardware path: %s)" % native_crc.HARDWARE)
    for label, data in (("1 KiB", kib), ("1 MiB", mib)):
        t_n = bench(lambda: native_crc.crc32c(data), min_time)
        t_c = bench(lambda: crcmod_fn(data), min_time)
        t_s = bench(lambda: native_crc._crc32c_software(data), min_time)
        print("  %-6s native %s | slicing-by-8 %s | crcmod %s" % (label, fmt(t_n, len(data)), fmt(t_s, len(data)),
                                                                 fmt(t_c, len(data))))

    print("\nlz4 frame decoders, %d KiB frame -> %d KiB (native decoder loaded: %s)"
          % (len(lz4_section) >> 10, len(lz4_plain) >> 10, impls["native"]["record_batch"].LZ4_NATIVE))
    section_view = memoryview(bytearray(lz4_section))
    for label, fn in (("lz4.frame of a bytes copy", lambda: lz4.frame.decompress(bytes(section_view))),
                      ("compression.decompress", lambda: decompress(LZ4, section_view)),
                      ("native lz4_decompress", lambda: impls["native"]["record_batch"].lz4_decompress(section_view))):
        print("  %-28s %s" % (label, fmt(bench(fn, min_time), len(lz4_plain))))

    native_rb = impls["native"]["record_batch"]
    print("\nproduce validation of 1000 x 100 B, CPU us/record (process time: the figure a loaded machine distorts "
          "least; median of %d interleaved rounds; native decoders: lz4 %s, "
          "snappy %s, zstd %s via %s)" % (args.rounds, native_rb.LZ4_NATIVE, native_rb.SNAPPY_NATIVE,
                                          native_rb.ZSTD_NATIVE, native_rb.ZSTD_LIBRARY))
    print("  %-24s %10s %10s %8s" % ("codec", "before", "after", "ratio"))
    for name, section in sections.items():
        codec = codec_of[name]
        view = memoryview(bytearray(section))
        def before_fn(codec: int = codec, view: memoryview = view) -> None:
            native_rb.validate_records(decompress(codec, view), 1000)

        def after_fn(codec: int = codec, view: memoryview = view) -> None:
            native_rb.compressed_records(codec, view, 1000, False)

        before, after = [], []
        for _ in range(args.rounds):
            before.append(bench(before_fn, min_time / 3, time.process_time) * 1e6 / 1000)
            after.append(bench(after_fn, min_time / 3, time.process_time) * 1e6 / 1000)
        b, a = statistics.median(before), statistics.median(after)
        print("  %-24s %10.4f %10.4f %7.2fx" % (name, b, a, b / a))


if __name__ == "__main__":
    main()
