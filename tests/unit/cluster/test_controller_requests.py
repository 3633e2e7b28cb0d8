"""Broker-to-controller requests: ControlledShutdown, AlterPartition, AllocateProducerIds, ElectLeaders,
UpdateFeatures; automatic preferred-leader rebalance; the IBP < 2.7 ISR-notification path."""
from __future__ import annotations

import uuid

import pytest

from broker.cluster.controller import events as ev
from broker.errors import ErrorCode as E
from tests.unit.cluster.controller_harness import (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, Cluster,
                                                   brokers_of, lai_for, roundtrip_request, run_async, um_for)

ALTER_PARTITION = 56


def cluster(n: int = 3, **config) -> Cluster:
    c = Cluster(**config)
    for b in range(1, n + 1):
        c.add_broker(b, start_controller=(b == 1))
    c.ack_all()
    c.channel.clear()
    return c


# ------------------------------------------------------------------------------------------- ControlledShutdown
def test_controlled_shutdown_moves_leaders_and_shrinks_isrs() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [2, 3, 4], 1: [3, 2], 2: [2], 3: [4, 3]})
    c.ack_all()
    c.channel.clear()
    code, remaining = run_async(lambda: c.controller.controlled_shutdown(2, c.nodes[2].epoch), c)
    assert code == 0
    # t-2 has RF 1: it stays on 2 but, as in Kafka, is not reported (nothing can move it)
    assert remaining == []
    s0, s1, s2 = c.state("t", 0), c.state("t", 1), c.state("t", 2)
    assert (s0.leader, s0.isr, s0.leader_epoch) == (3, [3, 4], 1)  # ControlledShutdownLeaderElection
    assert (s1.leader, s1.isr, s1.leader_epoch) == (3, [3], 1)    # follower removed from ISR
    assert (s2.leader, s2.leader_epoch) == (2, 0)
    assert c.state("t", 3).leader_epoch == 0
    stop = [r for r in c.channel.requests(2, STOP_REPLICA)]
    assert stop and not stop[0].stop_partitions()[("t", 1)]["delete_partition"]
    assert lai_for(c.channel, 3, ("t", 1))[-1]["isr"] == [3]
    assert 2 in c.controller.ctx.shutting_down_broker_ids
    # a broker shutting down is never chosen as leader nor kept in an ISR
    c.kill_broker(3)
    s0 = c.state("t", 0)
    assert s0.leader == 4 and 2 not in s0.isr


def test_controlled_shutdown_reports_partitions_it_must_keep() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2, 3]})
    c.ack_all()
    c.write_state("t", 0, isr=[2])  # no other ISR member: leadership cannot move
    code, remaining = run_async(lambda: c.controller.controlled_shutdown(2, -1), c)
    assert code == 0 and remaining == [("t", 0)]
    assert c.state("t", 0).leader == 2


def test_controlled_shutdown_errors() -> None:
    c = cluster(2)
    assert run_async(lambda: c.controller.controlled_shutdown(2, c.nodes[2].epoch - 1), c) == (
        E.STALE_BROKER_EPOCH, [])
    assert run_async(lambda: c.controller.controlled_shutdown(9, -1), c) == (E.BROKER_NOT_AVAILABLE, [])
    c.start_controller(2)
    assert run_async(lambda: c.nodes[2].controller.controlled_shutdown(2, -1), c) == (E.NOT_CONTROLLER, [])


# ------------------------------------------------------------------------------------------- AlterPartition
def alter(c: Cluster, broker: int, tp: tuple[str, int], isr: list[int], leader_epoch: int | None = None,
          partition_epoch: int | None = None, version: int = 3, epochs: dict[int, int] | None = None,
          recovery: int = 0, broker_epoch: int | None = None) -> dict:
    s = c.state(*tp)
    epochs = epochs or {}
    pdata = {"partition_index": tp[1], "leader_epoch": s.leader_epoch if leader_epoch is None else leader_epoch,
             "new_isr": isr, "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": epochs.get(b, -1)} for b in isr],
             "leader_recovery_state": recovery,
             "partition_epoch": s.zk_version if partition_epoch is None else partition_epoch}
    body = {"broker_id": broker, "broker_epoch": c.nodes[broker].epoch if broker_epoch is None else broker_epoch,
            "topics": [{"topic_name": tp[0], "topic_id": c.topic_uuid(tp[0]), "partitions": [pdata]}]}
    request = roundtrip_request(ALTER_PARTITION, version, body)
    return run_async(lambda: c.controller.alter_partition(request, version), c)


def part(resp: dict) -> dict:
    assert resp["error_code"] == 0, resp
    return resp["topics"][0]["partitions"][0]


@pytest.fixture
def shrunk() -> Cluster:
    c = cluster(3)
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    c.channel.clear()
    return c


def test_alter_partition_shrink_then_expand(shrunk: Cluster) -> None:
    c = shrunk
    p = part(alter(c, 1, ("t", 0), [1, 2]))
    assert p == {"partition_index": 0, "error_code": 0, "leader_id": 1, "leader_epoch": 0, "isr": [1, 2],
                 "leader_recovery_state": 0, "partition_epoch": 1}
    s = c.state("t", 0)
    assert s.isr == [1, 2] and s.leader_epoch == 0 and s.zk_version == 1  # only the partition epoch moves
    # UpdateMetadata only, to every broker; no LeaderAndIsr
    assert not c.channel.requests(api=LEADER_AND_ISR)
    assert brokers_of(c.channel.requests(api=UPDATE_METADATA)) == {1, 2, 3}
    assert um_for(c.channel, 3, ("t", 0))[-1]["zk_version"] == 1
    p = part(alter(c, 1, ("t", 0), [1, 2, 3], epochs={3: c.nodes[3].epoch}))
    assert p["isr"] == [1, 2, 3] and p["partition_epoch"] == 2


def test_alter_partition_rejections(shrunk: Cluster) -> None:
    c = shrunk
    tp = ("t", 0)
    assert part(alter(c, 1, tp, [1], leader_epoch=-1))["error_code"] == E.FENCED_LEADER_EPOCH
    assert part(alter(c, 1, tp, [1], leader_epoch=5))["error_code"] == E.NOT_CONTROLLER
    assert part(alter(c, 1, tp, [1], partition_epoch=9))["error_code"] == E.NOT_CONTROLLER
    assert part(alter(c, 2, tp, [1, 2]))["error_code"] == E.INVALID_REQUEST  # not the leader
    assert part(alter(c, 1, tp, [2, 3]))["error_code"] == E.INVALID_REQUEST  # ISR without the leader
    assert part(alter(c, 1, tp, [1, 7]))["error_code"] == E.INELIGIBLE_REPLICA  # not a replica (KIP-841)
    assert part(alter(c, 1, tp, [1, 2], recovery=1))["error_code"] == E.INVALID_REQUEST  # RECOVERED->RECOVERING
    part(alter(c, 1, tp, [1, 2]))
    assert part(alter(c, 1, tp, [1], partition_epoch=0))["error_code"] == E.INVALID_UPDATE_VERSION
    # the same change again (a retry after a lost response) is answered with the current state
    assert part(alter(c, 1, tp, [1, 2], partition_epoch=0))["partition_epoch"] == 1
    # stale broker epoch of a new ISR member (v3) / unknown replica / sender epoch
    assert part(alter(c, 1, tp, [1, 2, 3], epochs={3: 1}))["error_code"] == E.INELIGIBLE_REPLICA
    assert alter(c, 1, tp, [1], broker_epoch=1)["error_code"] == E.STALE_BROKER_EPOCH
    # unknown topic id (v2+)
    body = {"broker_id": 1, "broker_epoch": c.nodes[1].epoch, "topics": [
        {"topic_id": uuid.uuid4(), "partitions": [{"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0,
                                                  "new_isr_with_epochs": [{"broker_id": 1}]}]}]}
    resp = run_async(lambda: c.controller.alter_partition(body, 3), c)
    assert resp["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_ID


def test_alter_partition_ineligible_shutting_down_or_dead_member(shrunk: Cluster) -> None:
    c = shrunk
    part(alter(c, 1, ("t", 0), [1, 2]))
    c.kill_broker(3)
    assert part(alter(c, 1, ("t", 0), [1, 2, 3]))["error_code"] == E.INELIGIBLE_REPLICA
    assert part(alter(c, 1, ("t", 0), [1, 2, 3], version=1))["error_code"] == E.OPERATION_NOT_ATTEMPTED


def test_alter_partition_to_a_non_controller(shrunk: Cluster) -> None:
    c = shrunk
    c.start_controller(2)
    body = {"broker_id": 1, "broker_epoch": c.nodes[1].epoch, "topics": []}
    assert run_async(lambda: c.nodes[2].controller.alter_partition(body, 3), c)["error_code"] == E.NOT_CONTROLLER


def test_zombie_alter_partition_answers_not_controller_and_resigns(shrunk: Cluster) -> None:
    c = shrunk
    c.start_controller(2)
    zombie = c.nodes[1].controller
    c.nodes[1].controller = None  # it stalls
    c.fake.nodes["/controller"].owner = 0
    c.admin.kazoo.delete("/controller")
    c.run()
    assert c.controller.config.broker_id == 2
    c.nodes[1].controller = zombie
    zombie.active_controller_id = 1  # it has not noticed yet
    replies: list = []
    s = c.state("t", 0)
    body = {"broker_id": 1, "broker_epoch": c.nodes[1].epoch, "topics": [{"topic_id": c.topic_uuid("t"), "partitions": [
        {"partition_index": 0, "leader_epoch": s.leader_epoch, "partition_epoch": s.zk_version,
         "new_isr_with_epochs": [{"broker_id": 1}]}]}]}
    zombie.event_manager.put(ev.AlterPartitionReceived(body, 3, replies.append))
    zombie.event_manager.process_pending()
    assert replies[0]["error_code"] == E.NOT_CONTROLLER
    assert not zombie.is_active
    assert c.state("t", 0) == s


# ------------------------------------------------------------------------------------------- AllocateProducerIds
def test_allocate_producer_ids() -> None:
    c = cluster(2)
    r = run_async(lambda: c.controller.allocate_producer_ids(2, c.nodes[2].epoch), c)
    assert r == {"throttle_time_ms": 0, "error_code": 0, "producer_id_start": 0, "producer_id_len": 1000}
    r = run_async(lambda: c.controller.allocate_producer_ids(1, c.nodes[1].epoch), c)
    assert r["producer_id_start"] == 1000
    assert run_async(lambda: c.controller.allocate_producer_ids(2, 1), c)["error_code"] == E.STALE_BROKER_EPOCH
    assert run_async(lambda: c.controller.allocate_producer_ids(7, 1), c)["error_code"] == E.BROKER_ID_NOT_REGISTERED
    assert c.controller.allocate_producer_ids_enabled and c.controller.alter_partition_enabled


# ------------------------------------------------------------------------------------------- ElectLeaders
def test_preferred_leader_election() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    c.ack_all()
    c.kill_broker(2)
    c.add_broker(2, start_controller=False)
    c.ack_all()
    assert c.state("t", 1).leader == 3
    # 2 is not back in the ISR of t-1 yet: preferred leader not available
    r = run_async(lambda: c.controller.elect_leaders(0, [("t", 1), ("t", 0), ("nope", 0)], 1000), c)
    res = {(t["topic"], p["partition_id"]): p for t in r["replica_election_results"] for p in t["partition_result"]}
    assert res[("t", 1)]["error_code"] == E.PREFERRED_LEADER_NOT_AVAILABLE
    assert res[("t", 0)]["error_code"] == E.ELECTION_NOT_NEEDED
    assert res[("nope", 0)]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    c.write_state("t", 1, isr=[3, 2])  # the leader took 2 back into the ISR
    c.controller.ctx.leadership[("t", 1)] = c.state("t", 1)
    r = run_async(lambda: c.controller.elect_leaders(0, None, 1000), c)
    assert r["replica_election_results"] == [{"topic": "t", "partition_result": [
        {"partition_id": 1, "error_code": 0, "error_message": None}]}]
    s = c.state("t", 1)
    assert s.leader == 2 and s.isr == [3, 2]
    assert lai_for(c.channel, 2, ("t", 1))[-1]["leader"] == 2


def test_unclean_leader_election_via_admin() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2, 3]})
    c.ack_all()
    c.write_state("t", 0, isr=[2])
    c.kill_broker(2)
    r = run_async(lambda: c.controller.elect_leaders(1, [("t", 0)], 1000), c)
    assert r["replica_election_results"][0]["partition_result"][0]["error_code"] == 0
    s = c.state("t", 0)
    assert s.leader == 3 and s.isr == [3] and s.leader_recovery_state == 1
    r = run_async(lambda: c.controller.elect_leaders(1, [("t", 0)], 1000), c)
    assert r["replica_election_results"][0]["partition_result"][0]["error_code"] == E.ELECTION_NOT_NEEDED


def test_unclean_election_without_live_replicas_fails() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2]})
    c.ack_all()
    c.kill_broker(2)
    r = run_async(lambda: c.controller.elect_leaders(1, [("t", 0)], 1000), c)
    assert r["replica_election_results"][0]["partition_result"][0]["error_code"] == E.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_elect_leaders_on_a_non_controller() -> None:
    c = cluster(2)
    ctl2 = c.start_controller(2)
    r = run_async(lambda: ctl2.elect_leaders(0, [("t", 0)], 1000), c)
    assert r["replica_election_results"][0]["partition_result"][0]["error_code"] == E.NOT_CONTROLLER
    assert run_async(lambda: ctl2.elect_leaders(0, None, 1000), c)["error_code"] == E.NOT_CONTROLLER


def test_legacy_preferred_replica_election_znode() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    c.write_state("t", 0, leader=2, leader_epoch=3)
    c.controller.ctx.leadership[("t", 0)] = c.state("t", 0)
    c.admin.create_preferred_replica_election([("t", 0)])
    c.run()
    s = c.state("t", 0)
    assert s.leader == 1 and s.leader_epoch == 4
    assert c.admin.get_preferred_replica_election() is None


# ------------------------------------------------------------------------------------------- auto rebalance
def test_auto_leader_rebalance_moves_leadership_back() -> None:
    c = Cluster(leader_imbalance_check_interval_seconds=300, leader_imbalance_per_broker_percentage=10)
    for b in (1, 2, 3):
        c.add_broker(b, start_controller=(b == 1))
    c.create_topic("t", {0: [2, 3], 1: [3, 2]})
    c.ack_all()
    c.kill_broker(2)
    c.add_broker(2, start_controller=False)
    c.write_state("t", 0, isr=[3, 2])  # 2 caught up again
    c.controller.ctx.leadership[("t", 0)] = c.state("t", 0)
    assert c.state("t", 0).leader == 3
    c.advance(5000)  # first check 5 s after failover
    assert c.state("t", 0).leader == 2
    assert c.controller.event_manager.has_timer("auto-leader-rebalance-task")
    c.kill_broker(2)
    c.add_broker(2, start_controller=False)
    c.write_state("t", 0, isr=[3, 2])
    c.controller.ctx.leadership[("t", 0)] = c.state("t", 0)
    c.advance(299_000)
    assert c.state("t", 0).leader == 3
    c.advance(1000)  # leader.imbalance.check.interval.seconds later
    assert c.state("t", 0).leader == 2


def test_auto_rebalance_disabled() -> None:
    c = Cluster(auto_leader_rebalance_enable=False)
    c.add_broker(1)
    assert not c.controller.event_manager.has_timer("auto-leader-rebalance-task")


# ------------------------------------------------------------------------------------------- UpdateFeatures
def features_request(*updates: tuple[str, int, int], validate_only: bool = False) -> dict:
    return {"timeout_ms": 1000, "validate_only": validate_only, "feature_updates": [
        {"feature": f, "max_version_level": lvl, "upgrade_type": t} for f, lvl, t in updates]}


def test_update_features() -> None:
    supported = {"f": {"min_version": 1, "max_version": 3}}
    c = Cluster(supported_features={"f": (1, 3)})
    c.add_broker(1, features=supported)
    c.add_broker(2, features=supported, start_controller=False)
    ctl = c.controller
    r = run_async(lambda: ctl.update_features(features_request(("f", 2, 1)), 1), c)
    assert r["error_code"] == 0 and r["results"] == [{"feature": "f", "error_code": 0, "error_message": None}]
    assert c.admin.get_finalized_features() == (1, {"f": 2})
    r = run_async(lambda: ctl.update_features(features_request(("f", 4, 1), ("g", 1, 1), ("f", 1, 1)), 1), c)
    assert {x["feature"]: x["error_code"] for x in r["results"]} == {"f": E.INVALID_REQUEST, "g": E.INVALID_REQUEST}
    r = run_async(lambda: ctl.update_features(features_request(("f", 1, 2)), 1), c)  # SAFE_DOWNGRADE
    assert r["results"][0]["error_code"] == 0 and c.admin.get_finalized_features() == (1, {"f": 1})
    r = run_async(lambda: ctl.update_features(features_request(("f", 3, 1), validate_only=True), 1), c)
    assert r["results"][0]["error_code"] == 0 and c.admin.get_finalized_features() == (1, {"f": 1})
    r = run_async(lambda: ctl.update_features(features_request(("f", 0, 2)), 1), c)  # delete
    assert r["results"][0]["error_code"] == 0 and c.admin.get_finalized_features() == (1, {})
    # v0: allow_downgrade; a broker that does not support the level blocks it
    c.add_broker(3, features={"f": {"min_version": 1, "max_version": 1}}, start_controller=False)
    r = run_async(lambda: ctl.update_features({"feature_updates": [
        {"feature": "f", "max_version_level": 2, "allow_downgrade": False}]}, 0), c)
    assert r["results"][0]["error_code"] == E.INVALID_REQUEST
    assert "incompatible" in r["results"][0]["error_message"]


def test_update_features_errors() -> None:
    c = Cluster(inter_broker_protocol_version="2.6")
    c.add_broker(1)
    import json
    assert json.loads(c.fake.data("/feature"))["status"] == 0
    r = run_async(lambda: c.controller.update_features(features_request(("f", 1, 1)), 1), c)
    assert r["error_code"] == E.INVALID_REQUEST
    c.add_broker(2)
    r = run_async(lambda: c.nodes[2].controller.update_features(features_request(("f", 1, 1)), 1), c)
    assert r["error_code"] == E.NOT_CONTROLLER


# ------------------------------------------------------------------------------------------- IBP < 2.7
def test_isr_change_notifications_at_old_ibp() -> None:
    c = cluster(3, inter_broker_protocol_version="2.6")
    assert not c.controller.alter_partition_enabled and not c.controller.allocate_producer_ids_enabled
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    c.channel.clear()
    # at IBP < 2.7 the leader writes the shrunk ISR itself and announces it
    c.write_state("t", 0, isr=[1, 2])
    c.nodes[1].zk.propagate_isr_changes([("t", 0)])
    c.run()
    assert c.admin.get_isr_change_notifications() == []
    for b in (1, 2, 3):
        assert um_for(c.channel, b, ("t", 0))[-1]["isr"] == [1, 2]
    assert c.controller.ctx.leadership[("t", 0)].isr == [1, 2]
    # requests use the IBP's versions: UpdateMetadata v6 and StopReplica v3 at 2.6
    assert {r.version for r in c.channel.requests(api=UPDATE_METADATA)} == {6}


def test_old_ibp_request_versions_encode() -> None:
    c = cluster(2, inter_broker_protocol_version="2.1")
    c.create_topic("t", {0: [1, 2]})
    lai = c.channel.requests(api=LEADER_AND_ISR)
    assert lai and {r.version for r in lai} == {1}
    assert lai[0].message.ungrouped_partition_states[0].topic_name == "t"
    c.admin.mark_topic_for_deletion("t")
    c.ack_all()
    assert {r.version for r in c.channel.requests(api=STOP_REPLICA)} == {0}
    assert c.admin.get_topic("t") is None


def test_shutdown_answers_queued_requests_not_controller() -> None:
    c = cluster(2)
    ctl = c.controller
    replies: list = []
    ctl.event_manager.put(ev.AllocateProducerIds(2, c.nodes[2].epoch, replies.append))
    ctl.shutdown()
    assert replies[0]["error_code"] == E.NOT_CONTROLLER and not ctl.is_active
    ctl.event_manager.put(ev.ControlledShutdown(2, -1, lambda code, parts: replies.append(code)))
    assert replies[1] == E.NOT_CONTROLLER


def test_every_response_dict_encodes_at_every_version() -> None:
    """The dicts the controller returns are ready for the wire (the api handlers just encode them)."""
    from tests.unit.cluster.controller_harness import roundtrip_response
    c = cluster(3)
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    for v in (0, 1, 2, 3):
        s = c.state("t", 0)
        resp = alter(c, 1, ("t", 0), [1, 2] if v % 2 == 0 else [1, 2, 3], version=v)
        decoded = roundtrip_response(ALTER_PARTITION, v, resp)
        assert decoded.topics[0].partitions[0].partition_epoch == s.zk_version + 1
    r = run_async(lambda: c.controller.elect_leaders(0, [("t", 0), ("x", 1)], 1000), c)
    for v in (0, 1, 2):
        roundtrip_response(43, v, r)
    roundtrip_response(67, 0, run_async(lambda: c.controller.allocate_producer_ids(1, c.nodes[1].epoch), c))
    req = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [2, 3]}]}]}
    roundtrip_response(45, 0, run_async(lambda: c.controller.alter_partition_reassignments(req), c))
    roundtrip_response(46, 0, run_async(lambda: c.controller.list_partition_reassignments({"topics": None}), c))
    for v in (0, 1):
        roundtrip_response(57, v, run_async(lambda: c.controller.update_features(features_request(("f", 1, 1)), v),
                                            c))
