"""Consumer-group benchmark: real ZooKeeper, real broker process, confluent-kafka consumers.

    .venv/bin/python -m tools.bench.group_bench [--trials 3] [--initial-delay-ms 0] [--commits 1000]

Prints, per trial: the time for 3 consumers subscribing to a 6-partition topic to hold all
partitions (minus group.initial.rebalance.delay.ms), the time for the 2 remaining consumers to
hold all partitions again after one leaves, and synchronous commit latency p50/p99/max.
Nothing here asserts: it prints figures.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import List

from tests.harness.broker_process import BrokerProcess
from tests.harness.zookeeper import ZooKeeperServer
from tools.producer_perf import percentile


def _consumer(bootstrap: str, group: str):
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
                     "partition.assignment.strategy": "range"})


def _wait_cover(consumers: List, n_partitions: int, timeout: float = 30.0) -> float:
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.01)
        held = [len(c.assignment()) for c in consumers]
        if sum(held) == n_partitions and all(held):
            return time.perf_counter() - t0
    raise TimeoutError("consumers did not cover all partitions")


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--initial-delay-ms", type=int, default=0)
    ap.add_argument("--commits", type=int, default=1000)
    a = ap.parse_args(argv)
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    work = Path(tempfile.mkdtemp(prefix="group-bench-"))
    zk = ZooKeeperServer()
    zk.start()
    broker = BrokerProcess(work, f"{zk.connect_string}/gbench",
                           overrides={"group.initial.rebalance.delay.ms": str(a.initial_delay_ms)})
    try:
        broker.start()
        bs = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        print(f"{'trial':>5s} {'assign 3 (s)':>13s} {'rebalance after leave (s)':>26s} "
              f"{'commit p50 ms':>14s} {'p99 ms':>8s} {'max ms':>8s}")
        for trial in range(a.trials):
            topic = f"gb-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
            group = f"{topic}-g"
            cs = [_consumer(bs, group) for _ in range(3)]
            for c in cs:
                c.subscribe([topic])
            assign_s = _wait_cover(cs, 6) - a.initial_delay_ms / 1000.0
            leaving = cs.pop()
            t0 = time.perf_counter()
            leaving.close()
            _wait_cover(cs, 6)
            rebalance_s = time.perf_counter() - t0  # from the leaver's close() to full coverage again
            lat: List[float] = []
            c = cs[0]
            tps = [TopicPartition(topic, tp.partition, 1) for tp in c.assignment()]
            for i in range(a.commits):
                for tp in tps:
                    tp.offset = i + 1
                t1 = time.perf_counter()
                c.commit(offsets=tps, asynchronous=False)
                lat.append((time.perf_counter() - t1) * 1000.0)
            lat.sort()
            for c in cs:
                c.close()
            print(f"{trial:5d} {assign_s:13.3f} {rebalance_s:26.3f} {percentile(lat, 0.5):14.2f} "
                  f"{percentile(lat, 0.99):8.2f} {lat[-1]:8.2f}")
    finally:
        broker.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
