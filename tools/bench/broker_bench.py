"""End-to-end broker benchmark: real ZooKeeper, real broker process, confluent-kafka clients.

    .venv/bin/python -m tools.bench.broker_bench [--records 1000000] [--quick]

Prints, per scenario, client-side records/s, MB/s and latency percentiles, and the broker
process's own CPU seconds (user+system from /proc via psutil) per million records. Scenarios:
produce 1M x 100 B (acks=1/all x none/lz4), consume them back, produce+consume 20k x 10 KiB,
ack latency at 1,000 records/s, and how fast a consumer parked in Fetch
(fetch.wait.max.ms=500) sees a new record. Nothing here asserts: it prints figures.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, List

import psutil

from tests.harness.broker_process import BrokerProcess
from tests.harness.zookeeper import ZooKeeperServer
from tools import consumer_perf, producer_perf


def cpu_seconds(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def pct(values: List[float], q: float) -> float:
    return producer_perf.percentile(sorted(values), q)


def fetch_wakeup_latency(bootstrap: str, topic: str, samples: int) -> Dict[str, float]:
    """Producer sends one timestamped record every ~20 ms; a consumer parked in Fetch reads them."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wake", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
    lat: List[float] = []
    done = threading.Event()

    def consume() -> None:
        while not done.is_set():
            m = c.poll(0.2)
            if m is not None and not m.error():
                lat.append((time.perf_counter() - float(m.value())) * 1000.0)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(1.0)  # let the consumer reach its first long poll
    for _ in range(samples):
        p.produce(topic, repr(time.perf_counter()).encode())
        p.poll(0)
        time.sleep(0.02)
    p.flush(10)
    deadline = time.monotonic() + 5
    while len(lat) < samples and time.monotonic() < deadline:
        time.sleep(0.05)
    done.set()
    t.join()
    c.close()
    return {"samples": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "max_ms": max(lat or [0])}


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--large-records", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="small counts, to check the script works")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.records, a.large_records = 20_000, 1_000
    work = Path(tempfile.mkdtemp(prefix="broker-bench-"))
    zk = ZooKeeperServer()
    zk.start()
    broker = BrokerProcess(work, f"{zk.connect_string}/bench", overrides={"num.partitions": "1"})
    results: Dict[str, Dict[str, float]] = {}
    try:
        broker.start()
        assert broker.proc is not None
        pid = broker.proc.pid
        bs = broker.bootstrap

        def produce(name: str, n: int, size: int, acks: str, codec: str, throughput: float = -1,
                    props: Dict[str, str] | None = None) -> str:
            safe = "".join(ch if ch.isalnum() else "-" for ch in name)
            topic = f"bench-{safe}-{uuid.uuid4().hex[:4]}"
            create_topic(bs, topic)
            c0 = cpu_seconds(pid)
            r = producer_perf.run(bs, topic, n, size, throughput, acks, codec, props or {})
            r["broker_cpu_s"] = cpu_seconds(pid) - c0
            r["broker_cpu_us_per_record"] = r["broker_cpu_s"] / max(1, r["records"]) * 1e6
            results[f"produce {name}"] = r
            return topic

        # Latency first: after the bulk scenarios the kernel is still writing back hundreds of MB of
        # dirty pages, which stalls appends (measured: p99 ~20 ms instead of ~3 ms).
        n_lat = 2000 if a.quick else 10000
        produce("latency@1000rps acks=1", n_lat, 100, "1", "none", throughput=1000, props={"linger.ms": "0"})
        produce("latency@1000rps acks=all", n_lat, 100, "all", "none", throughput=1000, props={"linger.ms": "0"})

        wake_topic = f"bench-wake-{uuid.uuid4().hex[:4]}"
        create_topic(bs, wake_topic)
        results["fetch wake-up (fetch.wait.max.ms=500)"] = fetch_wakeup_latency(bs, wake_topic,
                                                                               100 if a.quick else 500)

        t_small = produce(f"{a.records}x100B acks=1 none", a.records, 100, "1", "none")
        produce(f"{a.records}x100B acks=all none", a.records, 100, "all", "none")
        produce(f"{a.records}x100B acks=1 lz4", a.records, 100, "1", "lz4")
        produce(f"{a.records}x100B acks=all lz4", a.records, 100, "all", "lz4")

        c0 = cpu_seconds(pid)
        r = consumer_perf.run(bs, t_small, a.records, 300, {})
        r["broker_cpu_s"] = cpu_seconds(pid) - c0
        results[f"consume {a.records}x100B"] = r

        t_large = produce(f"{a.large_records}x10KiB acks=1 none", a.large_records, 10240, "1", "none")
        c0 = cpu_seconds(pid)
        r = consumer_perf.run(bs, t_large, a.large_records, 300, {})
        r["broker_cpu_s"] = cpu_seconds(pid) - c0
        results[f"consume {a.large_records}x10KiB"] = r

    finally:
        broker.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)

    if a.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"{'scenario':48s} {'rec/s':>10s} {'MB/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} "
          f"{'brokerCPU s':>11s} {'us/rec':>7s}")
    for name, r in results.items():
        print(f"{name:48s} {r.get('records_per_s', float('nan')):10.0f} {r.get('mb_per_s', float('nan')):8.1f} "
              f"{r.get('latency_p50_ms', r.get('p50_ms', float('nan'))):8.2f} "
              f"{r.get('latency_p99_ms', r.get('p99_ms', float('nan'))):8.2f} "
              f"{r.get('latency_max_ms', r.get('max_ms', float('nan'))):8.2f} "
              f"{r.get('broker_cpu_s', float('nan')):11.2f} {r.get('broker_cpu_us_per_record', float('nan')):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
