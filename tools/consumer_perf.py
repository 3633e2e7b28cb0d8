"""Consumer load test in the spirit of kafka-consumer-perf-test.sh (confluent-kafka client).

    python -m tools.consumer_perf --bootstrap-server localhost:9092 --topic t --messages 1000000

Reads from offset 0 of every partition with ``assign`` (no group coordination needed) and
prints records/s and MB/s; ``--json`` prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Dict, List


def run(bootstrap: str, topic: str, messages: int, timeout_s: float, props: Dict[str, str]) -> Dict[str, float]:
    from confluent_kafka import Consumer, TopicPartition

    conf: Dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": "consumer-perf",
                               "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                               "max.partition.fetch.bytes": 10485760, "queued.max.messages.kbytes": 1048576}
    conf.update(props)
    c = Consumer(conf)
    md = c.list_topics(topic, timeout=10)
    parts = list(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    n = 0
    nbytes = 0
    start = None
    deadline = time.monotonic() + timeout_s
    while n < messages and time.monotonic() < deadline:
        batch = c.consume(10000, 1.0)
        if batch and start is None:
            start = time.perf_counter()
        for m in batch:
            if m.error():
                continue
            n += 1
            v = m.value()
            nbytes += len(v) if v else 0
    end = time.perf_counter()
    c.close()
    elapsed = end - (start or end) or 1e-9
    return {"records": n, "bytes": nbytes, "elapsed_s": elapsed, "records_per_s": n / elapsed,
            "mb_per_s": nbytes / elapsed / 1e6}


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--consumer-prop", action="append", default=[], metavar="k=v")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = run(a.bootstrap_server, a.topic, a.messages, a.timeout, dict(p.split("=", 1) for p in a.consumer_prop))
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['records']} records, {r['bytes'] / 1e6:.1f} MB in {r['elapsed_s']:.2f} s: "
              f"{r['records_per_s']:.1f} records/sec, {r['mb_per_s']:.2f} MB/sec")
    return 0 if r["records"] >= a.messages else 1


if __name__ == "__main__":
    sys.exit(main())
