"""The controller at scale, as Kafka batches: one LeaderAndIsr and one UpdateMetadata per broker per state change
however many partitions it covers, ZooKeeper writes pipelined within zookeeper.max.in.flight.requests (each state
znode a two-op multi guarded by /controller_epoch), and a reassignment of many partitions done a phase at a time."""
from __future__ import annotations

import pytest

from broker.zk.client import KafkaZkClient
from tests.unit.cluster.controller_harness import LEADER_AND_ISR, UPDATE_METADATA, Cluster, run_async
from tests.unit.zk.recording_kazoo import InFlightRecorder


class RecordingCluster(Cluster):
    """The harness with every broker's ZooKeeper client recorded (and a chosen max in flight)."""

    def __init__(self, max_in_flight: int = 10, **config) -> None:
        self.max_in_flight = max_in_flight
        self.recorders: list[InFlightRecorder] = []
        super().__init__(**config)

    def _client(self) -> KafkaZkClient:
        rec = InFlightRecorder(self.fake.client())
        self.recorders.append(rec)
        c = KafkaZkClient("fake:2181", kazoo_client=rec, max_in_flight_requests=self.max_in_flight)
        c.run_in_background = lambda fn: fn()
        c.start()
        return c

    def recorder(self, broker_id: int) -> InFlightRecorder:
        return self.nodes[broker_id].zk.kazoo  # type: ignore[return-value]


def cluster(brokers: int = 3, max_in_flight: int = 10) -> RecordingCluster:
    c = RecordingCluster(max_in_flight)
    for b in range(1, brokers + 1):
        c.add_broker(b, start_controller=(b == 1))
    c.ack_all()
    return c


def rf3(partitions: int, brokers: int = 3) -> dict[int, list[int]]:
    return {p: [1 + (p + i) % brokers for i in range(3)] for p in range(partitions)}


@pytest.mark.parametrize("max_in_flight", [10, 3])
def test_creating_1000_partitions_is_one_request_of_each_kind_per_broker(max_in_flight: int) -> None:
    c = cluster(3, max_in_flight)
    c.channel.clear()
    rec = c.recorder(1)
    rec.reset()
    c.create_topic("big", rf3(1000))
    for b in (1, 2, 3):
        lai = c.channel.requests(b, LEADER_AND_ISR)
        um = c.channel.requests(b, UPDATE_METADATA)
        assert len(lai) == 1 and len(um) == 1, (b, len(lai), len(um))
        assert len(lai[0].partition_states()) == 1000
        assert len(um[0].partition_states()) == 1000
    # the states went to ZooKeeper pipelined, never more than zookeeper.max.in.flight.requests unanswered
    state_writes = [ops for ops in rec.multis if len(ops) == 2 and ops[1][1].endswith("/state")]
    assert len(state_writes) == 1000
    assert all(ops[0] == ("check", "/controller_epoch", c.controller.ctx.epoch_zk_version) for ops in state_writes)
    assert rec.max_in_flight == max_in_flight
    assert all(c.state("big", p) is not None and c.state("big", p).leader == rf3(1000)[p][0] for p in (0, 500, 999))
    c.ack_all()


def test_failover_reads_every_state_within_the_limit_and_sends_one_batch_per_broker() -> None:
    c = cluster(3, max_in_flight=4)
    c.create_topic("a", rf3(600))
    c.create_topic("b", rf3(400))
    c.ack_all()
    c.start_controller(2)  # a standby that takes over once broker 1 is gone
    c.kill_broker(1)
    c.ack_all()
    ctl = c.controller
    assert ctl.config.broker_id == 2 and len(ctl.ctx.leadership) == 1000
    assert c.recorder(2).max_in_flight <= 4
    for b in (2, 3):
        lai = c.channel.requests(b, LEADER_AND_ISR)
        # as Kafka's onControllerFailover with broker 1 gone: the replica state machine's start-up (every
        # partition online, then broker 1's replicas offline: out of the ISRs), then the partition state machine's
        # (leaders for what broker 1 led), each one batch
        assert [len(r.partition_states()) for r in lai] == [1000, 1000, 334], [len(r.partition_states()) for r in lai]
    assert all(c.state("a", p).leader in (2, 3) for p in range(0, 600, 3))


def reassign(c: Cluster, targets: dict[tuple[str, int], list[int]]) -> dict:
    topics: dict[str, list] = {}
    for (t, p), replicas in targets.items():
        topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
    req = {"timeout_ms": 1000, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    return run_async(lambda: c.controller.alter_partition_reassignments(req), c)


def expand_isr_all(c: Cluster, tps: list[tuple[str, int]], isr_of) -> dict:
    """Each leader adds its caught-up replicas with one AlterPartition for all its partitions."""
    by_leader: dict[int, list] = {}
    for tp in tps:
        s = c.state(*tp)
        by_leader.setdefault(s.leader, []).append((tp, s))
    for leader, items in by_leader.items():
        topics: dict[str, list] = {}
        for tp, s in items:
            topics.setdefault(tp[0], []).append({
                "partition_index": tp[1], "leader_epoch": s.leader_epoch, "partition_epoch": s.zk_version,
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in isr_of(tp)]})
        body = {"broker_id": leader, "broker_epoch": c.nodes[leader].epoch,
                "topics": [{"topic_id": c.topic_uuid(t), "partitions": ps} for t, ps in topics.items()]}
        resp = run_async(lambda body=body: c.controller.alter_partition(body, 3), c)
        assert all(p["error_code"] == 0 for t in resp["topics"] for p in t["partitions"]), resp
    return by_leader


def topic_writes(rec: InFlightRecorder, topic: str) -> int:
    return sum(1 for ops in rec.multis for op in ops if op[0] == "set" and op[1] == f"/brokers/topics/{topic}")


def test_reassigning_many_partitions_writes_each_topic_znode_once_per_phase() -> None:
    c = cluster(4)
    c.create_topic("x", {p: [1, 2] for p in range(150)})
    c.create_topic("y", {p: [2, 1] for p in range(150)})
    c.ack_all()
    rec = c.recorder(1)
    rec.reset()
    c.channel.clear()
    targets = {(t, p): [3, 4] for t in ("x", "y") for p in range(150)}
    resp = reassign(c, targets)
    assert all(p["error_code"] == 0 for t in resp["responses"] for p in t["partitions"])
    # phase U: RS = TRS + ORS for every partition, one topic znode write per topic
    assert topic_writes(rec, "x") == 1 and topic_writes(rec, "y") == 1
    a = c.admin.get_topic_assignments(["x"])["x"]
    assert a.partitions[7] == [3, 4, 1, 2] and a.adding_replicas[7] == [3, 4] and a.removing_replicas[7] == [1, 2]
    # phase A, one batch per step for all 300 partitions: the epoch bump's LeaderAndIsr to every replica (the new
    # ones marked is_new), then the new replicas' NewReplica transition (a second one to them, as Kafka sends)
    for b, batches in ((1, 1), (2, 1), (3, 2), (4, 2)):
        lai = c.channel.requests(b, LEADER_AND_ISR)
        assert [len(r.partition_states()) for r in lai] == [300] * batches, (b, [len(r.partition_states()) for r in lai])
    assert all(ps["is_new"] for r in c.channel.requests(3, LEADER_AND_ISR) for ps in r.partition_states().values())
    assert rec.max_in_flight <= 10
    c.ack_all()
    rec.reset()
    c.channel.clear()
    # the new replicas catch up: the leaders' AlterPartition completes every reassignment (phase B)
    expand_isr_all(c, sorted(targets), lambda tp: [1, 2, 3, 4])
    c.ack_all()
    assert topic_writes(rec, "x") == 1 and topic_writes(rec, "y") == 1
    for t in ("x", "y"):
        a = c.admin.get_topic_assignments([t])[t]
        assert all(r == [3, 4] for r in a.partitions.values()) and not a.adding_replicas and not a.removing_replicas
    s = c.state("x", 7)
    assert s.leader == 3 and sorted(s.isr) == [3, 4]
    assert not c.controller.ctx.partitions_being_reassigned


def test_a_stale_copy_costs_one_conflict_then_the_election_uses_zookeepers_isr() -> None:
    """Elections start from the controller's copy of the states (no read); the znode version is the fence."""
    c = cluster(3)
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    c.write_state("t", 0, isr=[1, 3])  # behind the controller's back: its copy still says [1, 2, 3]
    rec = c.recorder(1)
    rec.reset()
    # a controlled shutdown of the leader moves leadership: the first try from the copy (2, not in the real ISR)
    # is refused by the version check, the re-read gives ISR [1, 3] and 3 becomes leader
    code, remaining = run_async(lambda: c.controller.controlled_shutdown(1, c.nodes[1].epoch), c)
    assert code == 0
    s = c.state("t", 0)
    assert s.leader == 3 and s.isr == [3], s
    writes = [ops for ops in rec.multis if any(op[0] == "set" and op[1] == "/brokers/topics/t/partitions/0/state"
                                               for op in ops)]
    assert len(writes) == 2  # the refused one, then the one from ZooKeeper's state
