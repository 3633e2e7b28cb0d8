"""Stock clients against a 3-broker cluster (real processes from bin/, real ZooKeeper): the Java client (kafka-clients
4.3.0 through compat-tests/java/KafkaCompat.java) and confluent-kafka (librdkafka).

What they must see, as against Apache Kafka: Metadata/describeCluster with every broker and its rack; leaders,
replicas and ISRs; a producer (idempotent, acks=all) that rides through a leader being killed or shut down with
nothing lost or duplicated; a consumer group that carries on from its committed offsets when its coordinator's
broker dies.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import all_brokers_agree
from tools.cluster import LocalCluster

_spec = importlib.util.spec_from_file_location("compat_java_jars", Path(__file__).parent / "java" / "jars.py")
jars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jars)  # type: ignore[union-attr]

RACKS = {0: "rack-a", 1: "rack-b", 2: "rack-c"}
FAST = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "5000",
        "controlled.shutdown.retry.backoff.ms": "500", "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "6"}


@pytest.fixture(scope="module")
def cluster3(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(Path(tmp_path_factory.mktemp("cluster3")), 3, zk_connect=f"{zookeeper}/cc-{uuid.uuid4().hex[:8]}",
                     overrides=FAST, broker_overrides={i: {"broker.rack": r} for i, r in RACKS.items()})
    c.start()
    try:
        yield c
    finally:
        codes = c.stop()
        for b in c.brokers:
            assert "Traceback" not in b.output(), f"broker {b.broker_id} logged a traceback:\n{b.output()[-5000:]}"
        assert set(codes.values()) <= {0}, codes


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10)
    return int(md.topics[topic].partitions[partition].leader)


def wait_all_in_sync(cluster: LocalCluster, topic: str, timeout_s: float = 60.0) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
        if parts and all(sorted(p.isrs) == sorted(p.replicas) and p.leader >= 0 for p in parts):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic}: replicas did not all return to the ISR within {timeout_s}s")


class JavaScenario:
    """KafkaCompat run in the background; the test reacts to its events (e.g. kills a broker after "ready")."""

    def __init__(self, scenario: str, bootstrap: str) -> None:
        self.prefix = f"jc-{uuid.uuid4().hex[:6]}"
        self.cmd = jars.java_command(scenario, bootstrap, self.prefix)
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: Dict[str, dict] = {}
        self.topic = f"{self.prefix}-{scenario}"

    def wait_for(self, step: str, timeout_s: float = 120.0) -> dict:
        deadline = time.monotonic() + timeout_s
        assert self.proc.stdout is not None
        while step not in self.events:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {step!r} from the Java client within {timeout_s}s: {self.events}")
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"Java client ended before {step!r}: {self.events}\n{self.stderr()}")
            if line.startswith("{"):
                ev = json.loads(line)
                self.events[ev["step"]] = ev
                if "error" in ev and ev["step"] != "done":
                    raise AssertionError(f"Java step {ev['step']} failed: {ev['error']}")
        return self.events[step]

    def finish(self, timeout_s: float = 240.0) -> dict:
        done = self.wait_for("done", timeout_s)
        self.proc.wait(30)
        assert done.get("ok"), f"Java scenario failed: {done}\n{self.stderr()}"
        return done

    def stderr(self) -> str:
        return self.proc.stderr.read()[-3000:] if self.proc.stderr else ""


@pytest.fixture(scope="module")
def java_ready() -> None:
    try:
        jars.compile_harness(jars.ensure_jars())
    except jars.JavaUnavailable as exc:
        pytest.fail(f"Java client unavailable: {exc}", pytrace=False)


def restart(cluster: LocalCluster, broker_id: int) -> None:
    b = cluster.broker(broker_id)
    b.start(timeout=90)


# ------------------------------------------------------------------------------------------------ Java client
def test_java_sees_every_broker_with_its_rack_and_rack_spread_replicas(cluster3: LocalCluster, java_ready: None
                                                                      ) -> None:
    run = JavaScenario("cluster-describe", cluster3.bootstrap)
    nodes = run.wait_for("cluster")
    topic = run.wait_for("topic")
    run.finish()
    assert {(n["id"], n["rack"]) for n in nodes["nodes"]} == set(RACKS.items())
    assert nodes["controller"] in RACKS
    parts = topic["partitions"]
    assert sorted(p["partition"] for p in parts) == [0, 1, 2]
    for p in parts:
        assert sorted(p["replicas"]) == [0, 1, 2] and p["leader"] == p["replicas"][0]
        assert sorted(p["isr"]) == [0, 1, 2]
    assert sorted(p["leader"] for p in parts) == [0, 1, 2]  # each broker leads its share


@pytest.mark.parametrize("how", ["kill", "sigterm"])
def test_java_producer_rides_through_a_leader_failure(cluster3: LocalCluster, java_ready: None, how: str) -> None:
    run = JavaScenario("cluster-produce", cluster3.bootstrap)
    run.wait_for("ready")
    time.sleep(3)
    victim = leader_of(cluster3, run.topic, 0)
    b = cluster3.broker(victim)
    if how == "kill":
        b.kill()
    else:
        assert b.stop() == 0
    produced = run.wait_for("produced", 180)
    verified = run.wait_for("verified", 120)
    run.finish()
    restart(cluster3, victim)
    assert produced["errors"] == 0, produced
    assert produced["acked"] == 6000
    assert verified["missing_acked"] == 0 and verified["duplicates"] == 0 and verified["mismatched"] == 0, verified
    wait_all_in_sync(cluster3, run.topic)


def test_java_group_carries_on_when_its_coordinator_dies(cluster3: LocalCluster, java_ready: None) -> None:
    run = JavaScenario("cluster-group", cluster3.bootstrap)
    ready = run.wait_for("ready")
    time.sleep(2)
    coordinator = ready["coordinator"]
    cluster3.broker(coordinator).kill()
    consumed = run.wait_for("consumed", 240)
    run.finish()
    restart(cluster3, coordinator)
    assert consumed["distinct"] == 4000, consumed
    # Duplicates only from records delivered again after the failover, never more than one window's worth.
    assert consumed["duplicates"] < 2000, consumed


# ------------------------------------------------------------------------------------------------ confluent-kafka
def test_confluent_metadata_shows_leaders_replicas_isr_and_racks(cluster3: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap})
    topic = f"cm-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 6, 3)], operation_timeout=30)[topic].result(40)
    desc = admin.describe_cluster().result(30)
    assert {(n.id, n.rack) for n in desc.nodes} == set(RACKS.items())
    assert desc.controller.id in RACKS
    md = admin.list_topics(topic, timeout=10)
    assert sorted(md.brokers) == [0, 1, 2]
    leaders: Dict[int, int] = {}
    for p in md.topics[topic].partitions.values():
        assert len(set(p.replicas)) == 3 and sorted(p.isrs) == sorted(p.replicas)
        assert p.leader == p.replicas[0]
        leaders[p.leader] = leaders.get(p.leader, 0) + 1
    assert leaders == {0: 2, 1: 2, 2: 2}


def test_confluent_clients_follow_a_leader_move_without_errors(cluster3: LocalCluster) -> None:
    """A controlled shutdown of a leader under load: librdkafka follows the new leader; nothing surfaces."""
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap})
    topic = f"cf-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[topic].result(40)
    # every broker serves the new topic before the clients start: a Metadata answer from a broker the creation has
    # not reached yet is an UNKNOWN_TOPIC_OR_PART the consumer reports, and this test is about the leader move
    deadline = time.monotonic() + 60
    while all_brokers_agree(cluster3, topic, lambda ps: len(ps) == 3 and all(p.leader >= 0 for p in ps.values())
                            ) is None:
        assert time.monotonic() < deadline, f"the brokers did not all serve {topic} within 60 s"
        time.sleep(0.1)
    errors: List[str] = []
    acked: List[tuple] = []
    p = Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 2, "message.timeout.ms": 120000})
    consumer = Consumer({"bootstrap.servers": cluster3.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.subscribe([topic])
    consumer_errors: List[str] = []
    seen: set = set()
    victim: Optional[int] = None
    for i in range(4000):
        p.produce(topic, key=str(i).encode(), value=str(i).encode(),
                  on_delivery=lambda e, m: errors.append(str(e)) if e else acked.append((m.partition(), m.offset())))
        p.poll(0)
        if i % 50 == 0:
            for m in consumer.consume(500, 0):
                if m.error():  # when: before or after the leader's shutdown
                    consumer_errors.append(f"at record {i} (victim {victim}): {m.error()}")
                else:
                    seen.add(int(m.value()))
        if i == 1500:
            victim = leader_of(cluster3, topic, 1)
            cluster3.broker(victim).terminate()  # SIGTERM: controlled shutdown while we keep going
        time.sleep(0.002)
    assert p.flush(120) == 0
    deadline = time.monotonic() + 90
    while len(seen) < 4000 and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.5):
            if m.error():
                consumer_errors.append(f"after the last record: {m.error()}")
            else:
                seen.add(int(m.value()))
    consumer.close()
    assert victim is not None
    assert cluster3.broker(victim).stop() == 0
    restart(cluster3, victim)
    assert errors == [] and consumer_errors == []
    assert len(acked) == 4000 and len(seen) == 4000
    got = consume_from_start(cluster3.bootstrap, [(topic, i) for i in range(3)], 4000, 60)
    assert sorted(int(m.value()) for m in got) == list(range(4000))  # exactly once
    wait_all_in_sync(cluster3, topic)
