"""Log cleaner benchmark: cleaner throughput (MB of log cleaned per second) and produce throughput
into the same broker process while the cleaner runs, compared with produce throughput without it.

In-process, on a real Log in a temp dir (no network): phase 1 appends N updates over K keys with
no cleaner (baseline); phase 2 cleans that log on a cleaner thread while the same producer loop
appends another N updates (Log.append_as_leader, as the produce path does). Both cleaner modes
run: on a thread (sharing the GIL) and in the worker process (the broker default). Prints figures.

    .venv/bin/python -m tools.bench.cleaner_bench [--records 500000] [--keys 10000] [--batch 500] [--fast]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

from broker.accel import IMPLEMENTATION
from broker.protocol.records.builder import build_batch
from broker.storage.cleaner import Cleaner, CleanerConfig, CleanResult
from broker.storage.config import LogConfig
from broker.storage.log import Log


def _batches(n_records: int, n_keys: int, batch: int, start: int) -> list[bytes]:
    out = []
    ts = int(time.time() * 1000)
    for b in range(start, start + n_records, batch):
        recs = [(b"key-%06d" % (i % n_keys), b"value-%09d-%s" % (i, b"x" * 40), [], ts)
                for i in range(b, min(b + batch, start + n_records))]
        out.append(build_batch(recs, compression=3))  # lz4, as most producers
    return out


def _produce(log: Log, batches: list[bytes]) -> tuple[float, int, int]:
    """Append every batch; returns (seconds, records, bytes)."""
    t0 = time.perf_counter()
    recs = size = 0
    for data in batches:
        info = log.append_as_leader(bytearray(data), 0)
        log.update_high_watermark(log.log_end_offset)
        recs += info.last_offset - info.first_offset + 1
        size += len(data)
    return time.perf_counter() - t0, recs, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--segment-bytes", type=int, default=4 << 20)
    ap.add_argument("--fast", action="store_true", help="small run proving the script works")
    args = ap.parse_args()
    if args.fast:
        args.records, args.keys = 20_000, 1_000
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=args.segment_bytes, file_delete_delay_ms=0)
    print("implementation: %s; %d updates over %d keys, %d records/batch, segment.bytes=%d"
          % (IMPLEMENTATION, args.records, args.keys, args.batch, args.segment_bytes))
    first = _batches(args.records, args.keys, args.batch, 0)
    second = _batches(args.records, args.keys, args.batch, args.records)
    for mode in ("thread", "process"):
        _run_mode(mode, cfg, first, second)


def _run_mode(mode: str, cfg: LogConfig, first: list[bytes], second: list[bytes]) -> None:
    cleaner = Cleaner(CleanerConfig(use_worker_process=mode == "process"))
    with tempfile.TemporaryDirectory() as d:
        log = Log.open(os.path.join(d, "bench-0"), cfg)
        secs, recs, size = _produce(log, first)
        base_rate = recs / secs
        print("[%s] produce without cleaner: %.0f records/s, %.1f MB/s (%d records in %.2f s)"
              % (mode, base_rate, size / secs / 1e6, recs, secs))
        log.roll()
        dirty_bytes = log.size_bytes
        result: list[CleanResult] = []
        clean_secs = [0.0]

        def run_cleaner() -> None:
            t0 = time.perf_counter()
            result.append(cleaner.clean(log, 0))
            clean_secs[0] = time.perf_counter() - t0

        th = threading.Thread(target=run_cleaner, name="cleaner-bench")
        th.start()
        secs2, recs2, size2 = _produce(log, second)
        th.join()
        cleaner.close()
        st = result[0].stats
        print("[%s] cleaner: %.1f MB (%d records) cleaned in %.2f s = %.1f MB/s, %.0f records/s (wrote %.2f MB, "
              "%d records)" % (mode, dirty_bytes / 1e6, st.messages_read, clean_secs[0],
                               dirty_bytes / 1e6 / clean_secs[0], st.messages_read / clean_secs[0],
                               st.bytes_written / 1e6, st.messages_written))
        print("[%s] produce while cleaning: %.0f records/s, %.1f MB/s = %.0f%% of the rate without it "
              "(cleaner overlapped %.2f of %.2f s)" % (mode, recs2 / secs2, size2 / secs2 / 1e6,
                                                       100.0 * recs2 / secs2 / base_rate,
                                                       min(secs2, clean_secs[0]), secs2))
        log.close()


if __name__ == "__main__":
    main()
