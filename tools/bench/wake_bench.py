"""Broker CPU per Produce request, sent back to back and after an idle gap, ours beside the peers in one run.

    .venv/bin/python -m tools.bench.wake_bench [--peers tansu,kafka] [--requests 2000] [--gaps 0,1,5]
                                               [--records 3300] [--size 100] [--codec lz4] [--rounds 3]

Why: the end-to-end rows of ``broker_bench`` send one Produce every few milliseconds (the client's linger), so the
broker sleeps in ``epoll_wait`` between requests and starts each one with cold caches. On this machine (a 2-vCPU
Firecracker guest) that roughly triples the CPU a Python request path costs, while compiled code barely notices it.
This bench isolates that: one raw socket sends the same pre-built Produce request (v9, acks=1, one partition, one
magic-2 batch of ``--records`` records like librdkafka's: the same ``--size`` value each time, compressed) and waits
for each answer, ``--gaps`` milliseconds of sleep between requests; the broker's process-tree CPU
(``process_cpu.CpuMeter``, to the nanosecond) over ``--requests`` requests is divided by their count. The client
does no work between requests, so a gap measures what idleness alone costs.

Printed per target and gap: broker CPU µs per request (median of ``--rounds``), µs per record, and ours/peer. Figures
only; no assertions.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol.api import encode_request  # noqa: E402
from broker.protocol.records.builder import build_batch  # noqa: E402
from broker.storage.validator import TOPIC_CODECS  # noqa: E402
from tools.bench.broker_bench import Target, create_topic, missing_peer, parse_peers, running_targets  # noqa: E402
from tools.bench.codec_cpu_bench import Client  # noqa: E402
from tools.bench.process_cpu import CpuMeter  # noqa: E402

PRODUCE_VERSION = 9


def produce_frames(topic: str, records: int, size: int, codec: str, count: int = 50) -> List[bytes]:
    """``count`` Produce request frames (correlation ids 0..count-1) carrying one batch of ``records`` equal values."""
    value = os.urandom(size // 2 + 1).hex().encode()[:size]
    batch = build_batch([(None, value)] * records, compression=TOPIC_CODECS[codec])
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return [encode_request(0, PRODUCE_VERSION, i, "wake-bench", body) for i in range(count)]


def measure(target: Target, topic: str, frames: Sequence[bytes], requests: int, gap_ms: float) -> float:
    """Broker CPU µs per request over ``requests`` round trips with ``gap_ms`` of client sleep between them."""
    client = Client(target.bootstrap)
    try:
        for f in frames:  # warm-up: connection, topic, first segment
            client.exchange(f)
        gap = gap_ms / 1000.0
        meter = CpuMeter(target.pid)
        for i in range(requests):
            client.exchange(frames[i % len(frames)])
            if gap:
                time.sleep(gap)
        return meter.seconds() / requests * 1e6
    finally:
        client.sock.close()


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", type=parse_peers, default=[], help="comma-separated: tansu, kafka")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--gaps", default="0,1,5", help="comma-separated idle gaps between requests, ms")
    ap.add_argument("--records", type=int, default=3300, help="records per request (librdkafka sent ~3,300 here)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--codec", choices=sorted(TOPIC_CODECS), default="lz4")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    missing = missing_peer(a.peers)
    if missing:
        print(f"wake_bench: {missing}", file=sys.stderr)
        return 2
    gaps = [float(g) for g in a.gaps.split(",") if g.strip()]
    with running_targets("wake-bench-", a.peers) as targets:
        results: Dict[str, Dict[float, List[float]]] = {t.name: {g: [] for g in gaps} for t in targets}
        topic = f"wake-{os.getpid()}"
        frames = produce_frames(topic, a.records, a.size, a.codec)
        print(f"wake_bench: one request is {len(frames[0])} bytes ({a.records} x {a.size} B, {a.codec})",
              file=sys.stderr)
        for t in targets:
            create_topic(t.bootstrap, topic)
            if t.warm:  # the JVM's JIT: one unmeasured pass
                measure(t, topic, frames, a.requests, 0)
        for rnd in range(max(1, a.rounds)):
            for g in gaps:
                for t in targets:  # interleaved, so a slower minute of the machine hits every target alike
                    results[t.name][g].append(measure(t, topic, frames, a.requests if not g else
                                                      max(200, a.requests // 4), g))
            print(f"wake_bench: round {rnd + 1} done", file=sys.stderr, flush=True)

    names = [t.name for t in targets]
    print(f"{'gap ms':>6s} {'target':8s} {'us/request':>10s} {'us/record':>9s} {'ours/peer':>9s}")
    for g in gaps:
        ours = statistics.median(results["ours"][g])
        for n in names:
            v = statistics.median(results[n][g])
            ratio = "" if n == "ours" else f"{ours / v:9.2f}"
            print(f"{g:6.0f} {n:8s} {v:10.1f} {v / a.records:9.3f} {ratio:>9s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
