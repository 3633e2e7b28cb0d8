"""Cluster benchmark: 3 brokers of ours beside 3 Apache Kafka 3.9.1 brokers, same machine, same run, same clients.

    .venv/bin/python -m tools.bench.cluster_bench [--records 300000] [--backlog-mb 1024] [--quick] [--only ours]

For each cluster (ours: bin/kafka-server-start.sh processes; kafka: Kafka's own kafka.Kafka from the jars the
install step resolved), on a fresh ZooKeeper chroot, with confluent-kafka clients:

- produce N x 100 B with acks=all to a 1-partition topic at RF=3 and at RF=1: records/s, MB/s, and the CPU time
  of every broker process per record (so RF=3 includes the followers' work);
- produce latency at 1,000 records/s, acks=all, RF=3, linger.ms=0, idempotent (5 in flight): p50/p99/max;
- failover: a producer sends every ~2 ms to an RF=3 topic; the leader is killed (SIGKILL) or stopped (SIGTERM);
  the time from the signal to the first acknowledgement of a record sent after it (a SIGKILL is noticed when the
  broker's ZooKeeper session expires: zookeeper.session.timeout.ms is printed with it);
- controller failover: the controller is killed; time until another broker holds /controller;
- follower catch-up: a follower is stopped, the backlog is produced, the follower is started; MB/s from its
  start until it is back in the ISR.

Prints one table per metric with both clusters and the ratio ours/kafka. Nothing here asserts.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import psutil
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.harness.kafka import RealKafkaBroker
from tools import producer_perf
from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port

SESSION_TIMEOUT_MS = 6000
COMMON = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "offsets.topic.replication.factor": "3",
          "num.partitions": "1", "default.replication.factor": "3", "auto.leader.rebalance.enable": "false",
          "group.initial.rebalance.delay.ms": "0", "controlled.shutdown.retry.backoff.ms": "500"}


class Cluster:
    """Three brokers of one kind on one ZooKeeper chroot; restartable one by one."""

    def __init__(self, kind: str, workdir: Path, zk: str) -> None:
        self.kind = kind
        self.workdir = workdir
        self.zk = f"{zk}/{kind}-{uuid.uuid4().hex[:6]}"
        self.brokers: List[Any] = []
        for i in range(3):
            port = free_port()
            if kind == "ours":
                self.brokers.append(BrokerProcess(workdir / kind, self.zk, broker_id=i, port=port, overrides=COMMON))
            else:
                self.brokers.append(RealKafkaBroker(workdir / kind, self.zk, broker_id=i, port=port, overrides=COMMON,
                                                    full_jit=True))

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start_broker(self, i: int) -> None:
        self.brokers[i].start(timeout=120)

    def start(self) -> None:
        for i in range(3):
            self.start_broker(i)
        wait(lambda: len(admin_for(self.bootstrap).list_topics(timeout=5).brokers) == 3,
             60, "3 brokers in metadata")

    def pids(self) -> List[int]:
        out = []
        for b in self.brokers:
            proc = getattr(b, "proc", None)
            if proc is not None and proc.poll() is None:
                out.append(proc.pid)
        return out

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self.pids():
            try:
                procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
                for p in procs:
                    t = p.cpu_times()
                    total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self) -> None:
        for b in self.brokers:
            try:
                b.stop()
            except Exception:
                b.kill()


_ADMINS: Dict[str, AdminClient] = {}


def admin_for(bootstrap: str) -> AdminClient:
    """One AdminClient per bootstrap string for the whole run: each is a librdkafka instance with its own threads,
    and dozens of them in this process would put their noise into the latency being measured."""
    a = _ADMINS.get(bootstrap)
    if a is None:
        a = _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
    return a


def wait(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            v = predicate()
            if v:
                return v
        except Exception:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


def create(bootstrap: str, name: str, rf: int, partitions: int = 1, config: Optional[Dict[str, str]] = None) -> None:
    admin = admin_for(bootstrap)
    for attempt in range(20):
        try:
            admin.create_topics([NewTopic(name, partitions, rf, config=config or {})],
                                operation_timeout=60)[name].result(70)
            break
        except KafkaException as exc:
            # Right after a controller move both Kafka and we answer NOT_CONTROLLER to a client whose metadata
            # still names the old controller; librdkafka hands that to the application, which retries.
            code = exc.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if code != KafkaError.NOT_CONTROLLER or attempt == 19:
                raise
            time.sleep(0.5)
            _ADMINS.pop(bootstrap, None)  # librdkafka keeps the old controller in its metadata: start afresh
            admin = admin_for(bootstrap)
    def ready() -> bool:  # on every broker: metadata reaches each one asynchronously, in Kafka too
        for b in bootstrap.split(","):
            t = admin_for(b).list_topics(name, timeout=5).topics[name]
            if t.error is not None or len(t.partitions) != partitions or not all(
                    p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values()):
                return False
        return True

    wait(ready, 60, f"{name} ready")


def partition_info(bootstrap: str, topic: str) -> Any:
    return admin_for(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions[0]


def bench_throughput(c: Cluster, records: int) -> Dict[str, Dict[str, float]]:
    out: Dict[str, Dict[str, float]] = {}
    for rf in (1, 3):
        topic = f"tp-rf{rf}-{uuid.uuid4().hex[:4]}"
        create(c.bootstrap, topic, rf)
        producer_perf.run(c.bootstrap, topic, records // 5, 100, -1, "all", "none", {})  # warm-up run, discarded
        c0 = c.cpu_seconds()
        r = producer_perf.run(c.bootstrap, topic, records, 100, -1, "all", "none", {})
        cpu = c.cpu_seconds() - c0
        out[f"RF={rf}"] = {"records_per_s": r["records_per_s"], "mb_per_s": r["mb_per_s"],
                           "cpu_us_per_record": cpu / max(1, r["records"]) * 1e6}
    return out


def bench_latency(c: Cluster, n: int) -> Dict[str, float]:
    topic = f"lat-{uuid.uuid4().hex[:4]}"
    create(c.bootstrap, topic, 3, config={"min.insync.replicas": "2"})
    # The Java client's defaults: idempotent, at most 5 requests in flight (librdkafka's own default of a million
    # in flight turns 1,000 records/s into 1,000 one-record requests/s queued behind each other).
    r = producer_perf.run(c.bootstrap, topic, n, 100, 1000, "all", "none",
                          {"linger.ms": "0", "enable.idempotence": "true"}, warmup_records=1000)
    return {"p50_ms": r["latency_p50_ms"], "p99_ms": r["latency_p99_ms"], "max_ms": r["latency_max_ms"]}


def bench_failover(c: Cluster, how: str) -> float:
    """Seconds from the signal to the leader to the first ack of a record sent after it."""
    topic = f"fo-{how}-{uuid.uuid4().hex[:4]}"
    create(c.bootstrap, topic, 3, config={"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                  "message.timeout.ms": 120000})
    acks: List[float] = []
    t_signal = [0.0]

    def cb(err: Any, msg: Any, sent: float) -> None:
        if err is None and sent > t_signal[0] > 0:
            acks.append(time.monotonic())

    leader = partition_info(c.bootstrap, topic).leader
    stop = threading.Event()

    def signal_later() -> None:
        time.sleep(2.0)
        t_signal[0] = time.monotonic()
        if how == "kill":
            c.brokers[leader].kill()
        else:
            threading.Thread(target=c.brokers[leader].stop, daemon=True).start()

    threading.Thread(target=signal_later, daemon=True).start()
    deadline = time.monotonic() + 90
    while not acks and time.monotonic() < deadline and not stop.is_set():
        sent = time.monotonic()
        p.produce(topic, b"x" * 100, on_delivery=lambda e, m, s=sent: cb(e, m, s))
        p.poll(0.002)
    p.flush(30)
    elapsed = acks[0] - t_signal[0] if acks else float("nan")
    wait(lambda: not c.brokers[leader].is_alive(), 60, "old leader gone")
    c.start_broker(leader)
    wait(lambda: len(partition_info(c.bootstrap, topic).isrs) == 3, 120, "old leader back in ISR")
    return elapsed


def bench_controller_failover(c: Cluster) -> float:
    zk = KazooClient(hosts=c.zk)
    zk.start()
    try:
        data, _ = zk.get("/controller")
        old = json.loads(data)["brokerid"]
        t0 = time.monotonic()
        c.brokers[old].kill()

        def moved() -> bool:
            try:
                d, _ = zk.get("/controller")
            except Exception:
                return False
            return int(json.loads(d)["brokerid"]) != old

        wait(moved, 120, "a new controller")
        elapsed = time.monotonic() - t0
    finally:
        zk.stop()
        zk.close()
    c.start_broker(old)
    return elapsed


def bench_catch_up(c: Cluster, backlog_mb: int) -> Dict[str, float]:
    topic = f"cu-{uuid.uuid4().hex[:4]}"
    create(c.bootstrap, topic, 3)
    info = partition_info(c.bootstrap, topic)
    follower = [r for r in info.replicas if r != info.leader][0]
    c.brokers[follower].stop()
    size = 10240
    n = backlog_mb * 1024 * 1024 // size
    producer_perf.run(c.bootstrap, topic, n, size, -1, "1", "none", {})
    t0 = time.monotonic()
    c.start_broker(follower)
    wait(lambda: follower in partition_info(c.bootstrap, topic).isrs, 1800, "follower back in the ISR")
    secs = time.monotonic() - t0
    return {"backlog_mb": n * size / 2**20, "seconds": secs, "mb_per_s": n * size / 2**20 / secs}


def run_cluster(kind: str, zk: str, workdir: Path, a: argparse.Namespace) -> Dict[str, Any]:
    """Every scenario on one cluster; a scenario that fails is reported and leaves a gap, the others still run."""
    c = Cluster(kind, workdir, zk)
    c.start()
    res: Dict[str, Any] = {"errors": {}}
    scenarios: List[tuple] = [
        ("latency", lambda: bench_latency(c, 2000 if a.quick else 10000)),
        ("throughput", lambda: bench_throughput(c, a.records)),
        ("failover_kill_s", lambda: bench_failover(c, "kill")),
        ("failover_sigterm_s", lambda: bench_failover(c, "sigterm")),
        ("controller_failover_s", lambda: bench_controller_failover(c)),
        ("catch_up", lambda: bench_catch_up(c, a.backlog_mb)),
    ]
    try:
        for name, fn in scenarios:
            try:
                res[name] = fn()
            except Exception as exc:
                res["errors"][name] = f"{type(exc).__name__}: {exc}"
                print(f"[{kind}] {name} failed: {exc}", file=sys.stderr)
                for i in range(3):  # the next scenario needs every broker up
                    if not c.brokers[i].is_alive():
                        c.start_broker(i)
    finally:
        c.stop()
    return res


def ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}x" if b and b == b and a == a else "   n/a"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--backlog-mb", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="small counts, to check the script works")
    ap.add_argument("--only", choices=["ours", "kafka"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.records, a.backlog_mb = 20_000, 20
    work = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    zk = ZooKeeperProcess(work, free_port())
    zk.start()
    results: Dict[str, Dict[str, Any]] = {}
    try:
        for kind in ("ours", "kafka"):
            if a.only and a.only != kind:
                continue
            results[kind] = run_cluster(kind, zk.connect_string, work, a)
    except BaseException:
        zk.stop()
        print(f"(failed: broker outputs kept in {work})", file=sys.stderr)
        raise
    zk.stop()
    shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(results, indent=1))
        return 0
    ours, kafka = results.get("ours", {}), results.get("kafka", {})

    def g(r: Dict[str, Any], *path: str) -> float:
        for p in path:
            r = r.get(p, {}) if isinstance(r, dict) else {}
        return float(r) if isinstance(r, (int, float)) else float("nan")

    print(f"3 brokers each, one machine ({os.cpu_count()} cores), zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}")
    print(f"{'metric':52s} {'ours':>12s} {'kafka 3.9.1':>12s} {'ours/kafka':>10s}")
    rows = [
        ("produce acks=all RF=1 records/s", ("throughput", "RF=1", "records_per_s")),
        ("produce acks=all RF=3 records/s", ("throughput", "RF=3", "records_per_s")),
        ("produce acks=all RF=1 MB/s", ("throughput", "RF=1", "mb_per_s")),
        ("produce acks=all RF=3 MB/s", ("throughput", "RF=3", "mb_per_s")),
        ("CPU us/record, all brokers, RF=1", ("throughput", "RF=1", "cpu_us_per_record")),
        ("CPU us/record, all brokers, RF=3", ("throughput", "RF=3", "cpu_us_per_record")),
        ("latency @1000 rec/s acks=all RF=3 p50 ms", ("latency", "p50_ms")),
        ("latency @1000 rec/s acks=all RF=3 p99 ms", ("latency", "p99_ms")),
        ("latency @1000 rec/s acks=all RF=3 max ms", ("latency", "max_ms")),
        ("failover, leader SIGKILL -> first ack s", ("failover_kill_s",)),
        ("failover, leader SIGTERM -> first ack s", ("failover_sigterm_s",)),
        ("controller failover (SIGKILL) s", ("controller_failover_s",)),
        ("follower catch-up MB/s", ("catch_up", "mb_per_s")),
    ]
    for label, path in rows:
        o, k = g(ours, *path), g(kafka, *path)
        print(f"{label:52s} {o:12.2f} {k:12.2f} {ratio(o, k):>10s}")
    for kind, r in results.items():
        for name, err in r.get("errors", {}).items():
            print(f"{kind}: {name} did not complete: {err}")
        t = r.get("throughput", {})
        if "RF=1" in t and "RF=3" in t:
            # a --quick run can finish inside one CPU-clock tick (0 CPU seconds): ratio() prints n/a then
            print(f"{kind}: RF=3/RF=1 throughput {ratio(t['RF=3']['records_per_s'], t['RF=1']['records_per_s'])}, "
                  f"CPU per record {ratio(t['RF=3']['cpu_us_per_record'], t['RF=1']['cpu_us_per_record'])}; "
                  f"catch-up backlog {r.get('catch_up', {}).get('backlog_mb', 0):.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
