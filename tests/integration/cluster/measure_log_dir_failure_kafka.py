"""One-off measurement (not collected by pytest): the scenarios of test_log_dir_failure_cluster.py run against three
Apache Kafka 3.9.1 brokers (``kafka.Kafka`` from the cached Maven jars, as tests/harness/mixed_cluster.py runs
them), same settings, same assertions, to compare the times with ours:

    sudo .venv/bin/python -m tests.integration.cluster.measure_log_dir_failure_kafka [--runs N]

Needs root (it mounts a tmpfs), java and ``.cache/kafka-3.9.1/libs`` (scripts/install.sh).
"""
from __future__ import annotations

import argparse
import tempfile
import uuid
from pathlib import Path
from typing import Dict, List, Optional

from confluent_kafka.admin import AdminClient

from tests.harness.mixed_cluster import COMMON, KafkaNode
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.cluster.conftest import FAST, wait_for
from tests.integration.cluster.test_log_dir_failure_cluster import run_scenario
from tools.cluster import free_port


class KafkaCluster:
    """Three Kafka 3.9.1 brokers with the interface run_scenario uses of LocalCluster."""

    def __init__(self, workdir: Path, zk_connect: str, n: int,
                 broker_overrides: Optional[Dict[int, Dict[str, str]]] = None) -> None:
        props = dict(COMMON)
        props.update(FAST)
        self.brokers: List[KafkaNode] = [
            KafkaNode(workdir, zk_connect, i, port=free_port(), overrides={**props, **(broker_overrides or {}).get(i, {})})
            for i in range(n)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, broker_id: int) -> KafkaNode:
        return self.brokers[broker_id]

    def start(self) -> "KafkaCluster":
        for b in self.brokers:
            b.start(wait=False)
        for b in self.brokers:
            b.wait_started(120)
        # Kafka logs "started" before the controller's first UpdateMetadata: wait until every broker knows them all
        ids = {b.broker_id for b in self.brokers}
        for b in self.brokers:
            def knows_all(b: KafkaNode = b) -> bool:
                md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=5)
                return md.controller_id >= 0 and set(md.brokers) == ids
            wait_for(knows_all, 60, f"Kafka {b.broker_id}'s metadata to list every broker and the controller")
        return self

    def kill(self) -> None:
        for b in self.brokers:
            b.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    zk = ZooKeeperServer()
    zk.start()
    results: Dict[str, List[Dict[str, float]]] = {"one of two dirs": [], "only dir": []}
    try:
        for run in range(args.runs):
            for only_dir in (False, True):
                with tempfile.TemporaryDirectory(prefix="ldf-kafka-") as d:
                    def make(n: int, broker_overrides: Optional[Dict[int, Dict[str, str]]] = None,
                             start: bool = True, d: str = d) -> KafkaCluster:
                        c = KafkaCluster(Path(d) / "cluster", f"{zk.connect_string}/k-{uuid.uuid4().hex[:8]}", n,
                                         broker_overrides)
                        return c.start() if start else c
                    times = run_scenario(make, Path(d), only_dir, kafka=True)
                    results["only dir" if only_dir else "one of two dirs"].append(times)
    finally:
        zk.stop()
    for name, runs in results.items():
        for t in runs:
            print(f"Kafka 3.9.1, {name}: " + ", ".join(f"{k} {v:.2f}s" for k, v in t.items()))


if __name__ == "__main__":
    main()
