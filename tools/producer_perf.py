"""Producer load test in the spirit of kafka-producer-perf-test.sh (confluent-kafka client).

    python -m tools.producer_perf --bootstrap-server localhost:9092 --topic t --num-records 1000000 \
        --record-size 100 [--throughput -1] [--acks 1] [--compression none] [--producer-prop k=v ...]

Prints records/s, MB/s and ack latency percentiles (p50/p99/p99.9/max, ms); ``--json`` prints
one JSON object instead, for scripts.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Dict, List


def percentile(sorted_values: List[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[i]


def run(bootstrap: str, topic: str, num_records: int, record_size: int, throughput: float, acks: str,
        compression: str, props: Dict[str, str], warmup_records: int = 0) -> Dict[str, float]:
    """Produce and measure; ``warmup_records`` are sent and flushed first, untimed (metadata, producer id, a
    warm JIT on the broker side), so the figures describe the steady state."""
    from confluent_kafka import Producer

    conf: Dict[str, object] = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": compression,
                               "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                               "queue.buffering.max.kbytes": 2_000_000}
    if acks != "all":
        conf["enable.idempotence"] = False
    conf.update(props)
    producer = Producer(conf)
    payload = os.urandom(record_size // 2).hex().encode()[:record_size].ljust(record_size, b"x")
    latencies: List[float] = []
    errors = [0]

    def make_cb(t0: float):
        def cb(err, msg) -> None:
            if err is not None:
                errors[0] += 1
            else:
                latencies.append((time.perf_counter() - t0) * 1000.0)
        return cb

    if warmup_records > 0:
        for _ in range(warmup_records):
            while True:
                try:
                    producer.produce(topic, payload)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(120)
    start = time.perf_counter()
    interval = 1.0 / throughput if throughput > 0 else 0.0
    for i in range(num_records):
        if interval:
            target = start + i * interval
            now = time.perf_counter()
            if target > now:
                producer.poll(0)
                time.sleep(target - now)
        while True:
            try:
                producer.produce(topic, payload, on_delivery=make_cb(time.perf_counter()))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    latencies.sort()
    done = len(latencies)
    return {
        "records": done, "errors": errors[0] + remaining, "elapsed_s": elapsed,
        "records_per_s": done / elapsed, "mb_per_s": done * record_size / elapsed / 1e6,
        "latency_p50_ms": percentile(latencies, 0.50), "latency_p99_ms": percentile(latencies, 0.99),
        "latency_p999_ms": percentile(latencies, 0.999), "latency_max_ms": latencies[-1] if latencies else float("nan"),
        "latency_avg_ms": sum(latencies) / done if done else float("nan"),
    }


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--num-records", type=int, required=True)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--throughput", type=float, default=-1, help="records/s cap; -1 = unthrottled")
    ap.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"])
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--producer-prop", action="append", default=[], metavar="k=v")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    props = dict(p.split("=", 1) for p in a.producer_prop)
    r = run(a.bootstrap_server, a.topic, a.num_records, a.record_size, a.throughput,
            "all" if a.acks == "-1" else a.acks, a.compression, props)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['records']} records sent, {r['records_per_s']:.1f} records/sec ({r['mb_per_s']:.2f} MB/sec), "
              f"{r['latency_avg_ms']:.2f} ms avg latency, {r['latency_max_ms']:.2f} ms max latency, "
              f"{r['latency_p50_ms']:.2f} ms 50th, {r['latency_p99_ms']:.2f} ms 99th, "
              f"{r['latency_p999_ms']:.2f} ms 99.9th; errors {r['errors']}")
    return 0 if r["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
