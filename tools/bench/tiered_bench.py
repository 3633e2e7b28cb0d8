"""Tiered storage benchmark (KIP-405): this broker beside Apache Kafka 3.9.1, one broker each, same machine, same run.

Both brokers tier to Kafka's ``LocalTieredStorage`` layout in a local directory (Kafka runs Kafka's own class from
its test jar; ours maps the class name to its own implementation) with the topic-based metadata manager. Per broker:

- **produce, with and without tiering**: the same throttled load (1 KB records, acks=1) into an untiered topic and
  into a tiered one (``local.retention.ms`` 1 s, so segments are copied and deleted while producing): records/s,
  p50/p99 latency and broker CPU per record. The p99 difference is the effect of copying on produce;
- **copy throughput under that load**: remote bytes written from the first record until the copies caught up
  with the last rolled segment, over that time;
- **remote read against local read**: a consumer from offset 0 of each topic (the tiered one served almost entirely
  from remote storage, the other from the local log): MB/s and broker CPU per MB.

    python -m tools.bench.tiered_bench [--mb 200] [--rate-mb 40] [--quick] [--only ours|kafka] [--json]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.kafka import RealKafkaBroker
from tests.harness.tiered import LOCAL_TIERED_STORAGE, remote_end_offset
from tools import producer_perf
from tools.bench.process_cpu import broker_cpu_seconds
from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port

RECORD = 1000
SEGMENT_BYTES = 8 * 1024 * 1024
MB = 1e6


def tiered_overrides(remote: Path) -> Dict[str, str]:
    return {"remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
            "rsm.config.dir": str(remote),
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
            "remote.log.manager.task.interval.ms": "1000",
            "log.retention.check.interval.ms": "1000",
            "offsets.topic.replication.factor": "1", "num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0"}


class Subject:
    """One broker of one kind, its remote directory and its CPU."""

    def __init__(self, kind: str, workdir: Path, zk: str) -> None:
        self.kind = kind
        self.remote = workdir / kind / "remote"
        self.remote.mkdir(parents=True, exist_ok=True)
        chroot = f"{zk}/{kind}-{uuid.uuid4().hex[:6]}"
        port = free_port()
        ov = tiered_overrides(self.remote)
        if kind == "ours":
            self.broker: Any = BrokerProcess(workdir / kind, chroot, broker_id=0, port=port, overrides=ov)
        else:
            self.broker = RealKafkaBroker(workdir / kind, chroot, broker_id=0, port=port, overrides=ov, heap="1g")
        self.bootstrap = f"127.0.0.1:{port}"

    def cpu_seconds(self) -> float:
        return broker_cpu_seconds(self.broker)

    def remote_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.remote.rglob("*") if f.is_file())


def create_topic(bootstrap: str, name: str, tiered: bool) -> None:
    config = {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "-1"}
    if tiered:
        config.update({"remote.storage.enable": "true", "local.retention.ms": "1000"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} has no leader")


def produce(s: Subject, topic: str, records: int, rate: float) -> Dict[str, float]:
    cpu0 = s.cpu_seconds()
    r = producer_perf.run(s.bootstrap, topic, records, RECORD, rate, "1", "none", {},
                          warmup_records=min(5000, records // 10))
    r["cpu_us_per_record"] = (s.cpu_seconds() - cpu0) / max(1, r["records"]) * 1e6
    return r


def consume_all(s: Subject, topic: str, total: int) -> Dict[str, float]:
    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    c.assign([TopicPartition(topic, 0, 0)])
    got, nbytes = 0, 0
    cpu0 = s.cpu_seconds()
    t0 = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < total and time.monotonic() < deadline:
        for m in c.consume(10_000, timeout=1.0):
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - t0
    cpu = s.cpu_seconds() - cpu0
    c.close()
    if got < total:
        raise RuntimeError(f"{s.kind}: read {got} of {total} records of {topic}")
    return {"mb_per_s": nbytes / elapsed / MB, "cpu_ms_per_mb": cpu * 1000 / (nbytes / MB)}


def run(kind: str, workdir: Path, zk: str, a: argparse.Namespace) -> Dict[str, Any]:
    s = Subject(kind, workdir, zk)
    s.broker.start(timeout=120)
    try:
        records = int(a.mb * MB / RECORD)
        rate = a.rate_mb * MB / RECORD
        warm = min(5000, records // 10)
        plain, tiered = f"plain-{uuid.uuid4().hex[:6]}", f"tiered-{uuid.uuid4().hex[:6]}"
        create_topic(s.bootstrap, plain, False)
        create_topic(s.bootstrap, tiered, True)
        out: Dict[str, Any] = {"produce_plain": produce(s, plain, records, rate)}
        copy_started = time.perf_counter()
        out["produce_tiered"] = produce(s, tiered, records, rate)
        # copies have caught up when the remote segments reach the last rolled segment: within a segment of the end
        last = records + warm - 1
        deadline = time.monotonic() + 600
        while remote_end_offset(s.remote) < last - SEGMENT_BYTES // (RECORD + 70) and time.monotonic() < deadline:
            time.sleep(0.2)
        copy_s = time.perf_counter() - copy_started
        out["copy"] = {"mb": s.remote_bytes() / MB, "seconds": copy_s, "mb_per_s": s.remote_bytes() / MB / copy_s}
        time.sleep(3)  # local.retention.ms (1 s) and the retention check (1 s): the copied local segments go
        out["read_local"] = consume_all(s, plain, records + warm)
        out["read_remote"] = consume_all(s, tiered, records + warm)
        return out
    finally:
        try:
            s.broker.stop()
        except Exception:
            s.broker.kill()


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200, help="MB produced into each topic")
    ap.add_argument("--rate-mb", type=float, default=40, help="produce rate cap, MB/s (the same for both)")
    ap.add_argument("--quick", action="store_true", help="small counts, to check the script works")
    ap.add_argument("--only", choices=("ours", "kafka"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.mb = min(a.mb, 20)
    workdir = Path(tempfile.mkdtemp(prefix="tiered-bench-"))
    zk = ZooKeeperProcess(workdir / "zk", free_port())
    zk.start()
    results: Dict[str, Any] = {}
    failed: Dict[str, str] = {}
    try:
        for kind in ("ours", "kafka"):
            if a.only and a.only != kind:
                continue
            try:
                results[kind] = run(kind, workdir, zk.connect_string, a)
            except Exception as exc:  # keep the other broker's figures; say what failed and where its logs are
                failed[kind] = f"{type(exc).__name__}: {exc}"
    finally:
        zk.stop()
        if not failed:
            shutil.rmtree(workdir, ignore_errors=True)
    for kind, why in failed.items():
        print(f"{kind}: did not complete ({why}); broker logs kept in {workdir / kind}")
    if not results:
        return 1
    if a.json:
        print(json.dumps(results, indent=2))
        return 0 if not failed else 1
    kinds = list(results)
    print(f"one broker each, {a.mb:.0f} MB of 1 KB records per topic at <= {a.rate_mb:.0f} MB/s, acks=1, "
          f"segments {SEGMENT_BYTES >> 20} MiB, LocalTieredStorage; columns: {' / '.join(kinds)}"
          + (" / ours:kafka" if len(kinds) == 2 else ""))
    rows = [
        ("produce untiered records/s", ("produce_plain", "records_per_s")),
        ("produce tiered records/s", ("produce_tiered", "records_per_s")),
        ("produce untiered p50 ms", ("produce_plain", "latency_p50_ms")),
        ("produce tiered p50 ms", ("produce_tiered", "latency_p50_ms")),
        ("produce untiered p99 ms", ("produce_plain", "latency_p99_ms")),
        ("produce tiered p99 ms", ("produce_tiered", "latency_p99_ms")),
        ("produce untiered CPU us/record", ("produce_plain", "cpu_us_per_record")),
        ("produce tiered CPU us/record", ("produce_tiered", "cpu_us_per_record")),
        ("copy MB/s (first record to caught up)", ("copy", "mb_per_s")),
        ("read local MB/s", ("read_local", "mb_per_s")),
        ("read remote MB/s", ("read_remote", "mb_per_s")),
        ("read local CPU ms/MB", ("read_local", "cpu_ms_per_mb")),
        ("read remote CPU ms/MB", ("read_remote", "cpu_ms_per_mb")),
    ]
    for label, (section, key) in rows:
        vals = [results[k][section][key] for k in kinds]
        line = f"  {label:<40}" + "".join(f"{v:>12.2f}" for v in vals)
        if len(vals) == 2 and vals[1]:
            line += f"{vals[0] / vals[1]:>10.2f}x"
        print(line)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
