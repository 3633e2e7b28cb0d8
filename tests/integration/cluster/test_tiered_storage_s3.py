"""Tiered storage (KIP-405) on S3 inside 3 real broker processes (bin/, real ZooKeeper): the brokers run
``broker.storage.remote.S3RemoteStorageManager`` against a real S3 server (S3Proxy, tests/harness/s3_server.py), one
server and one cluster shared by the module's tests (CI time).

- the leader copies rolled segments of an RF-3, min.insync.replicas=2 topic to the bucket, local logs shrink to
  the tail, and a stock consumer (confluent-kafka, then Kafka's own Java consumer) reads every acknowledged record
  from offset 0 exactly once, in order, most of them from S3; the leader's Prometheus endpoint reports Kafka 3.9's
  RemoteStorageMetrics (copy requests = segments in the bucket, copied bytes = their sizes, remote log size and
  metadata count, no copy lag, remote fetches), a follower none for the topic. ``TIERED_S3_RECORDS`` (default
  20,000) sets how many 1 KB records it produces: ``TIERED_S3_RECORDS=200000`` is the issue's 200 MB run (its
  figures are printed with ``-s``);
- S3 goes away for a minute (``OUTAGE_S``) while a producer keeps writing: acks=all produce goes on at its rate
  (p99 delivery latency checked) and a consumer at the tail keeps up, copies fail and are retried, no local segment
  is deleted before its copy is committed, a consumer that needs S3 gets retriable errors (no hang, no crash, no
  traceback), the copy/fetch error counters rise and the copy lag (RemoteCopyLagSegments/Bytes) grows through the
  outage, and once S3 is back the copies catch up (lag 0) and that consumer reads everything;
- kill -9 of the leader while a copy is in flight (S3 frozen with SIGSTOP so the upload hangs after its
  COPY_SEGMENT_STARTED is committed): ``__remote_log_metadata``, read with the project's serde, shows that copy never
  finished; the new leader continues from the metadata (its COPY_SEGMENT_FINISHED segments continue the old
  leader's from offset 0 with no gap, nothing copied twice, an overlap only at the leader change, as Kafka 3.9's
  RLMCopyTask), every acknowledged record reads back from offset 0; the killed broker, restarted with its partition
  directory wiped, rebuilds from the remote state (not from offset 0); a lowered retention.ms then deletes every
  remote segment, the unfinished copy included (DELETE_SEGMENT_STARTED/FINISHED once the log start passes it, as
  Kafka's expiration does), and the bucket holds no object of the topic.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from tests.harness.kafka import kafka_classpath
from tests.harness.s3_server import S3Server
from tests.harness.tiered import assert_finished_copies_continue, list_offset, remote_log_metadata
from tests.harness.tiered import scrape_metrics
from tests.harness.tiered_s3 import bucket_segments, s3_tiered_overrides
from tests.integration.cluster.conftest import FAST, ClusterView, wait_for
from broker.storage.remote.metadata import RemoteLogSegmentState as S
from tools.cluster import LocalCluster, free_port

BUCKET = "tiered-cluster"
SEGMENT_BYTES = 1024 * 1024
VALUE = 1000
BTM = "kafka_server_brokertopicmetrics_"
OUTAGE_S = 60  # the "S3 server stopped for a minute"
OUTAGE_RATE = 250  # records/s produced during the outage: ~15 segments of 1 MiB roll while S3 is away
CONSUME_ALL = Path(__file__).resolve().parents[2] / "harness" / "java" / "ConsumeAll.java"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
def cluster(s3: S3Server, zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    props = dict(FAST)
    props.update(s3_tiered_overrides(s3, BUCKET))
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


def _create_tiered_topic(view: ClusterView, topic: str) -> None:
    view.create_topic(topic, 1, 3, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                    "local.retention.ms": "1000", "retention.ms": "-1", "min.insync.replicas": "2"})


# ------------------------------------------------------------------------------------------------------------ tests
def test_s3_segments_copied_local_logs_shrink_every_record_read_back(cluster: LocalCluster, s3: S3Server) -> None:
    view = ClusterView(cluster.bootstrap)
    topic = "s3-tiered"
    _create_tiered_topic(view, topic)
    n = int(os.environ.get("TIERED_S3_RECORDS", "20000"))  # 20 MB of values: ~20 segments of 1 MiB
    rolled = n * VALUE // SEGMENT_BYTES - 1  # segments that roll at least
    slack = n / 1000  # seconds more per 1,000 records for the waits below (the 200 MB run)
    t0 = time.monotonic()
    _produce(cluster.bootstrap, topic, 0, n)
    produced_s = time.monotonic() - t0
    leader = view.partitions(topic)[0][0]

    # every rolled segment lands in the bucket, in offset order, once
    wait_for(lambda: len(bucket_segments(s3, BUCKET, topic)) >= rolled, 90 + slack, "rolled segments copied to S3",
             detail=lambda: cluster.brokers[leader].output()[-3000:])
    copied_s = time.monotonic() - t0
    # local logs keep only the tail, on the leader and on the followers
    wait_for(lambda: all(len(_local_segments(cluster, b, topic)) <= 2 for b in range(3)), 60 + slack,
             "local segments past local.retention deleted on every replica")
    local_left = {b: len(_local_segments(cluster, b, topic)) for b in range(3)}
    remote = bucket_segments(s3, BUCKET, topic)
    starts = sorted(s for s, _ in remote.values())
    assert starts[0] == 0
    assert len(starts) == len(set(starts)), "a segment was copied twice"
    local_first = _local_segments(cluster, leader, topic)[0]
    assert 0 < local_first <= n
    assert max(starts) <= local_first, "a gap between the copied segments and the local log"
    for b in range(3):
        assert _local_bytes(cluster, b, topic) <= 2 * SEGMENT_BYTES + VALUE * 2
    remote_bytes = sum(size for _, size in remote.values())
    assert remote_bytes >= rolled * SEGMENT_BYTES * 0.9

    # a stock consumer reads every acknowledged record from offset 0, once, in order: most come from S3
    t1 = time.monotonic()
    assert _consume_all(cluster.bootstrap, topic, n, 90 + slack) == list(range(n))
    consumed_s = time.monotonic() - t1
    print(f"\nproduced {n * VALUE / 1e6:.1f} MB in {produced_s:.1f} s ({n * VALUE / 1e6 / produced_s:.1f} MB/s), "
          f"all rolled segments in S3 {copied_s:.1f} s after the first record; {len(remote)} segments "
          f"({remote_bytes / 1e6:.1f} MB) in S3; local segments left per broker {local_left}; leader's local log "
          f"starts at {local_first}; confluent-kafka read all from offset 0 in {consumed_s:.1f} s")

    # Kafka 3.9's RemoteStorageMetrics on the leader's Prometheus endpoint (the segments' sizes in the bucket are
    # the local segments' sizes)
    t = f'{{topic="{topic}"}}'
    wait_for(lambda: scrape_metrics(cluster, leader).get(BTM + "remotelogsizebytes" + t) == remote_bytes, 30,
             "the remote log size gauge after the retention task's next run",
             detail=lambda: str({k: v for k, v in scrape_metrics(cluster, leader).items() if "remote" in k}))
    m = scrape_metrics(cluster, leader)
    assert m[BTM + "remotecopybytes_total" + t] == remote_bytes
    assert m[BTM + "remotecopyrequests_total" + t] == len(remote)
    assert m[BTM + "remotecopyerrors_total" + t] == 0
    assert m[BTM + "remotelogmetadatacount" + t] == len(remote)
    assert m[BTM + "remotecopylagsegments" + t] == 0 and m[BTM + "remotecopylagbytes" + t] == 0
    assert m[BTM + "remotefetchrequests_total" + t] >= 1 and m[BTM + "remotefetcherrors_total" + t] == 0
    assert m[BTM + "remotefetchbytes_total" + t] >= local_first * VALUE  # every record below the local log
    assert m[BTM + "remotecopybytes_total"] >= remote_bytes  # all topics
    follower = next(b for b in range(3) if b != leader)
    f = scrape_metrics(cluster, follower)
    assert BTM + "remotelogsizebytes" + t not in f and f[BTM + "remotecopyrequests_total"] == 0

    # Kafka's own Java consumer too
    java = shutil.which("java")
    assert java is not None, "java not found: run bash scripts/install.sh"
    t2 = time.monotonic()
    r = subprocess.run([java, "-Dlog4j.configuration=file:/dev/null", "-cp", kafka_classpath(), str(CONSUME_ALL),
                        cluster.bootstrap, topic, str(n), str(int(90 + slack))], capture_output=True, text=True,
                       timeout=180 + slack)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert f"consumed {n} in_order true" in r.stdout
    print(f"Kafka's Java consumer read all from offset 0 in {time.monotonic() - t2:.1f} s (JVM start included)")


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
        #: delivery latencies (s) of the acknowledged records
        self.latencies: List[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outage-producer", daemon=True)
        self._thread.start()

    def _done(self, err: Optional[KafkaError], msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked += 1
            self.latencies.append(msg.latency())  # type: ignore[attr-defined]

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
    n1 = 3000
    _produce(cluster.bootstrap, topic, 0, n1)
    leader = view.partitions(topic)[0][0]
    # settled: every rolled segment copied and deleted locally, each replica keeps only its active segment (so no
    # copy is in flight when S3 goes)
    wait_for(lambda: len(bucket_segments(s3, BUCKET, topic)) >= 2 and
             all(len(_local_segments(cluster, b, topic)) == 1 for b in range(3)), 60,
             "the first segments copied and deleted locally")
    before = bucket_segments(s3, BUCKET, topic)
    local_first = {b: _local_segments(cluster, b, topic)[0] for b in range(3)}
    offsets = {b: len(cluster.brokers[b].output()) for b in range(3)}

    # ---- S3 goes away for a minute; a producer keeps writing (~0.25 MB/s)
    s3.kill()
    outage_start = time.monotonic()
    producer = _BackgroundProducer(cluster.bootstrap, topic, n1, rate=OUTAGE_RATE)
    remote_reader = _consumer(cluster.bootstrap)
    remote_reader.assign([TopicPartition(topic, 0, 0)])
    local_reader = _consumer(cluster.bootstrap)
    local_reader.assign([TopicPartition(topic, 0, local_first[leader])])
    remote_seen: List[int] = []
    remote_errors: List[KafkaError] = []
    local_seen = 0
    local_next = local_first[leader]  # the tail reader's next offset
    grew = False
    t = f'{{topic="{topic}"}}'
    lag: List[Tuple[float, float]] = []  # (RemoteCopyLagSegments, RemoteCopyLagBytes) every ~5 s
    next_sample = outage_start
    try:
        while time.monotonic() - outage_start < OUTAGE_S:
            for m in remote_reader.consume(100, 0.2):
                if m.error() is not None:
                    remote_errors.append(m.error())
                else:
                    remote_seen.append(int(m.value()[:8]))
            for m in local_reader.consume(500, 0.2):
                assert m.error() is None, m.error()
                assert int(m.value()[:8]) == m.offset() == local_next
                local_seen += 1
                local_next += 1
            # nothing is deleted locally while its copy cannot be committed, on any replica
            for b in range(3):
                segs = _local_segments(cluster, b, topic)
                assert segs[0] == local_first[b], f"broker {b} deleted an uncopied segment: {segs[:3]}"
            grew = grew or len(_local_segments(cluster, leader, topic)) >= 5
            if time.monotonic() >= next_sample:
                m = scrape_metrics(cluster, leader)
                lag.append((m.get(BTM + "remotecopylagsegments" + t, 0.0), m.get(BTM + "remotecopylagbytes" + t, 0.0)))
                next_sample += 5
        assert all(b.is_alive() for b in cluster.brokers)
        # acks=all production went on at its rate (min.insync.replicas=2 of 3 live replicas), not slowed by S3
        expected = OUTAGE_RATE * OUTAGE_S
        assert producer.acked >= 0.9 * expected, (producer.sent, producer.acked, expected)
        latencies = sorted(producer.latencies)
        p99 = latencies[int(len(latencies) * 0.99)]
        assert p99 < 2.0, f"produce p99 {p99:.2f} s during the outage"
        # the tail was readable throughout: the reader at the tail kept up with what was acknowledged
        assert local_seen >= 0.9 * expected, local_seen
        assert local_next >= n1 + producer.acked - 2 * OUTAGE_RATE, (local_next, n1 + producer.acked)
        assert grew, "no new segment rolled during the outage"
        # the copy lag grew through the outage: never down, and by a segment at least every ~10 s
        assert [x for x, _ in lag] == sorted(x for x, _ in lag), lag
        assert [y for _, y in lag] == sorted(y for _, y in lag), lag
        assert lag[-1][0] - lag[0][0] >= OUTAGE_S // 10 and lag[-1][1] > lag[0][1], lag
        # the copies failed and are retried; a read needing S3 got an error the client retries, no records
        out = cluster.brokers[leader].output()[offsets[leader]:]
        assert "RLMCopyTask for" in out and "retried at the next run" in out, out[-3000:]
        assert "from remote storage" in out, out[-3000:]
        assert remote_seen == [], remote_seen[:5]
        m = scrape_metrics(cluster, leader)
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
    after = bucket_segments(s3, BUCKET, topic)
    assert set(before) <= set(after), "a segment copied before the outage is gone"
    starts = sorted({s for s, _ in after.values()})
    assert starts[0] == 0 and max(starts) <= _local_segments(cluster, leader, topic)[0]
    assert _consume_all(cluster.bootstrap, topic, n) == list(range(n))
    wait_for(lambda: scrape_metrics(cluster, leader)[BTM + "remotecopylagsegments" + t] == 0 and
             scrape_metrics(cluster, leader)[BTM + "remotecopylagbytes" + t] == 0, 30, "no copy lag left")
    print(f"\noutage {outage_s:.1f} s: {n - n1} records ({(n - n1) * VALUE / 1e6:.1f} MB) acknowledged during it "
          f"(p99 {p99 * 1000:.0f} ms), {local_seen} read at the tail, {len(remote_errors)} remote-fetch errors to the "
          f"client; copy lag (segments, bytes) every 5 s: {[(int(x), int(y)) for x, y in lag]}; after: "
          f"{len(after) - len(before)} segments copied ({len(after)} objects, {len(starts)} start offsets); "
          f"leader's metrics at the outage's end: {during}")


def _bucket_keys(s3: S3Server, topic: str) -> List[str]:
    """Every object key of the topic's partition 0 in the bucket."""
    return [obj["Key"] for page in s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                                          Prefix=f"{topic}-0-")
            for obj in page.get("Contents", [])]


def test_s3_leader_killed_mid_copy_new_leader_continues_wiped_follower_rebuilds_retention_deletes_objects(
        cluster: LocalCluster, s3: S3Server) -> None:
    view = ClusterView(cluster.bootstrap)
    topic = "s3-kill"
    _create_tiered_topic(view, topic)
    n1 = 3000
    _produce(cluster.bootstrap, topic, 0, n1)
    leader = view.partitions(topic)[0][0]
    wait_for(lambda: sum(h.reached(S.COPY_SEGMENT_FINISHED)
                         for h in remote_log_metadata(cluster.bootstrap, topic).values()) >= 2, 60,
             "the first segments copied")

    # ---- a copy in flight: S3 frozen (SIGSTOP), the next rolled segment's COPY_SEGMENT_STARTED is committed in
    # __remote_log_metadata and its upload hangs; then kill -9 the leader
    s3.pause()
    try:
        n2 = 2000
        _produce(cluster.bootstrap, topic, n1, n2)

        def in_flight() -> List[str]:
            return [sid for sid, h in remote_log_metadata(cluster.bootstrap, topic).items()
                    if h.states == [(S.COPY_SEGMENT_STARTED, leader)]]
        started = wait_for(in_flight, 30, "a COPY_SEGMENT_STARTED of the leader with no COPY_SEGMENT_FINISHED",
                           detail=lambda: cluster.brokers[leader].output()[-3000:])
        assert len(started) == 1, started
        dangling = started[0]
        cluster.brokers[leader].kill()
    finally:
        s3.resume()

    # ---- a new leader; producing goes on (2 of 3 in sync); it continues the copies from the metadata
    wait_for(lambda: view.partitions(topic)[0][0] not in (-1, leader), 60, "a new leader")
    new_leader = view.partitions(topic)[0][0]
    history = remote_log_metadata(cluster.bootstrap, topic)
    assert history[dangling].states == [(S.COPY_SEGMENT_STARTED, leader)], history[dangling].states
    killed_at = history[dangling].metadata
    # meanwhile the killed broker comes back with its partition directory wiped (checked below: it rebuilds from
    # the remote state, OFFSET_MOVED_TO_TIERED_STORAGE and Kafka's TierStateMachine, instead of fetching from
    # offset 0), so the cluster is whole again
    shutil.rmtree(cluster.brokers[leader].log_dir / f"{topic}-0")
    cluster.brokers[leader].start(wait=False)
    n3 = 2000
    _produce(cluster.bootstrap, topic, n1 + n2, n3)
    n = n1 + n2 + n3
    alive = [b for b in range(3) if b != leader]

    def caught_up() -> bool:
        h = remote_log_metadata(cluster.bootstrap, topic)
        ends = [x.metadata.end_offset for x in h.values() if x.reached(S.COPY_SEGMENT_FINISHED)]
        return bool(ends) and max(ends) + 1 >= _local_segments(cluster, new_leader, topic)[-1] and \
            all(len(_local_segments(cluster, b, topic)) <= 2 for b in alive)
    wait_for(caught_up, 60, "the new leader copies up to its active segment and the local logs shrink",
             detail=lambda: cluster.brokers[new_leader].output()[-3000:])
    history = remote_log_metadata(cluster.bootstrap, topic)
    chain = assert_finished_copies_continue(history)
    assert {m.broker_id for m in chain} == {leader, new_leader}, [(m.start_offset, m.broker_id) for m in chain]
    # the new leader re-copied what the unfinished copy held, with its own segment ids
    assert any(m.broker_id == new_leader and m.start_offset <= killed_at.start_offset <= m.end_offset
               for m in chain), (killed_at.start_offset, [(m.start_offset, m.end_offset, m.broker_id) for m in chain])
    assert history[dangling].state == S.COPY_SEGMENT_STARTED  # left for the expiration, as Kafka 3.9 does
    # no gap between what is in S3 and the new leader's local log
    assert chain[-1].end_offset + 1 >= _local_segments(cluster, new_leader, topic)[0]
    # every acknowledged record reads back from offset 0, across the remote (both leaders' copies) and local parts
    assert _consume_all(cluster.bootstrap, topic, n) == list(range(n))

    # ---- the wiped broker rebuilt its replica from the remote state, not from offset 0
    cluster.brokers[leader].wait_started(60)
    wait_for(lambda: leader in view.partitions(topic)[0][2], 90, "the wiped broker back in the ISR",
             detail=lambda: cluster.brokers[leader].output()[-3000:])
    rebuilt = _local_segments(cluster, leader, topic)
    assert rebuilt and rebuilt[0] > chain[0].end_offset, f"the wiped broker fetched from offset 0: {rebuilt}"
    built = re.search(rf"built the state of {re.escape(topic)}-0 from remote storage up to offset \d+ .*?fetching "
                      r"from (\d+)", cluster.brokers[leader].output_since_start())
    assert built and int(built.group(1)) > chain[0].end_offset, cluster.brokers[leader].output_since_start()[-3000:]
    assert _local_bytes(cluster, leader, topic) <= 3 * SEGMENT_BYTES

    # ---- retention expiry: retention.ms lowered, every remote segment goes from the metadata and from the bucket,
    # the unfinished copy of the killed leader too (once the log start passes it, as Kafka's expiration does)
    copied_end = chain[-1].end_offset
    retention = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    view.admin.incremental_alter_configs([retention])[retention].result(30)
    wait_for(lambda: not _bucket_keys(s3, topic), 60, "every object of the topic deleted from the bucket",
             detail=lambda: str(_bucket_keys(s3, topic)[:10]))
    wait_for(lambda: all(h.state == S.DELETE_SEGMENT_FINISHED
                         for h in remote_log_metadata(cluster.bootstrap, topic).values()), 30,
             "every remote segment DELETE_SEGMENT_FINISHED in __remote_log_metadata",
             detail=lambda: str({k: v.states for k, v in remote_log_metadata(cluster.bootstrap, topic).items()}))
    history = remote_log_metadata(cluster.bootstrap, topic)
    assert [s for s, _ in history[dangling].states] == [S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED,
                                                       S.DELETE_SEGMENT_FINISHED], history[dangling].states
    start: List[object] = []

    def log_start_moved() -> bool:
        start[:] = list(list_offset(cluster.brokers[view.partitions(topic)[0][0]].bootstrap, topic, -2))
        return start[0] == 0 and int(start[1]) > copied_end  # type: ignore[call-overload]
    wait_for(log_start_moved, 60, f"the log start past the expired remote segments (up to {copied_end})",
             detail=lambda: str(start))
    print(f"\nkilled leader {leader} with segment {dangling} ({killed_at.start_offset}-{killed_at.end_offset}) in "
          f"flight; new leader {new_leader}; finished copies (start-end@broker) "
          f"{[f'{m.start_offset}-{m.end_offset}@{m.broker_id}' for m in chain]}; rebuilt replica fetched from "
          f"{built.group(1)}; "
          f"{len(history)} segments deleted on expiry")
