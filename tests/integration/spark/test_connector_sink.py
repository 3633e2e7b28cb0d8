"""Spark's Kafka sink (writeStream.format("kafka")) with kafka.acks=all and the idempotent producer, against one
broker process: keys, values and headers arrive exactly once, each key in one partition, and the broker's
producer state (DescribeProducers) shows the connector's idempotent producer with one sequence per record."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, Set

from broker.protocol.api import ApiKey
from tests.harness.broker_process import BrokerProcess
from tests.harness.cluster_ops import call
from tests.integration.spark.kafka_io import create_topic, produce, read_all, unique


def _producers(broker: BrokerProcess, topic: str, partitions: int) -> Dict[int, Any]:
    r = call(broker, ApiKey.DESCRIBE_PRODUCERS, 0,
             {"topics": [{"name": topic, "partition_indexes": list(range(partitions))}]})
    out = {}
    for p in r.topics[0].partitions:
        assert p.error_code == 0, p
        out[p.partition_index] = list(p.active_producers)
    return out


def test_streaming_sink_acks_all_idempotent_keys_and_headers(spark: Any, broker: BrokerProcess,
                                                             tmp_path: Path) -> None:
    src = create_topic(broker.bootstrap, unique("sink-in"), partitions=2)
    dst = create_topic(broker.bootstrap, unique("sink-out"), partitions=3)
    sent = produce(broker.bootstrap, src, [
        {"key": f"user-{i % 37}".encode(), "value": f"event-{i}".encode(), "partition": i % 2,
         "headers": [("seq", str(i).encode()), ("kind", b"even" if i % 2 == 0 else b"odd")]} for i in range(600)])

    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", src).option("startingOffsets", "earliest").option("includeHeaders", "true")
         .option("maxOffsetsPerTrigger", "200").load()
         .selectExpr("key", "value", "headers")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", dst)
         .option("kafka.acks", "all").option("kafka.enable.idempotence", "true")
         .option("kafka.max.in.flight.requests.per.connection", "5")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()

    out = read_all(broker.bootstrap, dst)
    assert Counter((r.key, r.value, r.headers) for r in out) == Counter((r.key, r.value, r.headers) for r in sent)
    partitions_of: Dict[bytes, Set[int]] = defaultdict(set)
    for r in out:
        partitions_of[r.key].add(r.partition)  # type: ignore[index]
    assert all(len(ps) == 1 for ps in partitions_of.values()), "a key was spread over partitions"

    per_partition = Counter(r.partition for r in out)
    producers = _producers(broker, dst, 3)
    for p, n in per_partition.items():
        active = producers[p]
        assert active, f"partition {p}: no idempotent producer state (the sink did not use idempotence)"
        assert all(a.producer_id >= 0 and a.producer_epoch >= 0 for a in active), active
        assert sum(a.last_sequence + 1 for a in active) == n, (p, n, active)
