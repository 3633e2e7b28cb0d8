"""Acknowledged offset commits survive kill -9 of the coordinator's broker (3 real brokers, real ZooKeeper).

Several committers write offsets to groups whose ``__consumer_offsets`` partitions the victim leads, each in a
tight loop (one OffsetCommit in flight, the next sent as soon as the previous one is answered, every offset one
more than the last), so that commits are being appended, replicated and answered at the moment of the kill.
Each committer stops at its first commit that is not acknowledged (the one in flight at the kill, usually).
The new coordinator must then answer, for every partition, the last acknowledged offset, or the offset of that
one unacknowledged commit (its answer died with the broker, but its record may have reached the new leader
before: Kafka's semantics too) -- never anything lower.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from tests.harness.cluster_ops import ApiKey, RawClient, all_brokers_agree, call, controller_id
from tests.integration.cluster.conftest import FAST, wait_for

OFFSETS = "__consumer_offsets"
TOPIC = "committed"
TOPIC_PARTITIONS = 3
#: followers stay in the ISR under a loaded machine (a shrink to the leader alone would leave the partition
#: without an eligible leader after the kill, as with Kafka); commits wait up to 5 s for replication (default)
OVERRIDES = {"replica.lag.time.max.ms": "30000", "auto.leader.rebalance.enable": "false"}
GROUPS = 6  # committers, one group each
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


class Committer(threading.Thread):
    """Commits offsets 1, 2, 3, ... of every partition of TOPIC for ``group`` (simple consumer: generation -1)."""

    def __init__(self, bootstrap: str, group: str, stop: threading.Event) -> None:
        super().__init__(name=f"committer-{group}", daemon=True)
        self.bootstrap, self.group, self.stop_event = bootstrap, group, stop
        self.acked = -1             # the last offset acknowledged with error 0 on every partition
        self.unacknowledged: Optional[int] = None   # the offset of the commit that was not
        self.outcome = ""
        self.commits = 0

    def run(self) -> None:
        offset = 0
        try:
            client = RawClient(self.bootstrap, timeout_s=30.0)
        except OSError as exc:
            self.outcome = f"connect: {exc!r}"
            return
        with client:
            while not self.stop_event.is_set():
                offset += 1
                try:
                    r = client.request(ApiKey.OFFSET_COMMIT, 8, {
                        "group_id": self.group, "generation_id_or_member_epoch": -1, "member_id": "",
                        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                            {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
                             "committed_metadata": ""} for p in range(TOPIC_PARTITIONS)]}]})
                except Exception as exc:  # the broker died with the request in flight (or before it was sent)
                    self.unacknowledged, self.outcome = offset, f"no answer: {exc!r}"
                    return
                codes = {p.error_code for t in r.topics for p in t.partitions}
                if self.acked < 0 and codes and codes <= RETRIABLE:  # not started yet: the coordinator loads
                    offset -= 1
                    time.sleep(0.1)
                    continue
                if codes != {0}:
                    self.unacknowledged, self.outcome = offset, f"error {sorted(codes)}"
                    return
                self.acked = offset
                self.commits += 1
        self.outcome = "stopped"


def _fetch(broker: Any, group: str) -> Optional[Dict[int, int]]:
    """partition -> committed offset from ``broker`` as coordinator; None while it cannot answer yet."""
    r = call(broker, ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
        {"name": TOPIC, "partition_indexes": list(range(TOPIC_PARTITIONS))}]}], "require_stable": False},
        timeout_s=10.0)
    g = r.groups[0]
    codes = {g.error_code} | {p.error_code for t in g.topics for p in t.partitions}
    if codes - {0}:
        assert codes - {0} <= RETRIABLE, codes
        return None
    return {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


def _coordinator(cluster: Any, group: str, exclude: int = -1) -> Optional[int]:
    for b in cluster.brokers:
        if b.broker_id == exclude or not b.is_alive():
            continue
        c = call(b, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        return c.node_id if c.error_code == 0 and c.node_id != exclude else None
    return None


def test_acknowledged_commits_survive_killing_the_coordinator(new_cluster: Any) -> None:
    cluster = new_cluster(3, OVERRIDES)
    brokers = {b.broker_id: b for b in cluster.brokers}
    first_ctrl = brokers[wait_for(lambda: (lambda c: (c,) if c >= 0 else None)(controller_id(cluster)), 30,
                                  "a controller")[0]]
    r = call(first_ctrl, ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": TOPIC, "num_partitions": TOPIC_PARTITIONS, "replication_factor": 1, "assignments": [],
         "configs": []}], "timeout_ms": 30000, "validate_only": False})
    assert r.topics[0].error_code == 0, r
    wait_for(lambda: _coordinator(cluster, "warm-up") is not None, 60, "__consumer_offsets")  # creates it
    n_offsets = int(FAST["offsets.topic.num.partitions"])
    wait_for(lambda: all_brokers_agree(cluster, OFFSETS, lambda p: len(p) == n_offsets and all(
        len(x.isr) == 3 for x in p.values())) and all_brokers_agree(
        cluster, TOPIC, lambda p: len(p) == TOPIC_PARTITIONS and all(x.leader >= 0 for x in p.values())),
        60, "__consumer_offsets in sync and the topic led")

    # The victim: a broker that is not the controller; the committers' groups are those it coordinates.
    ctrl = controller_id(cluster)
    victim = next(i for i in sorted(brokers) if i != ctrl)
    r = call(brokers[victim], ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [
        f"tight-{i}" for i in range(60)]})
    groups = [c.key for c in r.coordinators if c.error_code == 0 and c.node_id == victim][:GROUPS]
    assert len(groups) == GROUPS, r
    stop = threading.Event()
    committers = [Committer(brokers[victim].bootstrap, g, stop) for g in groups]
    try:
        for c in committers:
            c.start()
        wait_for(lambda: all(c.commits >= 20 or not c.is_alive() for c in committers), 60, "the committers going",
                 detail=lambda: str([(c.group, c.commits, c.outcome) for c in committers]))
        time.sleep(0.5)
        brokers[victim].kill()
        for c in committers:
            c.join(40)
    finally:
        stop.set()
    report = [(c.group, c.acked, c.unacknowledged, c.commits, c.outcome) for c in committers]
    assert all(not c.is_alive() for c in committers), report
    assert all(c.unacknowledged is not None for c in committers), report  # each ended at the kill
    assert all(c.acked >= 1 for c in committers), report

    # Every group's new coordinator answers the last acknowledged offset or that of the commit in flight.
    found: Dict[str, Dict[int, int]] = {}

    def read_back() -> bool:
        for g in groups:
            if g in found:
                continue
            node = _coordinator(cluster, g, exclude=victim)
            if node is None:
                continue
            got = _fetch(brokers[node], g)
            if got is not None:
                found[g] = got
        return len(found) == len(groups)

    wait_for(read_back, 60, "every group served by a new coordinator", detail=lambda: f"{report} {found}")
    bad: List[Tuple[Any, ...]] = []
    for c in committers:
        for p in range(TOPIC_PARTITIONS):
            got = found[c.group][p]
            if got != c.acked and got != c.unacknowledged:
                bad.append((c.group, p, "acknowledged", c.acked, "in flight", c.unacknowledged, "read", got))
    applied = sum(1 for c in committers for p in range(TOPIC_PARTITIONS) if found[c.group][p] == c.unacknowledged)
    print(f"committers: {report}; partitions read back at the unacknowledged commit: {applied}")
    assert not bad, f"{bad}\ncommitters: {report}"
