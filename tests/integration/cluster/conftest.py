"""Fixtures for multi-broker tests: real broker processes from ``bin/`` (via tools/cluster.py, the code behind
``bin/kafka-cluster.sh``) on the shared real ZooKeeper, each cluster in its own chroot.

``new_cluster(n, **overrides)`` starts a cluster and, at the end of the test, stops it and checks that no broker
logged a traceback; ``ClusterView`` reads leaders/ISR through a stock client (confluent-kafka's AdminClient).
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.waiting import wait_for  # noqa: F401  (re-exported for the tests)
from tools.cluster import LocalCluster

#: Settings that make failures quick to detect in tests (Kafka's defaults are minutes, not seconds).
FAST = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "4000",
        "controlled.shutdown.retry.backoff.ms": "500", "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "6"}


@pytest.fixture
def new_cluster(tmp_path: Path, zookeeper: str) -> Iterator[Callable[..., LocalCluster]]:
    made: List[LocalCluster] = []

    def make(num_brokers: int = 3, overrides: Optional[Dict[str, str]] = None,
             broker_overrides: Optional[Dict[int, Dict[str, str]]] = None, start: bool = True) -> LocalCluster:
        props = dict(FAST)
        props.update(overrides or {})
        c = LocalCluster(tmp_path / f"cluster-{len(made)}", num_brokers,
                         zk_connect=f"{zookeeper}/c-{uuid.uuid4().hex[:10]}", overrides=props,
                         broker_overrides=broker_overrides)
        made.append(c)
        if start:
            c.start()
        return c

    yield make
    for c in made:
        c.kill()
    for c in made:
        for b in c.brokers:
            out = b.output()
            assert "Traceback" not in out, f"broker {b.broker_id} logged a traceback:\n{out[-6000:]}"


class ClusterView:
    """Leaders, replicas and ISRs as a stock client sees them (Metadata through confluent-kafka)."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, config: Optional[Dict[str, str]] = None,
                     timeout_s: float = 30.0) -> None:
        f = self.admin.create_topics([NewTopic(name, partitions, rf, config=config or {})],
                                     operation_timeout=timeout_s)
        f[name].result(timeout_s + 5)

    def partitions(self, topic: str) -> Dict[int, Tuple[int, List[int], List[int]]]:
        """partition -> (leader, replicas, isr)."""
        md = self.admin.list_topics(topic, timeout=10)
        t = md.topics[topic]
        if t.error is not None:
            raise RuntimeError(str(t.error))
        return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}

    def controller(self) -> int:
        return int(self.admin.list_topics(timeout=10).controller_id)
