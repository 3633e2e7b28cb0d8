"""Topic creation, partition addition and topic deletion driven by the controller."""
from __future__ import annotations

import json

from broker.errors import ErrorCode
from broker.zk.paths import TopicAssignment, TopicZNode
from tests.unit.cluster.controller_harness import (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, Cluster,
                                                   brokers_of, lai_for, roundtrip_response, um_for)


def cluster(n: int = 3, **config) -> Cluster:
    c = Cluster(**config)
    for b in range(1, n + 1):
        c.add_broker(b, start_controller=(b == 1))
    c.ack_all()
    c.channel.clear()
    return c


def test_topic_creation_writes_states_and_tells_brokers() -> None:
    c = cluster()
    tid = c.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    for p, leader in ((0, 1), (1, 2)):
        s = c.state("t", p)
        assert (s.leader, s.leader_epoch, s.zk_version, s.controller_epoch) == (leader, 0, 0, 1)
    assert sorted(c.state("t", 0).isr) == [1, 2, 3]
    raw = json.loads(c.fake.data("/brokers/topics/t/partitions/0/state"))
    assert raw == {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, 2, 3]}
    ch = c.channel
    for b in (1, 2, 3):
        ps = lai_for(ch, b, ("t", 0))
        assert ps and ps[0]["is_new"] is True and ps[0]["replicas"] == [1, 2, 3] and ps[0]["partition_epoch"] == 0
        assert um_for(ch, b, ("t", 1))
    lai = ch.requests(2, LEADER_AND_ISR)[0]
    assert lai.message.topic_states[0].topic_id == c.topic_uuid("t")
    assert {ll.broker_id for ll in lai.message.live_leaders} == {1, 2}
    um = ch.requests(2, UPDATE_METADATA)[-1]
    assert {b.id for b in um.message.live_brokers} == {1, 2, 3}
    assert c.controller.ctx.topic_ids["t"] == tid


def test_creation_with_dead_replicas_and_with_none_alive() -> None:
    c = cluster()
    c.create_topic("t", {0: [4, 2, 3], 1: [4, 5]})
    s = c.state("t", 0)
    assert s.leader == 2 and s.isr == [2, 3]
    assert c.state("t", 1) is None  # no live replica: stays NewPartition, no state znode
    assert c.controller.ctx.partition_states[("t", 1)].value == "NewPartition"
    c.add_broker(5, start_controller=False)
    s1 = c.state("t", 1)
    assert s1.leader == 5 and s1.isr == [5] and s1.leader_epoch == 0


def test_partition_addition() -> None:
    c = cluster()
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    c.channel.clear()
    c.admin.add_partitions_assignment("t", {1: [2, 3], 2: [3, 1]})
    c.run()
    assert c.state("t", 1).leader == 2 and c.state("t", 2).leader == 3
    assert c.state("t", 0).leader_epoch == 0  # existing partitions untouched
    assert lai_for(c.channel, 3, ("t", 1))[0]["is_new"] is True
    assert not lai_for(c.channel, 1, ("t", 0))


def test_topic_without_id_gets_one() -> None:
    c = cluster()
    c.admin.kazoo.create(TopicZNode.path("legacy"), TopicZNode.encode(TopicAssignment(None, {0: [1]})))
    c.run()
    found = c.admin.get_topic("legacy")
    assert found is not None and found[0] and len(found[0]) == 22
    assert c.state("legacy", 0).leader == 1


def test_topic_deletion_full_flow() -> None:
    c = cluster()
    c.create_topic("t", {0: [1, 2], 1: [2, 3]})
    c.ack_all()
    c.channel.clear()
    c.admin.mark_topic_for_deletion("t")
    c.run()
    ch = c.channel
    # every broker learns the topic is being deleted: leader -2
    for b in (1, 2, 3):
        um = um_for(ch, b, ("t", 0))[-1]
        assert (um["leader"], um["leader_epoch"], um["zk_version"]) == (-2, 0, 0)
    stops = ch.pending(api=STOP_REPLICA)
    deletes = {(r.broker_id, tp): s["delete_partition"] for r in stops for tp, s in r.stop_partitions().items()}
    # StopReplica delete=false then delete=true to each replica (epoch -2 while deleting)
    assert deletes == {(1, ("t", 0)): True, (2, ("t", 0)): True, (2, ("t", 1)): True, (3, ("t", 1)): True}
    assert any(not s["delete_partition"] for r in stops for s in r.stop_partitions().values())
    assert all(s["leader_epoch"] == -2 for r in stops for s in r.stop_partitions().values())
    assert c.admin.get_topic("t") is not None  # not before every replica confirmed
    c.ack_all()
    assert c.admin.get_topic("t") is None and c.admin.topics_marked_for_deletion() == set()
    assert "t" not in c.controller.ctx.all_topics
    assert not [p for p in c.fake.dump() if "/t/" in p or p.endswith("/t")]


def test_deletion_waits_for_a_dead_replica_broker_and_resumes_when_it_returns() -> None:
    c = cluster()
    c.create_topic("t", {0: [1, 3]})
    c.ack_all()
    c.kill_broker(3)
    c.ack_all()
    c.admin.mark_topic_for_deletion("t")
    c.run()
    c.ack_all()
    ctx = c.controller.ctx
    assert "t" in ctx.topics_ineligible_for_deletion
    assert c.admin.get_topic("t") is not None
    # its replica could not be deleted (Kafka then parks it Offline again, waiting for a retry)
    assert ctx.replica_states[(("t", 0), 3)].value in ("ReplicaDeletionIneligible", "OfflineReplica")
    assert ctx.replica_states[(("t", 0), 1)].value == "ReplicaDeletionSuccessful"
    c.add_broker(3, start_controller=False)
    stops = c.channel.pending(3, STOP_REPLICA)
    assert stops and any(s["delete_partition"] for r in stops for s in r.stop_partitions().values())
    c.ack_all()
    assert c.admin.get_topic("t") is None


def test_failed_stop_replica_is_retried() -> None:
    c = cluster()
    c.create_topic("t", {0: [2]})
    c.ack_all()
    c.admin.mark_topic_for_deletion("t")
    c.run()
    ch = c.channel
    for r in ch.pending(2, STOP_REPLICA):
        if any(s["delete_partition"] for s in r.stop_partitions().values()):
            ch.respond(r, roundtrip_response(STOP_REPLICA, 4, {"error_code": 0, "partition_errors": [
                {"topic_name": "t", "partition_index": 0, "error_code": int(ErrorCode.KAFKA_STORAGE_ERROR)}]}))
        else:
            ch.respond(r)
    c.run()
    assert c.admin.get_topic("t") is not None
    assert "t" in c.controller.ctx.topics_ineligible_for_deletion
    # deletion is retried when resumed (e.g. the broker restarts)
    c.controller.topic_deletion.resume_deletion_for_topics({"t"})
    c.ack_all()
    assert c.admin.get_topic("t") is None


def test_deletion_disabled_removes_the_request() -> None:
    c = Cluster(delete_topic_enable=False)
    c.add_broker(1)
    c.create_topic("t", {0: [1]})
    c.admin.mark_topic_for_deletion("t")
    c.run()
    assert c.admin.topics_marked_for_deletion() == set() and c.admin.get_topic("t") is not None


def test_deleting_a_missing_topic_just_drops_the_marker() -> None:
    c = cluster()
    c.admin.mark_topic_for_deletion("ghost")
    c.run()
    assert c.admin.topics_marked_for_deletion() == set()


def test_partitions_added_while_deleting_are_reverted() -> None:
    c = cluster()
    c.create_topic("t", {0: [2]})
    c.ack_all()
    c.admin.mark_topic_for_deletion("t")
    c.run()  # deletion started, StopReplica unanswered
    c.admin.add_partitions_assignment("t", {1: [3]})
    c.run()
    assert c.admin.get_topic("t")[1] == {0: [2]}
    assert c.state_path_exists("t", 1) is False
    c.ack_all()
    assert c.admin.get_topic("t") is None


def test_auto_created_topic_again_after_deletion() -> None:
    c = cluster()
    c.create_topic("t", {0: [1]})
    c.ack_all()
    c.admin.mark_topic_for_deletion("t")
    c.run()
    c.ack_all()
    assert c.admin.get_topic("t") is None
    c.create_topic("t", {0: [2]})
    assert c.state("t", 0).leader == 2
    assert brokers_of(c.channel.pending(api=LEADER_AND_ISR)) == {2}


def test_states_written_by_the_old_admin_path_are_adopted() -> None:
    c = cluster()
    c.admin.create_topic("old", {0: [2, 3]}, live_brokers={1, 2, 3})  # writes the state znodes itself
    c.run()
    s = c.state("old", 0)
    assert (s.leader, s.leader_epoch, s.zk_version) == (2, 0, 0)
    assert c.controller.ctx.partition_states[("old", 0)].value == "OnlinePartition"
    assert lai_for(c.channel, 3, ("old", 0))[0]["is_new"] is True
