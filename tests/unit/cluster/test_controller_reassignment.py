"""Partition reassignment (KIP-455): AlterPartitionReassignments, ListPartitionReassignments, the legacy
/admin/reassign_partitions znode, completion on ISR expansion, cancellation and resumption after failover."""
from __future__ import annotations

from broker.errors import ErrorCode as E
from tests.unit.cluster.controller_harness import (LEADER_AND_ISR, STOP_REPLICA, Cluster, lai_for, run_async,
                                                   um_for)


def cluster(n: int = 4, **config) -> Cluster:
    c = Cluster(**config)
    for b in range(1, n + 1):
        c.add_broker(b, start_controller=(b == 1))
    c.ack_all()
    return c


def reassign(c: Cluster, *items: tuple[str, int, list[int] | None], ctl=None) -> dict:
    topics: dict[str, list] = {}
    for t, p, replicas in items:
        topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
    req = {"timeout_ms": 1000, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    ctl = ctl or c.controller
    return run_async(lambda: ctl.alter_partition_reassignments(req), c)


def errors(resp: dict) -> dict:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["responses"] for p in t["partitions"]}


def listing(c: Cluster, topics=None) -> dict:
    req = {"timeout_ms": 1000, "topics": topics}
    resp = run_async(lambda: c.controller.list_partition_reassignments(req), c)
    return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
            for t in resp["topics"] for p in t["partitions"]}


def expand_isr(c: Cluster, tp: tuple[str, int], isr: list[int]) -> None:
    """The leader adds caught-up replicas to the ISR through AlterPartition."""
    s = c.state(*tp)
    body = {"broker_id": s.leader, "broker_epoch": c.nodes[s.leader].epoch, "topics": [
        {"topic_id": c.topic_uuid(tp[0]), "partitions": [
            {"partition_index": tp[1], "leader_epoch": s.leader_epoch, "partition_epoch": s.zk_version,
             "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in isr]}]}]}
    resp = run_async(lambda: c.controller.alter_partition(body, 3), c)
    assert resp["topics"][0]["partitions"][0]["error_code"] == 0, resp


def test_reassignment_phases_and_completion() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    c.channel.clear()
    assert errors(reassign(c, ("t", 0, [4, 2, 3]))) == {("t", 0): 0}
    # U: RS = TRS + ORS with adding/removing recorded in the topic znode
    a = c.admin.get_topic_assignments(["t"])["t"]
    assert a.partitions == {0: [4, 2, 3, 1]} and a.adding_replicas == {0: [4]} and a.removing_replicas == {0: [1]}
    assert listing(c) == {("t", 0): ([4, 2, 3, 1], [4], [1])}
    # A: leader epoch bumped, LeaderAndIsr to every replica, the new one with is_new
    s = c.state("t", 0)
    assert s.leader == 1 and s.leader_epoch == 1 and s.isr == [1, 2, 3]
    new = lai_for(c.channel, 4, ("t", 0))
    assert new[-1]["is_new"] is True and new[-1]["adding_replicas"] == [4] and new[-1]["removing_replicas"] == [1]
    assert lai_for(c.channel, 1, ("t", 0))[-1]["replicas"] == [4, 2, 3, 1]
    c.ack_all()
    c.channel.clear()
    # B: once the new replica is in the ISR the reassignment completes
    expand_isr(c, ("t", 0), [1, 2, 3, 4])
    s = c.state("t", 0)
    assert s.leader == 4 and 1 not in s.isr and sorted(s.isr) == [2, 3, 4]  # leader moved into TRS
    a = c.admin.get_topic_assignments(["t"])["t"]
    assert a.partitions == {0: [4, 2, 3]} and a.adding_replicas == {} and a.removing_replicas == {}
    stops = c.channel.requests(1, STOP_REPLICA)
    assert any(r.stop_partitions()[("t", 0)]["delete_partition"] for r in stops)
    assert um_for(c.channel, 2, ("t", 0))[-1]["replicas"] == [4, 2, 3]
    assert listing(c) == {}
    assert ("t", 0) not in c.controller.ctx.partitions_being_reassigned


def test_reassignment_already_in_sync_completes_at_once() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    assert errors(reassign(c, ("t", 0, [3, 2]))) == {("t", 0): 0}
    a = c.admin.get_topic_assignments(["t"])["t"]
    assert a.partitions == {0: [3, 2]} and not a.removing_replicas
    s = c.state("t", 0)
    assert s.leader == 3 and sorted(s.isr) == [2, 3]


def test_cancel_reassignment_restores_the_original_replicas() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    reassign(c, ("t", 0, [3, 4]))
    c.ack_all()
    c.channel.clear()
    assert errors(reassign(c, ("t", 0, None))) == {("t", 0): 0}
    a = c.admin.get_topic_assignments(["t"])["t"]
    assert a.partitions == {0: [1, 2]} and not a.adding_replicas and not a.removing_replicas
    # the replicas that were being added are stopped and deleted
    for b in (3, 4):
        assert any(r.stop_partitions()[("t", 0)]["delete_partition"] for r in c.channel.requests(b, STOP_REPLICA))
    assert listing(c) == {}
    assert c.state("t", 0).leader == 1


def test_reassignment_errors() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    resp = reassign(c, ("t", 0, None), ("t", 1, [1]), ("t", 0, [1, 1]))
    assert errors(resp) == {("t", 0): E.INVALID_REPLICA_ASSIGNMENT, ("t", 1): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert errors(reassign(c, ("t", 0, None))) == {("t", 0): E.NO_REASSIGNMENT_IN_PROGRESS}
    assert errors(reassign(c, ("t", 0, [1, 9]))) == {("t", 0): E.INVALID_REPLICA_ASSIGNMENT}
    assert errors(reassign(c, ("t", 0, []))) == {("t", 0): E.INVALID_REPLICA_ASSIGNMENT}
    assert errors(reassign(c, ("t", 0, [-1]))) == {("t", 0): E.INVALID_REPLICA_ASSIGNMENT}
    c.start_controller(2)
    assert reassign(c, ("t", 0, [2]), ctl=c.nodes[2].controller)["error_code"] == E.NOT_CONTROLLER


def test_list_selected_partitions() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [1, 2], 1: [2, 3]})
    c.ack_all()
    reassign(c, ("t", 0, [3, 4]), ("t", 1, [4, 1]))
    assert set(listing(c, [{"name": "t", "partition_indexes": [1, 5]}])) == {("t", 1)}
    assert set(listing(c)) == {("t", 0), ("t", 1)}


def test_legacy_reassign_partitions_znode() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    c.admin.create_partition_reassignment({("t", 0): [3, 2], ("nope", 0): [1]})
    c.run()
    # the unknown partition is dropped from the znode; the known one is in progress
    assert c.admin.get_partition_reassignment() == {("t", 0): [3, 2]}
    assert listing(c) == {("t", 0): ([3, 2, 1], [3], [1])}
    c.ack_all()
    expand_isr(c, ("t", 0), [1, 2, 3])
    assert c.admin.get_topic_assignments(["t"])["t"].partitions == {0: [3, 2]}
    assert c.admin.get_partition_reassignment() is None  # drained and deleted when the last one completed


def test_api_reassignment_supersedes_the_zk_one() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    c.admin.create_partition_reassignment({("t", 0): [3, 2]})
    c.run()
    reassign(c, ("t", 0, [4, 2]))
    assert c.admin.get_partition_reassignment() is None
    assert listing(c) == {("t", 0): ([4, 2, 1], [4], [1])}


def test_reassignment_resumes_after_controller_failover() -> None:
    c = Cluster()
    for b in (1, 2, 3, 4):
        c.add_broker(b)
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    reassign(c, ("t", 0, [3, 4]))
    c.ack_all()
    c.kill_broker(1)  # the controller (and an original replica) dies mid-reassignment
    ctl = c.controller
    assert ("t", 0) in ctl.ctx.partitions_being_reassigned
    assert c.state("t", 0).leader == 2
    c.ack_all()
    expand_isr(c, ("t", 0), [2, 3, 4])
    s = c.state("t", 0)
    assert s.leader == 3 and sorted(s.isr) == [3, 4]
    assert c.admin.get_topic_assignments(["t"])["t"].partitions == {0: [3, 4]}


def test_deletion_waits_for_a_reassignment() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    reassign(c, ("t", 0, [3, 2]))
    c.ack_all()
    c.admin.mark_topic_for_deletion("t")
    c.run()
    c.ack_all()
    assert c.admin.get_topic("t") is not None and "t" in c.controller.ctx.topics_ineligible_for_deletion
    expand_isr(c, ("t", 0), [1, 2, 3])
    c.ack_all()
    assert c.admin.get_topic("t") is None


def test_reassignment_completion_at_old_ibp_via_state_watch() -> None:
    c = cluster(3, inter_broker_protocol_version="2.6")
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    reassign(c, ("t", 0, [3, 2]))
    c.ack_all()
    assert c.state("t", 0).isr == [1, 2]
    c.write_state("t", 0, isr=[1, 2, 3])  # the leader expanded the ISR itself (no AlterPartition)
    c.run()
    assert c.admin.get_topic_assignments(["t"])["t"].partitions == {0: [3, 2]}
    assert c.state("t", 0).leader == 3
    assert lai_for(c.channel, 3, ("t", 0))
    assert c.channel.requests(api=LEADER_AND_ISR)


def test_completion_of_many_partitions_reads_their_states_once() -> None:
    """One AlterPartition expanding the ISR of many reassigned partitions: one read of each state (a read of every
    state per partition made a 1,000-partition reassignment wait 12 s per leader at 111,000 ZooKeeper reads)."""
    c = cluster(4)
    n = 30
    c.create_topic("t", {p: [1, 2, 3] for p in range(n)})
    c.ack_all()
    assert errors(reassign(c, *[("t", p, [4, 2, 3]) for p in range(n)])) == {("t", p): 0 for p in range(n)}
    c.ack_all()
    zk = c.controller.reassignment.zk
    reads: list[int] = []
    original = zk.get_partition_states

    def counting(partitions):  # type: ignore[no-untyped-def]
        reads.append(len(list(partitions)))
        return original(partitions)

    zk.get_partition_states = counting
    try:
        body = {"broker_id": 1, "broker_epoch": c.nodes[1].epoch, "topics": [{"topic_id": c.topic_uuid("t"), "partitions": [
            {"partition_index": p, "leader_epoch": c.state("t", p).leader_epoch,
             "partition_epoch": c.state("t", p).zk_version,
             "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in (1, 2, 3, 4)]}
            for p in range(n)]}]}
        resp = run_async(lambda: c.controller.alter_partition(body, 3), c)
    finally:
        zk.get_partition_states = original
    assert all(p["error_code"] == 0 for p in resp["topics"][0]["partitions"]), resp
    assert all(c.state("t", p).leader == 4 for p in range(n))
    assert ("t", 0) not in c.controller.ctx.partitions_being_reassigned
    assert sum(reads) <= 3 * n, reads
