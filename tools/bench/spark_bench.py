"""Spark benchmark: Spark's Kafka connector reading our broker beside a real Apache Kafka 3.9.1 broker, same machine,
same data, same Spark session; and the streaming pipeline's end-to-end latency on each.

    .venv/bin/python -m tools.bench.spark_bench [--records 1000000] [--trials 3] [--latency-s 60] [--quick]
                                                [--only ours|kafka]

One ZooKeeper; one broker of ours (bin/kafka-server-start.sh) and one Kafka 3.9.1 broker (kafka.Kafka from the jars
the install step resolved), each on its own chroot. For each broker:

- **read**: N records of 100 B are produced to a 4-partition topic (confluent-kafka, idempotent, linger.ms=20,
  the same bytes for both); then ``spark.read.format("kafka")`` reads the whole topic and sums the value lengths
  (so every record is fetched and decoded). One warm-up read, then ``--trials`` timed reads, alternating between
  the brokers; records/s of the best and the median trial.
- **latency**: the pipeline's streaming job (pipeline/streaming.py: parse, stream-static join with the users,
  one-second windows, watermark 0, Kafka sink, back-to-back micro-batches) runs while a producer sends page views
  stamped with the current time at 500/s for ``--latency-s``. A window's row can be complete only once its last
  event could have been produced (the window's end); the latency of a window is the time from its end to its row's
  arrival in the output topic (seen by a consumer). p50/p99 over the windows. A discarded warm-up run first
  (``--warmup-s``), so neither broker pays for the JIT.

Prints a table with both brokers and ours/kafka. Nothing here asserts.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pipeline import events, generator
from pipeline.topics import Topics, create_topics
from tests.harness.kafka import RealKafkaBroker
from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port

PARTITIONS = 4
COMMON = {"num.partitions": "1", "offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0",
          "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
          "offsets.topic.num.partitions": "4"}


def wait(pred: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


def load(bootstrap: str, topic: str, records: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)[topic].result(40)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 20,
                  "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000})
    pad = b"x" * (size - 10)
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=b"%010d" % i + pad, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(300)
    if left:
        raise RuntimeError(f"{left} records undelivered")


def read_once(spark: Any, bootstrap: str, topic: str, records: int) -> float:
    """Records/s of one full read of ``topic``."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    row = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
           .load().agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0])
    elapsed = time.perf_counter() - t0
    if row["n"] != records:
        raise RuntimeError(f"read {row['n']} records of {records} from {bootstrap}")
    return records / elapsed


def latency(spark: Any, bootstrap: str, work: Path, seconds: float, rate: float = 500.0) -> Dict[str, float]:
    """p50/p99 ms from a one-second window's end to its row in the output topic (see the module docstring)."""
    from pipeline import streaming

    topics = Topics(f"lat-{uuid.uuid4().hex[:6]}.")
    create_topics(bootstrap, topics, partitions=2)
    plan = events.generate(seed=1, num_events=1, num_users=40)
    generator.produce_users(bootstrap, plan.users, topics)
    opts = streaming.StreamOptions(bootstrap=bootstrap, work_dir=work / topics.prefix, topics=topics,
                                   starting_offsets="latest", max_offsets_per_trigger=None,
                                   trigger_interval="0 seconds", watermark_delay_ms=0, window_ms=1000,
                                   sinks=("kafka",))
    arrivals: Dict[int, float] = {}
    stop = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        c.subscribe([topics.window_stats])
        while not stop.is_set():
            for m in c.consume(100, 0.05):
                if m.error() is None:
                    start_ms = int(json.loads(m.value())["window_start_ms"])
                    arrivals.setdefault(start_ms, time.time())
        c.close()

    q = streaming.start(spark, opts)[0]
    wait(lambda: q.lastProgress is not None, 120, "the first micro-batch")
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True})
    t0 = time.time()
    first_ms = (int(t0 * 1000) // 1000 + 2) * 1000  # whole windows only
    i = 0
    while time.time() - t0 < seconds:
        now_ms = int(time.time() * 1000)
        e = events.Event(f"lat-{i}", events.PAGE_VIEW, plan.users[i % len(plan.users)].user_id, now_ms, "web", page="/")
        p.produce(topics.page_views, key=e.key, value=e.value(), headers=e.kafka_headers(), timestamp=now_ms)
        p.poll(0)
        i += 1
        time.sleep(max(0.0, t0 + i / rate - time.time()))
    last_ms = (int(time.time() * 1000) // 1000 - 1) * 1000
    p.flush(30)
    wait(lambda: all(w in arrivals for w in range(first_ms, last_ms, 1000)), 120, "every window's row")
    stop.set()
    q.stop()
    reader.join(10)
    lat = sorted((arrivals[w] * 1000 - (w + 1000)) for w in range(first_ms, last_ms, 1000))
    return {"p50_ms": statistics.median(lat), "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
            "windows": float(len(lat))}


def start_broker(kind: str, work: Path, zk: str) -> Any:
    chroot = f"{zk}/{kind}-{uuid.uuid4().hex[:6]}"
    if kind == "ours":
        b: Any = BrokerProcess(work / kind, chroot, broker_id=0, port=free_port(), overrides=COMMON)
        b.start(timeout=120)
    else:
        b = RealKafkaBroker(work / kind, chroot, broker_id=0, port=free_port(), overrides=COMMON, full_jit=True)
        b.start(timeout=120)
    wait(lambda: AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=5).brokers, 60, f"{kind} up")
    return b


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if a == a and b == b and b else "-"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--latency-s", type=float, default=60.0)
    ap.add_argument("--warmup-s", type=float, default=20.0, help="streaming warm-up before the latency runs")
    ap.add_argument("--quick", action="store_true", help="small sizes, to check the script works")
    ap.add_argument("--only", choices=["ours", "kafka"])
    a = ap.parse_args(argv)
    if a.quick:
        a.records, a.trials, a.latency_s, a.warmup_s = 5_000, 1, 5.0, 0.0  # 5 s: 2 whole windows measured
    kinds = [k for k in ("ours", "kafka") if not a.only or a.only == k]
    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    zk = ZooKeeperProcess(work, free_port())
    zk.start()
    brokers: Dict[str, Any] = {}
    results: Dict[str, Dict[str, Any]] = {k: {} for k in kinds}
    spark = None
    try:
        for k in kinds:
            brokers[k] = start_broker(k, work, zk.connect_string)
        topic = f"read-{uuid.uuid4().hex[:6]}"
        for k in kinds:
            load(brokers[k].bootstrap, topic, a.records, a.size)
        from pipeline.connector import spark_session

        conf = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"}
        if a.quick:  # a check that the script works: the JVM's C1 compiler only, as the Spark tests run it
            conf["spark.driver.extraJavaOptions"] = "-XX:TieredStopAtLevel=1"
        spark = spark_session("spark-bench", conf=conf)
        for k in kinds:  # warm-up: JIT, consumer pools
            read_once(spark, brokers[k].bootstrap, topic, a.records)
        rates: Dict[str, List[float]] = {k: [] for k in kinds}
        for _ in range(a.trials):
            for k in kinds:
                rates[k].append(read_once(spark, brokers[k].bootstrap, topic, a.records))
        for k in kinds:
            results[k]["read_best"] = max(rates[k])
            results[k]["read_median"] = statistics.median(rates[k])
        if a.warmup_s > 0:  # the streaming code path's JIT warm-up, on the first broker, discarded
            latency(spark, brokers[kinds[0]].bootstrap, work / "lat-warmup", a.warmup_s)
        for k in kinds:
            try:
                results[k]["latency"] = latency(spark, brokers[k].bootstrap, work / f"lat-{k}", a.latency_s)
            except Exception as e:  # keep the other broker's figures
                results[k]["error"] = f"latency: {e}"
    finally:
        if spark is not None:
            spark.stop()
        for b in brokers.values():
            try:
                b.stop()
            except Exception:
                b.kill()
        zk.stop()
    shutil.rmtree(work, ignore_errors=True)

    ours, kafka = results.get("ours", {}), results.get("kafka", {})

    def g(r: Dict[str, Any], *path: str) -> float:
        v: Any = r
        for p in path:
            v = v.get(p, {}) if isinstance(v, dict) else {}
        return float(v) if isinstance(v, (int, float)) else float("nan")

    print(f"one broker each, one machine ({os.cpu_count()} cores), Spark local[2], {a.records} x {a.size} B in "
          f"{PARTITIONS} partitions, {a.trials} trials")
    print(f"{'metric':48s} {'ours':>12s} {'kafka 3.9.1':>12s} {'ours/kafka':>10s}")
    for label, path in [("spark.read records/s (best)", ("read_best",)),
                        ("spark.read records/s (median)", ("read_median",)),
                        ("streaming latency window end -> row p50 ms", ("latency", "p50_ms")),
                        ("streaming latency window end -> row p99 ms", ("latency", "p99_ms")),
                        ("streaming latency windows measured", ("latency", "windows"))]:
        o, k = g(ours, *path), g(kafka, *path)
        print(f"{label:48s} {o:12.1f} {k:12.1f} {ratio(o, k):>10s}")
    for k, r in results.items():
        if "error" in r:
            print(f"{k}: {r['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
