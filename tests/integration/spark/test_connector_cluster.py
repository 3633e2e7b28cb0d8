"""Spark's Kafka connector on a 3-broker cluster of ours (RF=3, min.insync.replicas=2): a streaming query copies an
input topic to an output topic (kafka.acks=all, idempotent sink) while an idempotent producer keeps writing the
input. The leader of an input partition is killed (SIGKILL) and brought back, then the leader of an output
partition: the query never fails (Spark retries the offset lookups that time out), and every acknowledged input
record reaches the output (the Kafka sink is at-least-once, so a record may appear twice, never zero times)."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator, List, Set

import pytest

from tests.harness.cluster_ops import module_cluster
from tests.harness.faults import ProduceLoad, partitions_seen_by
from tests.integration.spark.kafka_io import create_topic, read_all, wait_for
from tools.cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with module_cluster(Path(tmp_path_factory.mktemp("spark-cluster")), zookeeper, 3,
                        overrides={"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false",
                                   "unclean.leader.election.enable": "false"}) as c:
        yield c


def _out_values(cluster: LocalCluster, topic: str) -> List[bytes]:
    return [r.value for r in read_all(cluster.bootstrap, topic, timeout_s=30)]  # type: ignore[misc]


def _full_isr(cluster: LocalCluster, *topics: str) -> bool:
    return all(len(isr) == 3 for t in topics for _, _, isr in partitions_seen_by(cluster.bootstrap, t).values())


def _kill_leader_and_recover(cluster: LocalCluster, topic: str, q: Any, out: str, load: ProduceLoad,
                             inp: str) -> None:
    leader = partitions_seen_by(cluster.bootstrap, topic)[0][0]
    before = len(_out_values(cluster, out))
    cluster.broker(leader).kill()
    wait_for(lambda: partitions_seen_by(cluster.bootstrap, topic)[0][0] not in (leader, -1), 60,
             f"a new leader of {topic}-0 after broker {leader} was killed", q)
    # the query keeps copying records the producer wrote after the kill
    acked_after = load.ack_count() + 100
    load.wait_acks(acked_after, timeout_s=90)
    wait_for(lambda: len(_out_values(cluster, out)) >= before + 300, 120,
             f"the query to keep writing after broker {leader} (leader of {topic}-0) was killed", q)
    cluster.broker(leader).start(timeout=120)
    wait_for(lambda: _full_isr(cluster, inp, out), 120, f"broker {leader} back in every ISR", q)


def test_query_survives_leader_kills(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    inp = create_topic(cluster.bootstrap, f"spark-in-{uuid.uuid4().hex[:6]}", partitions=2, rf=3,
                       config={"min.insync.replicas": "2"})
    out = create_topic(cluster.bootstrap, f"spark-out-{uuid.uuid4().hex[:6]}", partitions=2, rf=3,
                       config={"min.insync.replicas": "2"})
    load = ProduceLoad(cluster.bootstrap, inp, 2, interval_s=0.02).start()
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("subscribe", inp).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "2000")
         # The driver's AdminClient pins ListOffsets to the leader its lookup found; a leader killed just before
         # (while every broker still names it, until its ZooKeeper session expires) leaves that call waiting for
         # the node until default.api.timeout.ms (60 s) before Spark retries. 15 s keeps the test short (the
         # request timeout may not exceed it).
         .option("kafka.default.api.timeout.ms", "15000").option("kafka.request.timeout.ms", "10000")
         .load().selectExpr("CAST(partition AS STRING) AS key", "value")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", out)
         .option("kafka.acks", "all").option("kafka.enable.idempotence", "true")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="1 second").start())
    try:
        wait_for(lambda: len(_out_values(cluster, out)) >= 200, 120, "the first records copied", q)
        _kill_leader_and_recover(cluster, inp, q, out, load, inp)
        _kill_leader_and_recover(cluster, out, q, out, load, inp)
        stats = load.stop()
        assert not stats.errors, stats.errors[:5]
        acked: Set[bytes] = {a.value for acks in stats.acked.values() for a in acks}
        wait_for(lambda: acked <= set(_out_values(cluster, out)), 180,
                 "every acknowledged input record in the output", q)
        assert q.exception() is None and q.isActive, q.exception()
    finally:
        q.stop()
    values = _out_values(cluster, out)
    assert acked <= set(values), f"{len(acked - set(values))} acknowledged records lost"
    assert set(values) <= set(_out_values(cluster, inp)), "the output holds records that are not in the input"
