"""Tiered storage (KIP-405) on S3 inside 3 real broker processes (bin/, real ZooKeeper): the brokers run
``broker.storage.remote.S3RemoteStorageManager`` against a real S3 server (S3Proxy, tests/harness/s3_server.py), one
server and one cluster shared by the module's tests (CI time).

- the leader copies rolled segments of an RF-3, min.insync.replicas=2 topic to the bucket, local logs shrink to
  the tail, and a stock consumer (confluent-kafka, then Kafka's own Java consumer) reads every acknowledged record
  from offset 0 exactly once, in order, most of them from S3; the leader's Prometheus endpoint reports Kafka 3.9's
  RemoteStorageMetrics (copy requests = segments in the bucket, copied bytes = their sizes, remote log size and
  metadata count, no copy lag, remote fetches), a follower none for the topic;
- S3 goes away for ~20 s while producers keep writing: acks=all produce and local reads go on, copies fail and are
  retried, no local segment is deleted before its copy is committed, a consumer that needs S3 gets retriable errors
  (no hang, no crash, no traceback), the copy/fetch error counters and the copy lag rise, and once S3 is back the
  copies catch up (lag 0) and that consumer reads everything.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.harness.kafka import kafka_classpath
from tests.harness.s3_server import S3Server
from tests.integration.cluster.conftest import FAST, ClusterView, wait_for
from tools.cluster import LocalCluster, free_port

S3_RSM = "broker.storage.remote.S3RemoteStorageManager"
BUCKET = "tiered-cluster"
SEGMENT_BYTES = 1024 * 1024
VALUE = 1000
BTM = "kafka_server_brokertopicmetrics_"
CONSUME_ALL = Path(__file__).resolve().parents[2] / "harness" / "java" / "ConsumeAll.java"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
def cluster(s3: S3Server, zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    props = dict(FAST)
    props.update({
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": S3_RSM,
        **{f"rsm.config.{k}": v for k, v in s3.rsm_configs(BUCKET, **{"s3.retry.max.attempts": 2,
                                                                        "s3.api.call.timeout.ms": 5000}).items()},
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "500",
        "remote.fetch.max.wait.ms": "2000",
    })
    c = LocalCluster(tmp_path_factory.mktemp("s3-cluster"), 3, zk_connect=f"{zookeeper}/c-{uuid.uuid4().hex[:10]}",
                     overrides=props,
                     broker_overrides={i: {"broker.metrics.prometheus.port": str(free_port())} for i in range(3)})
    try:
        c.start()
        yield c
    finally:
        c.kill()
    for b in c.brokers:
        out = b.output()
        assert "Traceback" not in out, f"broker {b.broker_id} logged a traceback:\n{out[-6000:]}"


# ---------------------------------------------------------------------------------------------------------- helpers
def _remote_segments(s3: S3Server, topic: str) -> Dict[str, Tuple[int, int]]:
    """segment id -> (start offset, size) of the topic's segment objects (``.log``) in the bucket."""
    out: Dict[str, Tuple[int, int]] = {}
    for page in s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{topic}-0-"):
        for obj in page.get("Contents", []):
            m = re.search(r"/(\d{20})-([^/]+)\.log$", obj["Key"])
            if m:
                out[m.group(2)] = (int(m.group(1)), int(obj["Size"]))
    return out


def _local_segments(cluster: LocalCluster, broker_id: int, topic: str) -> List[int]:
    d = cluster.brokers[broker_id].log_dir / f"{topic}-0"
    return sorted(int(f.stem) for f in d.glob("*.log")) if d.exists() else []


def _local_bytes(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    d = cluster.brokers[broker_id].log_dir / f"{topic}-0"
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0


def _record(i: int) -> bytes:
    return b"%08d" % i + b"x" * (VALUE - 8)


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 64 * 1024,
                     "enable.idempotence": True, "queue.buffering.max.kbytes": 8192})


def _produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    p = _producer(bootstrap)
    acked: List[int] = []

    def done(err: Optional[KafkaError], msg: object) -> None:
        assert err is None, err
        acked.append(1)
    for i in range(start, start + n):
        while True:
            try:
                p.produce(topic, value=_record(i), on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    assert len(acked) == n


def _consumer(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.max.bytes": 4 << 20})


def _consume_all(bootstrap: str, topic: str, n: int, timeout_s: float = 90) -> List[int]:
    """Sequence numbers read from offset 0 until ``n`` records (each at offset == its sequence number)."""
    c = _consumer(bootstrap)
    c.assign([TopicPartition(topic, 0, 0)])
    seen: List[int] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < n and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                assert m.error() is None, m.error()
                assert m.offset() == len(seen), (m.offset(), len(seen))
                seen.append(int(m.value()[:8]))
        assert not c.consume(10, 1.0), "records past the acknowledged ones"
    finally:
        c.close()
    return seen


def _scrape(cluster: LocalCluster, broker_id: int) -> Dict[str, float]:
    port = cluster.brokers[broker_id].properties()["broker.metrics.prometheus.port"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: Dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _create_tiered_topic(view: ClusterView, topic: str) -> None:
    view.create_topic(topic, 1, 3, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                    "local.retention.ms": "1000", "retention.ms": "-1", "min.insync.replicas": "2"})


# ------------------------------------------------------------------------------------------------------------ tests
def test_s3_segments_copied_local_logs_shrink_every_record_read_back(cluster: LocalCluster, s3: S3Server) -> None:
    view = ClusterView(cluster.bootstrap)
    topic = "s3-tiered"
    _create_tiered_topic(view, topic)
    n = 20_000  # 20 MB of values: ~21 segments of 1 MiB
    t0 = time.monotonic()
    _produce(cluster.bootstrap, topic, 0, n)
    produced_s = time.monotonic() - t0
    leader = view.partitions(topic)[0][0]

    # every rolled segment lands in the bucket, in offset order, once
    wait_for(lambda: len(_remote_segments(s3, topic)) >= 18, 90, "rolled segments copied to S3",
             detail=lambda: cluster.brokers[leader].output()[-3000:])
    # local logs keep only the tail, on the leader and on the followers
    wait_for(lambda: all(len(_local_segments(cluster, b, topic)) <= 2 for b in range(3)), 60,
             "local segments past local.retention deleted on every replica")
    remote = _remote_segments(s3, topic)
    starts = sorted(s for s, _ in remote.values())
    assert starts[0] == 0
    assert len(starts) == len(set(starts)), "a segment was copied twice"
    local_first = _local_segments(cluster, leader, topic)[0]
    assert 0 < local_first <= n
    assert max(starts) <= local_first, "a gap between the copied segments and the local log"
    for b in range(3):
        assert _local_bytes(cluster, b, topic) <= 2 * SEGMENT_BYTES + VALUE * 2
    remote_bytes = sum(size for _, size in remote.values())
    assert remote_bytes >= 18 * SEGMENT_BYTES * 0.9

    # a stock consumer reads every acknowledged record from offset 0, once, in order: most come from S3
    assert _consume_all(cluster.bootstrap, topic, n) == list(range(n))
    print(f"\nproduced {n * VALUE / 1e6:.1f} MB in {produced_s:.1f} s; {len(remote)} segments "
          f"({remote_bytes / 1e6:.1f} MB) in S3; leader's local log starts at {local_first}")

    # Kafka 3.9's RemoteStorageMetrics on the leader's Prometheus endpoint (the segments' sizes in the bucket are
    # the local segments' sizes)
    t = f'{{topic="{topic}"}}'
    wait_for(lambda: _scrape(cluster, leader).get(BTM + "remotelogsizebytes" + t) == remote_bytes, 30,
             "the remote log size gauge after the retention task's next run",
             detail=lambda: str({k: v for k, v in _scrape(cluster, leader).items() if "remote" in k}))
    m = _scrape(cluster, leader)
    assert m[BTM + "remotecopybytes_total" + t] == remote_bytes
    assert m[BTM + "remotecopyrequests_total" + t] == len(remote)
    assert m[BTM + "remotecopyerrors_total" + t] == 0
    assert m[BTM + "remotelogmetadatacount" + t] == len(remote)
    assert m[BTM + "remotecopylagsegments" + t] == 0 and m[BTM + "remotecopylagbytes" + t] == 0
    assert m[BTM + "remotefetchrequests_total" + t] >= 1 and m[BTM + "remotefetcherrors_total" + t] == 0
    assert m[BTM + "remotefetchbytes_total" + t] >= local_first * VALUE  # every record below the local log
    assert m[BTM + "remotecopybytes_total"] >= remote_bytes  # all topics
    follower = next(b for b in range(3) if b != leader)
    f = _scrape(cluster, follower)
    assert BTM + "remotelogsizebytes" + t not in f and f[BTM + "remotecopyrequests_total"] == 0

    # Kafka's own Java consumer too
    java = shutil.which("java")
    assert java is not None, "java not found: run bash scripts/install.sh"
    r = subprocess.run([java, "-Dlog4j.configuration=file:/dev/null", "-cp", kafka_classpath(), str(CONSUME_ALL),
                        cluster.bootstrap, topic, str(n), "90"], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert f"consumed {n} in_order true" in r.stdout


class _BackgroundProducer:
    """acks=all records ``start``, ``start+1``, ... at about ``rate`` records/s on a thread until :meth:`stop`;
    every delivery report is recorded (an error fails the test at :meth:`stop`)."""

    def __init__(self, bootstrap: str, topic: str, start: int, rate: float) -> None:
        self.topic = topic
        self.start = start
        self.rate = rate
        self.producer = _producer(bootstrap)
        self.sent = 0
        self.acked = 0
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outage-producer", daemon=True)
        self._thread.start()

    def _done(self, err: Optional[KafkaError], msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked += 1

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                self.producer.produce(self.topic, value=_record(self.start + self.sent), on_delivery=self._done)
                self.sent += 1
            self.producer.poll(0.05)

    def stop(self) -> int:
        """Stops producing, waits for every delivery report; the next sequence number."""
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(120) == 0
        assert not self.errors, self.errors[:5]
        assert self.acked == self.sent
        return self.start + self.sent


def test_s3_outage_produce_and_local_reads_go_on_copies_retry_and_catch_up(cluster: LocalCluster,
                                                                          s3: S3Server) -> None:
    view = ClusterView(cluster.bootstrap)
    topic = "s3-outage"
    _create_tiered_topic(view, topic)
    n1 = 5000
    _produce(cluster.bootstrap, topic, 0, n1)
    leader = view.partitions(topic)[0][0]
    # settled: every rolled segment copied and deleted locally, each replica keeps only its active segment (so no
    # copy is in flight when S3 goes)
    wait_for(lambda: len(_remote_segments(s3, topic)) >= 4 and
             all(len(_local_segments(cluster, b, topic)) == 1 for b in range(3)), 60,
             "the first segments copied and deleted locally")
    before = _remote_segments(s3, topic)
    local_first = {b: _local_segments(cluster, b, topic)[0] for b in range(3)}
    offsets = {b: len(cluster.brokers[b].output()) for b in range(3)}

    # ---- S3 goes away; producers keep writing (~0.5 MB/s)
    s3.kill()
    outage_start = time.monotonic()
    producer = _BackgroundProducer(cluster.bootstrap, topic, n1, rate=500)
    remote_reader = _consumer(cluster.bootstrap)
    remote_reader.assign([TopicPartition(topic, 0, 0)])
    local_reader = _consumer(cluster.bootstrap)
    local_reader.assign([TopicPartition(topic, 0, local_first[leader])])
    remote_seen: List[int] = []
    remote_errors: List[KafkaError] = []
    local_seen = 0
    grew = False
    try:
        while time.monotonic() - outage_start < 20:
            for m in remote_reader.consume(100, 0.2):
                if m.error() is not None:
                    remote_errors.append(m.error())
                else:
                    remote_seen.append(int(m.value()[:8]))
            for m in local_reader.consume(500, 0.2):
                assert m.error() is None, m.error()
                assert int(m.value()[:8]) == m.offset()
                local_seen += 1
            # nothing is deleted locally while its copy cannot be committed, on any replica
            for b in range(3):
                segs = _local_segments(cluster, b, topic)
                assert segs[0] == local_first[b], f"broker {b} deleted an uncopied segment: {segs[:3]}"
            grew = grew or len(_local_segments(cluster, leader, topic)) >= 5
        assert all(b.is_alive() for b in cluster.brokers)
        # acks=all production went on (min.insync.replicas=2 of 3 live replicas)
        assert producer.acked >= 5000, (producer.sent, producer.acked)
        # local data was readable throughout
        assert local_seen >= 5000, local_seen
        assert grew, "no new segment rolled during the outage"
        # the copies failed and are retried; a read needing S3 got an error the client retries, no records
        out = cluster.brokers[leader].output()[offsets[leader]:]
        assert "RLMCopyTask for" in out and "retried at the next run" in out, out[-3000:]
        assert "from remote storage" in out, out[-3000:]
        assert remote_seen == [], remote_seen[:5]
        t = f'{{topic="{topic}"}}'
        m = _scrape(cluster, leader)
        assert m[BTM + "remotecopyerrors_total" + t] > 0 and m[BTM + "remotefetcherrors_total" + t] > 0
        assert m[BTM + "remotecopylagsegments" + t] >= 3, m[BTM + "remotecopylagsegments" + t]
        during = {k: m[BTM + k + t] for k in ("remotecopyerrors_total", "remotefetcherrors_total",
                                               "remotecopylagsegments")}
        assert remote_errors, "the consumer reading remote data saw no error while S3 was down"
        assert all(e.code() == KafkaError.UNKNOWN for e in remote_errors), remote_errors[:3]
    finally:
        n = producer.stop()
        local_reader.close()
        s3.start()
    outage_s = time.monotonic() - outage_start

    # ---- S3 is back: the consumer that kept retrying reads everything, the copies catch up
    deadline = time.monotonic() + 90
    try:
        while len(remote_seen) < n and time.monotonic() < deadline:
            for m in remote_reader.consume(500, 1.0):
                if m.error() is None:
                    assert m.offset() == len(remote_seen) == int(m.value()[:8])
                    remote_seen.append(m.offset())
    finally:
        remote_reader.close()
    assert len(remote_seen) == n
    wait_for(lambda: all(len(_local_segments(cluster, b, topic)) <= 2 for b in range(3)), 90,
             "copies caught up and local segments deleted after the outage",
             detail=lambda: cluster.brokers[leader].output()[-3000:])
    after = _remote_segments(s3, topic)
    assert set(before) <= set(after), "a segment copied before the outage is gone"
    starts = sorted({s for s, _ in after.values()})
    assert starts[0] == 0 and max(starts) <= _local_segments(cluster, leader, topic)[0]
    assert _consume_all(cluster.bootstrap, topic, n) == list(range(n))
    wait_for(lambda: _scrape(cluster, leader)[BTM + "remotecopylagsegments" + t] == 0, 30, "no copy lag left")
    print(f"\noutage {outage_s:.1f} s: {n - n1} records ({(n - n1) * VALUE / 1e6:.1f} MB) acknowledged during it, "
          f"{local_seen} read locally, {len(remote_errors)} remote-fetch errors to the client; after: "
          f"{len(after) - len(before)} segments copied ({len(after)} objects, {len(starts)} start offsets); "
          f"leader's metrics at the outage's end: {during}")
