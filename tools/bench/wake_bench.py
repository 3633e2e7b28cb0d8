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
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol.api import encode_request  # noqa: E402
from broker.protocol.records.builder import build_batch  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402
from tools.bench.broker_bench import (  # noqa: E402
    Target, create_topic, make_targets, missing_peer, parse_peers,
)
from tools.bench.process_cpu import CpuMeter  # noqa: E402

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PRODUCE_VERSION = 9


def produce_frames(topic: str, records: int, size: int, codec: str, count: int = 50) -> List[bytes]:
    """``count`` Produce request frames (correlation ids 0..count-1) carrying one batch of ``records`` equal values."""
    value = os.urandom(size // 2 + 1).hex().encode()[:size]
    batch = build_batch([(None, value)] * records, compression=CODECS[codec])
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return [encode_request(0, PRODUCE_VERSION, i, "wake-bench", body) for i in range(count)]


class Sender:
    """One connection that sends a frame and reads its whole answer (error codes are not decoded: figures only)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), 30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def round_trip(self, frame: bytes) -> None:
        self.sock.sendall(frame)
        head = self._read(4)
        self._read(struct.unpack(">i", head)[0])

    def _read(self, n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        self.sock.close()


def measure(target: Target, topic: str, frames: Sequence[bytes], requests: int, gap_ms: float) -> float:
    """Broker CPU µs per request over ``requests`` round trips with ``gap_ms`` of client sleep between them."""
    s = Sender(target.bootstrap)
    try:
        for f in frames:  # warm-up: connection, topic, first segment
            s.round_trip(f)
        gap = gap_ms / 1000.0
        meter = CpuMeter(target.pid)
        for i in range(requests):
            s.round_trip(frames[i % len(frames)])
            if gap:
                time.sleep(gap)
        return meter.seconds() / requests * 1e6
    finally:
        s.close()


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", type=parse_peers, default=[], help="comma-separated: tansu, kafka")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--gaps", default="0,1,5", help="comma-separated idle gaps between requests, ms")
    ap.add_argument("--records", type=int, default=3300, help="records per request (librdkafka sent ~3,300 here)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--codec", choices=sorted(CODECS), default="lz4")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    missing = missing_peer(a.peers)
    if missing:
        print(f"wake_bench: {missing}", file=sys.stderr)
        return 2
    gaps = [float(g) for g in a.gaps.split(",") if g.strip()]
    work = Path(tempfile.mkdtemp(prefix="wake-bench-"))
    zk = ZooKeeperServer()
    zk.start()
    targets = make_targets(work, zk.connect_string, a.peers)
    results: Dict[str, Dict[float, List[float]]] = {t.name: {g: [] for g in gaps} for t in targets}
    started: List[Target] = []
    try:
        for t in targets:
            t.start()
            started.append(t)
        topic = f"wake-{os.getpid()}"
        frames = produce_frames(topic, a.records, a.size, a.codec)
        print(f"wake_bench: one request is {len(frames[0])} bytes ({a.records} x {a.size} B, {a.codec})",
              file=sys.stderr)
        for t in targets:
            create_topic(t.bootstrap, topic)
            if t.warm:  # the JVM's JIT: one unmeasured pass
                measure(t, topic, frames, a.requests, 0)
        for _ in range(max(1, a.rounds)):
            for g in gaps:
                for t in targets:  # interleaved, so a slower minute of the machine hits every target alike
                    results[t.name][g].append(measure(t, topic, frames, a.requests if not g else
                                                      max(200, a.requests // 4), g))
            print(f"wake_bench: round {_ + 1} done", file=sys.stderr, flush=True)
    finally:
        for t in reversed(started):
            t.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)

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
