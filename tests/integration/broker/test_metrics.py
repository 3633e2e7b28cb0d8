"""The Prometheus endpoint of a real broker process (broker.metrics.prometheus.port), scraped over HTTP while
confluent-kafka produces, consumes and commits: the values move as records flow, under the JMX exporter's names
(docs/metrics.md); a taken metrics port ends start-up with one line."""
from __future__ import annotations

import socket
import urllib.request
import uuid
from pathlib import Path
from typing import Dict, FrozenSet, Iterator, Tuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.broker_process import BrokerProcess, free_port, running_broker
from tests.harness.waiting import wait_for
from tests.integration.broker.test_startup import assert_one_line_failure, run_to_exit

Samples = Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]
RECORDS = 20


def scrape(port: int) -> Samples:
    """One scrape, parsed as Prometheus parses the text format."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over the series of ``name`` whose labels include ``labels`` (e.g. every version of one request)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


@pytest.fixture(scope="module")
def metrics_broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[BrokerProcess, int]]:
    port = free_port()
    with running_broker(Path(tmp_path_factory.mktemp("metrics")), f"{zookeeper}/m-{uuid.uuid4().hex[:10]}",
                        overrides={"broker.metrics.prometheus.port": str(port),
                                   "broker.metrics.prometheus.host": "127.0.0.1"}) as b:
        yield b, port


def test_values_move_as_records_flow(metrics_broker: Tuple[BrokerProcess, int]) -> None:
    broker, port = metrics_broker
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    before = scrape(port)
    assert value(before, "kafka_controller_kafkacontroller_activecontrollercount") == 1  # the only broker

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # flush.messages=1: every append is fsynced, so LogFlushStats must move
    admin.create_topics([NewTopic(topic, 1, 1, config={"flush.messages": "1"})], operation_timeout=30)[topic] \
        .result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    payload = [(f"k{i}".encode(), b"v" * 100) for i in range(RECORDS)]
    for key, val in payload:
        producer.produce(topic, key=key, value=val)
        producer.poll(0)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got = []
        deadline_polls = 120
        while len(got) < RECORDS and deadline_polls:
            deadline_polls -= 1
            got.extend(m for m in consumer.consume(RECORDS, 0.5) if m.error() is None)
        assert len(got) == RECORDS
        consumer.commit(offsets=[TopicPartition(topic, 0, RECORDS // 2)], asynchronous=False)
        half = scrape(port)
        assert value(half, "broker_consumer_group_lag", group=group, topic=topic, partition="0") == RECORDS // 2
        consumer.commit(offsets=[TopicPartition(topic, 0, RECORDS)], asynchronous=False)
    finally:
        consumer.close()
    after = scrape(port)

    # consumer-group lag falls to 0 once everything is committed
    assert (("broker_consumer_group_lag", frozenset({("group", group), ("topic", topic), ("partition", "0")}))
            in after)
    assert value(after, "broker_consumer_group_lag", group=group, topic=topic, partition="0") == 0

    # BrokerTopicMetrics: per topic and for all topics
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == RECORDS
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total") >= \
        value(before, "kafka_server_brokertopicmetrics_messagesin_total") + RECORDS
    bytes_in = value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in > RECORDS * 100  # the values alone are 2000 bytes; batches add their headers
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total") >= \
        value(before, "kafka_server_brokertopicmetrics_bytesin_total") + bytes_in
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in

    # the log holds exactly the batches appended
    assert value(after, "kafka_log_log_size", topic=topic, partition="0") == bytes_in

    # RequestMetrics for Produce and Fetch (by version), their times and queue times
    for request in ("Produce", "Fetch", "FetchConsumer", "OffsetCommit"):
        assert total(after, "kafka_network_requestmetrics_requests_total", request=request) > \
            total(before, "kafka_network_requestmetrics_requests_total", request=request), request
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= \
        value(before, "kafka_network_requestmetrics_totaltimems_count", request="Produce") + 1
    assert value(after, "kafka_network_requestmetrics_requestqueuetimems_count", request="Fetch") > \
        value(before, "kafka_network_requestmetrics_requestqueuetimems_count", request="Fetch")
    assert value(after, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99") > 0
    assert ("kafka_network_requestmetrics_requests_total",
            frozenset({("request", "FetchFollower"), ("version", "17")})) not in after  # no follower here

    # flushes, partitions, controller
    assert value(after, "kafka_log_logflushstats_logflushrateandtimems_count") >= \
        value(before, "kafka_log_logflushstats_logflushrateandtimems_count") + 1
    assert value(after, "kafka_server_replicamanager_partitioncount") >= 2  # the topic and __consumer_offsets
    assert value(after, "kafka_server_replicamanager_leadercount") == \
        value(after, "kafka_server_replicamanager_partitioncount")
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(after, "kafka_server_replicamanager_isrshrinks_total") == 0


def test_scrapes_do_not_hold_up_requests(metrics_broker: Tuple[BrokerProcess, int]) -> None:
    """Scrapes in a loop while a producer runs: every record is acknowledged and every scrape answers."""
    broker, port = metrics_broker
    topic = f"busy-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    acked = []
    for i in range(200):
        producer.produce(topic, value=b"x" * 50, on_delivery=lambda err, msg: acked.append(err))
        if i % 20 == 0:
            assert value(scrape(port), "kafka_controller_kafkacontroller_activecontrollercount") == 1
        producer.poll(0)
    assert producer.flush(30) == 0
    assert acked == [None] * 200
    wait_for(lambda: value(scrape(port), "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 200,
             10, "200 records counted in")


def test_a_taken_metrics_port_ends_start_up_with_one_line(tmp_path: Path, zk_chroot: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        rc, out, err = run_to_exit(tmp_path, zk_chroot, {"broker.metrics.prometheus.port": str(port),
                                                         "broker.metrics.prometheus.host": "127.0.0.1"})
    assert_one_line_failure(rc, out, err, "broker.metrics.prometheus.port", str(port))
