"""Transactions benchmark: this broker beside Apache Kafka 3.9.1, one broker each, same machine, same run, same client.

    python -m tools.bench.txn_bench [--records N] [--txn-size 100] [--commits N] [--quick] [--only ours|kafka] [--json]

Per broker (one broker, a fresh ZooKeeper chroot, ``__transaction_state`` with Kafka's 50 partitions at RF 1), with
confluent-kafka (librdkafka) as the client for both, 100 B records to a 1-partition topic, acks=all:

- transactional produce: N records in transactions of ``--txn-size`` records (begin, produce, commit_transaction, one
  producer, one transaction after the other), against idempotent non-transactional produce of the same N records:
  records/s, MB/s, broker CPU per record (user+system of the broker process), and the ratio transactional/idempotent;
- commit latency: ``--commits`` transactions of ``--txn-size`` records, each flushed first so that only the
  commit_transaction round trip is timed (EndTxn; Kafka and we answer it once PrepareCommit is logged): p50/p99/max;
- consume: N records in transactions of ``--txn-size`` with every 5th transaction aborted, read from offset 0 by one
  consumer with isolation.level=read_committed (aborted records dropped, via the fetch's aborted-transaction list)
  and with read_uncommitted (everything), alternately, the better of two runs each, timed from the assignment:
  delivered records/s and MB/s, broker CPU per delivered record.

Prints one table with both brokers and the ratio ours/kafka; nothing is asserted. A broker whose run fails leaves a
gap and its logs (the directory is printed); the other broker's figures are still printed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.kafka import RealKafkaBroker
from tools.bench.process_cpu import broker_cpu_seconds
from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port

RECORD = b"x" * 100
ABORT_EVERY = 5
SINGLE_BROKER = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "offsets.topic.replication.factor": "1", "num.partitions": "1",
                 "group.initial.rebalance.delay.ms": "0"}
PRODUCER = {"acks": "all", "linger.ms": 5, "batch.size": 1048576, "queue.buffering.max.kbytes": 65536}


class Subject:
    """One broker (ours or Kafka's) with its own ZooKeeper chroot."""

    def __init__(self, kind: str, workdir: Path, zk: str) -> None:
        self.kind = kind
        chroot = f"{zk}/{kind}-{uuid.uuid4().hex[:6]}"
        self.broker: Any = (BrokerProcess(workdir / kind, chroot, overrides=SINGLE_BROKER) if kind == "ours"
                            else RealKafkaBroker(workdir / kind, chroot, 0, overrides=SINGLE_BROKER, full_jit=True))

    @property
    def bootstrap(self) -> str:
        return str(self.broker.bootstrap)

    def start(self) -> None:
        self.broker.start(timeout=120)

    def stop(self) -> None:
        try:
            self.broker.stop()
        except Exception:
            self.broker.kill()

    def cpu_seconds(self) -> float:
        return broker_cpu_seconds(self.broker)


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} has no leader")


def _send(p: Producer, topic: str, n: int) -> None:
    for _ in range(n):
        while True:
            try:
                p.produce(topic, RECORD)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)


def transactional_producer(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}", **PRODUCER})
    p.init_transactions(60)
    return p


def run_transactions(p: Producer, topic: str, records: int, txn_size: int, abort_every: int = 0) -> int:
    """Transactions of ``txn_size`` until ``records`` are sent; every ``abort_every``-th is aborted. Committed count."""
    committed = 0
    for i in range(max(1, records // txn_size)):
        p.begin_transaction()
        _send(p, topic, txn_size)
        if abort_every and i % abort_every == abort_every - 1:
            assert p.flush(60) == 0  # else librdkafka drops the unsent records and the log never sees them
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += txn_size
    return committed


def bench_produce(s: Subject, records: int, txn_size: int) -> Dict[str, Dict[str, float]]:
    out: Dict[str, Dict[str, float]] = {}
    for mode in ("transactional", "idempotent"):
        topic = f"{mode}-{uuid.uuid4().hex[:6]}"
        create_topic(s.bootstrap, topic)
        if mode == "transactional":
            p = transactional_producer(s.bootstrap)
            run_transactions(p, topic, min(records // 10, 20 * txn_size), txn_size)  # warm-up, not timed
        else:
            p = Producer({"bootstrap.servers": s.bootstrap, "enable.idempotence": True, **PRODUCER})
            _send(p, topic, records // 10)
            p.flush(60)
        cpu0, t0 = s.cpu_seconds(), time.perf_counter()
        if mode == "transactional":
            run_transactions(p, topic, records, txn_size)
            sent = max(1, records // txn_size) * txn_size
        else:
            _send(p, topic, records)
            left = p.flush(300)
            assert left == 0, f"{left} records undelivered"
            sent = records
        elapsed = time.perf_counter() - t0
        cpu = s.cpu_seconds() - cpu0
        out[mode] = {"records_per_s": sent / elapsed, "mb_per_s": sent * len(RECORD) / elapsed / 1e6,
                     "cpu_us_per_record": cpu / sent * 1e6}
    return out


def bench_commit_latency(s: Subject, commits: int, txn_size: int) -> Dict[str, float]:
    topic = f"commit-{uuid.uuid4().hex[:6]}"
    create_topic(s.bootstrap, topic)
    p = transactional_producer(s.bootstrap)
    run_transactions(p, topic, 5 * txn_size, txn_size)  # warm-up
    lat: List[float] = []
    for _ in range(commits):
        p.begin_transaction()
        _send(p, topic, txn_size)
        assert p.flush(60) == 0
        t0 = time.perf_counter()
        p.commit_transaction(60)
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))]
    return {"p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": lat[-1]}


def _consume(s: Subject, topic: str, isolation: str, expected: int) -> Dict[str, float]:
    """One consumer reads the partition from offset 0 until ``expected`` records arrived; timed from the assignment
    (the client is connected and has the metadata by then, so only fetching is timed)."""
    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation, "fetch.max.bytes": 52428800})
    c.list_topics(topic, timeout=30)
    got, nbytes = 0, 0
    cpu0, t0 = s.cpu_seconds(), time.perf_counter()
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 600
    while got < expected and time.monotonic() < deadline:
        for m in c.consume(min(10_000, expected - got), timeout=1.0):  # returns as soon as the last one is in
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - t0
    cpu = s.cpu_seconds() - cpu0
    c.close()
    if got != expected:
        raise RuntimeError(f"{isolation}: read {got} records, expected {expected}")
    return {"records_per_s": got / elapsed, "mb_per_s": nbytes / elapsed / 1e6, "cpu_us_per_record": cpu / got * 1e6}


def bench_consume(s: Subject, records: int, txn_size: int) -> Dict[str, Any]:
    topic = f"consume-{uuid.uuid4().hex[:6]}"
    create_topic(s.bootstrap, topic)
    p = transactional_producer(s.bootstrap)
    committed = run_transactions(p, topic, records, txn_size, abort_every=ABORT_EVERY)
    total = max(1, records // txn_size) * txn_size
    out: Dict[str, Any] = {"committed": committed, "total": total}
    _consume(s, topic, "read_uncommitted", total)  # warm-up: the log into the page cache, the client started
    runs: Dict[str, List[Dict[str, float]]] = {"read_committed": [], "read_uncommitted": []}
    for _ in range(2):  # alternated, the better of two each
        runs["read_committed"].append(_consume(s, topic, "read_committed", committed))
        runs["read_uncommitted"].append(_consume(s, topic, "read_uncommitted", total))
    for isolation, rs in runs.items():
        out[isolation] = max(rs, key=lambda r: r["records_per_s"])
    return out


def run(kind: str, workdir: Path, zk: str, a: argparse.Namespace) -> Dict[str, Any]:
    s = Subject(kind, workdir, zk)
    s.start()
    out: Dict[str, Any] = {"errors": {}}
    try:
        scenarios = [("produce", lambda: bench_produce(s, a.records, a.txn_size)),
                     ("commit_latency", lambda: bench_commit_latency(s, a.commits, a.txn_size)),
                     ("consume", lambda: bench_consume(s, a.records, a.txn_size))]
        for name, fn in scenarios:
            try:
                out[name] = fn()
            except Exception as exc:
                out["errors"][name] = f"{type(exc).__name__}: {exc}"
                print(f"[{kind}] {name} failed: {exc}", file=sys.stderr)
    finally:
        s.stop()
    return out


def ratio(x: float, y: float) -> str:
    return f"{x / y:6.2f}x" if y and x == x and y == y else "   n/a"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--txn-size", type=int, default=100, help="records per transaction")
    ap.add_argument("--commits", type=int, default=1000, help="transactions timed for the commit latency")
    ap.add_argument("--quick", action="store_true", help="small counts, to check the script works")
    ap.add_argument("--only", choices=("ours", "kafka"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.records, a.commits = min(a.records, 3000), min(a.commits, 30)
    workdir = Path(tempfile.mkdtemp(prefix="txn-bench-"))
    zk = ZooKeeperProcess(workdir, free_port())
    zk.start()
    results: Dict[str, Dict[str, Any]] = {}
    try:
        for kind in ("ours", "kafka"):
            if a.only and a.only != kind:
                continue
            try:
                results[kind] = run(kind, workdir, zk.connect_string, a)
            except Exception as exc:  # e.g. the broker did not start: keep the other broker's figures
                results[kind] = {"errors": {"start": f"{type(exc).__name__}: {exc}"}}
    finally:
        zk.stop()
    failed = any(r.get("errors") for r in results.values())
    if not failed:
        shutil.rmtree(workdir, ignore_errors=True)
    if a.json:
        print(json.dumps(results, indent=1))
        return 0

    def g(r: Dict[str, Any], *path: str) -> float:
        for p in path:
            r = r.get(p, {}) if isinstance(r, dict) else {}
        return float(r) if isinstance(r, (int, float)) else float("nan")

    ours, kafka = results.get("ours", {}), results.get("kafka", {})
    print(f"one broker each, one machine ({os.cpu_count()} cores), confluent-kafka, {len(RECORD)} B records, "
          f"acks=all, {a.txn_size} records per transaction, {a.records} records")
    print(f"{'metric':50s} {'ours':>12s} {'kafka 3.9.1':>12s} {'ours/kafka':>10s}")
    rows = [
        ("transactional produce records/s", ("produce", "transactional", "records_per_s")),
        ("idempotent produce records/s", ("produce", "idempotent", "records_per_s")),
        ("transactional produce MB/s", ("produce", "transactional", "mb_per_s")),
        ("idempotent produce MB/s", ("produce", "idempotent", "mb_per_s")),
        ("transactional produce CPU us/record", ("produce", "transactional", "cpu_us_per_record")),
        ("idempotent produce CPU us/record", ("produce", "idempotent", "cpu_us_per_record")),
        ("commit_transaction p50 ms", ("commit_latency", "p50_ms")),
        ("commit_transaction p99 ms", ("commit_latency", "p99_ms")),
        ("commit_transaction max ms", ("commit_latency", "max_ms")),
        ("read_committed consume records/s", ("consume", "read_committed", "records_per_s")),
        ("read_uncommitted consume records/s", ("consume", "read_uncommitted", "records_per_s")),
        ("read_committed consume MB/s", ("consume", "read_committed", "mb_per_s")),
        ("read_uncommitted consume MB/s", ("consume", "read_uncommitted", "mb_per_s")),
        ("read_committed CPU us/record", ("consume", "read_committed", "cpu_us_per_record")),
        ("read_uncommitted CPU us/record", ("consume", "read_uncommitted", "cpu_us_per_record")),
    ]
    for label, path in rows:
        o, k = g(ours, *path), g(kafka, *path)
        print(f"{label:50s} {o:12.2f} {k:12.2f} {ratio(o, k):>10s}")
    for kind, r in results.items():
        tx, idem = g(r, "produce", "transactional", "records_per_s"), g(r, "produce", "idempotent", "records_per_s")
        rc, ru = (g(r, "consume", "read_committed", "records_per_s"),
                  g(r, "consume", "read_uncommitted", "records_per_s"))
        print(f"{kind}: transactional/idempotent produce {ratio(tx, idem).strip()}, "
              f"read_committed/read_uncommitted consume {ratio(rc, ru).strip()} "
              f"({r.get('consume', {}).get('committed', 0)} of {r.get('consume', {}).get('total', 0)} records "
              f"committed, every {ABORT_EVERY}th transaction aborted)")
        for name, err in r.get("errors", {}).items():
            print(f"{kind}: {name} did not complete: {err} (logs in {workdir / kind})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
