"""Spark's Kafka connector reads a tiered topic from offset 0 (issue 18): 3 of our brokers (bin/, real ZooKeeper) tier
an RF-3 topic of 2 partitions to a real S3 server (S3Proxy, tests/harness/s3_server.py) with small segments and a
small local retention, so every replica keeps only the tail of each partition on disk. Checked first, per partition:
the earliest offset is 0, the leader's local log starts past 0 (ListOffsets -4, and on every replica's disk), the
bucket holds the segments from offset 0 up to the local log (ListOffsets -5 reaches it). Then
``spark.read.format("kafka")`` (startingOffsets earliest, split into more Spark partitions than Kafka's so tasks start
inside remote segments) and a ``readStream`` (Trigger.AvailableNow, a few micro-batches, memory sink) each return
every acknowledged record exactly once, in offset order per partition, with its key and value, and the leaders'
remote fetch counters show that the reads went to S3.
"""
from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import pytest

from tests.harness.cluster_ops import module_cluster
from tests.harness.faults import partitions_seen_by
from tests.harness.s3_server import S3Server
from tests.harness.tiered import EARLIEST_LOCAL, LATEST_TIERED, list_offset, local_segments
from tests.harness.tiered import scrape_metrics
from tests.harness.tiered_s3 import bucket_segments, s3_tiered_overrides
from tests.harness.waiting import wait_for
from tests.integration.spark.kafka_io import create_topic, produce
from tools.cluster import LocalCluster, free_port

BUCKET = "tiered-spark"
PARTITIONS = 2
RECORDS = 2000  # per partition: 2 MB of values each, ~8 segments of 256 KiB
VALUE = 1000
SEGMENT_BYTES = 256 * 1024
REMOTE_FETCHES = "kafka_server_brokertopicmetrics_remotefetchrequests_total"

#: (partition, offset, key, value) as Spark returned it
Row = Tuple[int, int, bytes, bytes]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
def cluster(s3: S3Server, zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with module_cluster(Path(tmp_path_factory.mktemp("spark-tiered")), zookeeper, 3,
                        overrides=s3_tiered_overrides(s3, BUCKET),
                        broker_overrides={i: {"broker.metrics.prometheus.port": str(free_port())}
                                          for i in range(3)}) as c:
        yield c


def _key(p: int, i: int) -> bytes:
    return b"k%d-%06d" % (p, i)


def _value(p: int, i: int) -> bytes:
    head = b"p%d:%06d:" % (p, i)
    return head + bytes([97 + (i + p) % 26]) * (VALUE - len(head))


def _spans(offsets: Sequence[int]) -> str:
    """Offsets as ranges ("0-99, 250"), the first 20 ranges."""
    ranges: List[List[int]] = []
    for o in sorted(set(offsets)):
        if ranges and o == ranges[-1][1] + 1:
            ranges[-1][1] = o
        else:
            ranges.append([o, o])
    text = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges[:20])
    return text + (f" ... ({len(ranges)} ranges)" if len(ranges) > 20 else "")


def _problems(rows: Sequence[Row], expected: Dict[int, Dict[int, Tuple[bytes, bytes]]], what: str,
              local_start: Dict[int, int]) -> List[str]:
    """What is wrong with ``rows`` (in the order Spark returned them) against the acknowledged records: missing or
    duplicated offsets, offsets out of order, wrong keys/values, unknown partitions; empty when exactly right.
    ``local_start``: partition -> the leader's local log start (below it the records come from S3)."""
    problems: List[str] = []
    by_partition: Dict[int, List[Row]] = {}
    for r in rows:
        by_partition.setdefault(r[0], []).append(r)
    for p in sorted(set(by_partition) - set(expected)):
        problems.append(f"{what}: {len(by_partition[p])} rows of partition {p}, which was not produced to")
    for p, want in sorted(expected.items()):
        got = by_partition.get(p, [])
        offsets = [r[1] for r in got]
        counts = Counter(offsets)
        missing = sorted(set(want) - set(counts))
        dup = sorted(o for o, c in counts.items() if c > 1)
        extra = sorted(set(counts) - set(want))
        back = [(a, b) for a, b in zip(offsets, offsets[1:]) if b < a]
        wrong = [r for r in got if r[1] in want and (r[2], r[3]) != want[r[1]]]
        head = (f"{what}, partition {p} ({len(got)} rows, {len(want)} acknowledged records at offsets 0-{len(want) - 1}, "
                f"0-{local_start.get(p, 0) - 1} only in S3)")
        if missing:
            problems.append(f"{head}: {len(missing)} offsets missing: {_spans(missing)}")
        if dup:
            problems.append(f"{head}: {len(dup)} offsets more than once: {_spans(dup)}")
        if extra:
            problems.append(f"{head}: {len(extra)} offsets never acknowledged: {_spans(extra)}")
        if back:
            problems.append(f"{head}: {len(back)} times out of offset order, first {back[:5]}")
        if wrong:
            r = wrong[0]
            problems.append(f"{head}: {len(wrong)} rows with another key/value than produced, first offset {r[1]}: "
                            f"key {r[2]!r} value {r[3][:24]!r}..., produced key {want[r[1]][0]!r} value "
                            f"{want[r[1]][1][:24]!r}...")
    return problems


def _rows(df: Any) -> List[Row]:
    return [(int(r["partition"]), int(r["offset"]), bytes(r["key"]), bytes(r["value"])) for r in df.collect()]


def _remote_fetches(cluster: LocalCluster, leaders: Dict[int, int], topic: str) -> float:
    return sum(scrape_metrics(cluster, b).get(f'{REMOTE_FETCHES}{{topic="{topic}"}}', 0.0) for b in set(leaders.values()))


def _tiered(cluster: LocalCluster, s3: S3Server, topic: str, p: int, leader: int) -> Dict[str, Any]:
    """The partition's tiering state: earliest offset, the leader's local log start and highest tiered offset,
    the first local segment of every replica (-1: none), the segments in the bucket."""
    bs = cluster.brokers[leader].bootstrap
    return {"earliest": list_offset(bs, topic, -2, p)[1], "local_start": list_offset(bs, topic, EARLIEST_LOCAL, p)[1],
            "tiered_end": list_offset(bs, topic, LATEST_TIERED, p)[1],
            "replicas_first_local": {b.broker_id: (local_segments(b.log_dir, topic, p) or [-1])[0]
                                     for b in cluster.brokers},
            "bucket_starts": sorted(s for s, _ in bucket_segments(s3, BUCKET, topic, p).values())}


def test_spark_reads_tiered_topic_from_offset_zero(spark: Any, cluster: LocalCluster, s3: S3Server,
                                                   tmp_path: Path) -> None:
    topic = create_topic(cluster.bootstrap, f"spark-tiered-{uuid.uuid4().hex[:6]}", partitions=PARTITIONS, rf=3,
                         config={"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                 "local.retention.bytes": str(SEGMENT_BYTES), "retention.ms": "-1",
                                 "min.insync.replicas": "2"})
    acked = produce(cluster.bootstrap, topic,
                    [{"partition": p, "key": _key(p, i), "value": _value(p, i)}
                     for i in range(RECORDS) for p in range(PARTITIONS)],
                    extra={"linger.ms": 20, "batch.size": 64 * 1024}, timeout_s=120)
    expected: Dict[int, Dict[int, Tuple[bytes, bytes]]] = {p: {} for p in range(PARTITIONS)}
    for a in acked:
        assert a.key is not None and a.value is not None
        expected[a.partition][a.offset] = (a.key, a.value)
    for p in range(PARTITIONS):
        assert sorted(expected[p]) == list(range(RECORDS)), f"partition {p}: acknowledged offsets not 0-{RECORDS - 1}"

    # ---- local retention deleted the early segments on every replica once they were in the bucket: a read from
    # offset 0 must go to S3 and then cross over to the local log
    leaders = {p: lead for p, (lead, _, _) in partitions_seen_by(cluster.bootstrap, topic).items()}
    state: Dict[int, Dict[str, Any]] = {}

    def tiered() -> bool:
        for p in range(PARTITIONS):
            state[p] = _tiered(cluster, s3, topic, p, leaders[p])
        # retention deletes one segment at a time after each is copied: wait until the leader's local log starts
        # past at least two bucket segments (a check made at the first deletion found only one, CI of stop 32)
        return all(s["earliest"] == 0 and s["local_start"] > 0 and s["tiered_end"] + 1 >= s["local_start"] and
                   sum(x < s["local_start"] for x in s["bucket_starts"]) >= 2 and
                   all(f > 0 for f in s["replicas_first_local"].values())
                   for s in state.values())
    wait_for(tiered, 60, "every replica's local log past offset 0 and at least two segments before it in S3",
             interval_s=0.5, detail=lambda: str(state))
    for p, s in state.items():
        starts = s["bucket_starts"]
        assert starts and starts[0] == 0, f"partition {p}: no segment from offset 0 in the bucket: {s}"
        # local.retention.bytes keeps a copied segment or two on disk too: what matters is that the segments below
        # the leader's local log start are only in S3, and that the tiered offsets reach it
        assert sum(x < s["local_start"] for x in starts) >= 2 and s["local_start"] <= s["tiered_end"] + 1, \
            f"partition {p}: the bucket's segments do not reach the leader's local log: {s}"
    fetches = _remote_fetches(cluster, leaders, topic)

    # ---- batch: every record from offset 0, Spark partitions starting inside remote segments
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").option("minPartitions", "6")
          .load().select("partition", "offset", "key", "value"))
    boundary = {p: int(s["local_start"]) for p, s in state.items()}
    problems = _problems(_rows(df), expected, "spark.read batch", boundary)
    assert not problems, "\n".join(problems)
    after_batch = _remote_fetches(cluster, leaders, topic)
    assert after_batch > fetches, f"the batch read made no remote fetch ({fetches} before, {after_batch} after)"

    # ---- streaming: Trigger.AvailableNow in micro-batches of at most 1,500 records into a memory table
    name = f"tiered_{uuid.uuid4().hex[:6]}"
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "1500")
         .load().select("partition", "offset", "key", "value")
         .writeStream.queryName(name).format("memory").outputMode("append")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120), "the AvailableNow query did not finish in 120 s"
        assert q.exception() is None, q.exception()
        batches = [b for b in q.recentProgress if b["numInputRows"] > 0]
    finally:
        q.stop()
    problems = _problems(_rows(spark.table(name)), expected, "readStream AvailableNow", boundary)
    assert not problems, "\n".join(problems)
    assert len(batches) >= 2, f"one micro-batch only: {[b['numInputRows'] for b in batches]}"
    assert _remote_fetches(cluster, leaders, topic) > after_batch, "the streaming read made no remote fetch"
    print(f"\ntiering per partition {state}; remote fetches: {fetches} before, {after_batch} after the batch read, "
          f"{_remote_fetches(cluster, leaders, topic)} after the stream ({len(batches)} micro-batches)")
