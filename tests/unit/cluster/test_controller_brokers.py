"""Broker failure and return: leader elections, ISR shrink, unclean election, bounced brokers, log dirs."""
from __future__ import annotations

from broker.errors import ErrorCode
from tests.unit.cluster.controller_harness import (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, Cluster,
                                                   brokers_of, lai_for, roundtrip_response, um_for)


def cluster(n: int = 3, controller_only_on_1: bool = True, **config) -> Cluster:
    c = Cluster(**config)
    for b in range(1, n + 1):
        c.add_broker(b, start_controller=(b == 1 or not controller_only_on_1))
    c.ack_all()
    return c


def test_broker_failure_moves_leadership_and_shrinks_isrs() -> None:
    c = cluster(4)
    c.create_topic("t", {0: [2, 3, 4], 1: [3, 2, 4], 2: [4, 3]})
    c.ack_all()
    c.channel.clear()
    c.kill_broker(2)
    s0, s1, s2 = c.state("t", 0), c.state("t", 1), c.state("t", 2)
    # t-0 was led by 2: offline election picks the first live ISR replica; ISR loses 2; epoch bumped
    assert (s0.leader, s0.isr, s0.leader_epoch, s0.zk_version) == (3, [3, 4], 1, 1)
    # t-1 was followed by 2: leader kept, 2 removed from the ISR with an epoch bump
    assert (s1.leader, s1.isr, s1.leader_epoch) == (3, [3, 4], 1)
    # t-2 does not involve broker 2: untouched
    assert (s2.leader, s2.leader_epoch, s2.zk_version) == (4, 0, 0)
    ch = c.channel
    assert lai_for(ch, 3, ("t", 0))[-1]["leader"] == 3 and lai_for(ch, 4, ("t", 0))[-1]["leader_epoch"] == 1
    assert lai_for(ch, 4, ("t", 1))[-1]["isr"] == [3, 4]
    assert not lai_for(ch, 2, ("t", 0))  # the dead broker gets nothing
    um = um_for(ch, 1, ("t", 0))[-1]
    assert um["offline_replicas"] == [2] and um["zk_version"] == 1
    assert brokers_of(ch.requests(api=UPDATE_METADATA)) == {1, 3, 4}
    assert 2 in ch.removed


def test_last_isr_member_dying_leaves_the_partition_offline_without_unclean_election() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2, 3]})
    c.ack_all()
    c.write_state("t", 0, isr=[2])  # 3 fell out of sync earlier
    c.kill_broker(2)
    s = c.state("t", 0)
    # no live ISR member: no leader; the ISR keeps its last member (it may hold data nobody else has)
    assert s.leader == -1 and s.isr == [2]
    assert c.controller.ctx.partition_states[("t", 0)].value == "OfflinePartition"
    um = um_for(c.channel, 3, ("t", 0))[-1]
    assert um["leader"] == -1


def test_unclean_election_with_topic_override() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2, 3]}, {"unclean.leader.election.enable": "true"})
    c.ack_all()
    c.write_state("t", 0, isr=[2])
    c.kill_broker(2)
    s = c.state("t", 0)
    assert s.leader == 3 and s.isr == [3] and s.leader_recovery_state == 1  # RECOVERING (KIP-704)
    assert lai_for(c.channel, 3, ("t", 0))[-1]["leader_recovery_state"] == 1


def test_unclean_election_broker_default_and_ibp_before_3_2() -> None:
    c = cluster(3, unclean_leader_election_enable=True, inter_broker_protocol_version="3.1")
    c.create_topic("t", {0: [2, 3]})
    c.ack_all()
    c.write_state("t", 0, isr=[2])
    c.kill_broker(2)
    s = c.state("t", 0)
    assert s.leader == 3 and s.isr == [3] and s.leader_recovery_state == 0


def test_topic_override_false_beats_broker_default() -> None:
    c = cluster(3, unclean_leader_election_enable=True)
    c.create_topic("t", {0: [2, 3]}, {"unclean.leader.election.enable": "false"})
    c.ack_all()
    c.write_state("t", 0, isr=[2])
    c.kill_broker(2)
    assert c.state("t", 0).leader == -1


def test_enabling_unclean_election_later_elects_offline_partitions() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2, 3]})
    c.ack_all()
    c.write_state("t", 0, isr=[2])
    c.kill_broker(2)
    assert c.state("t", 0).leader == -1
    c.admin.set_topic_config("t", {"unclean.leader.election.enable": "true"})
    c.controller.enable_topic_unclean_leader_election("t")
    c.run()
    assert c.state("t", 0).leader == 3


def test_broker_return_gets_full_metadata_then_its_replicas_and_offline_partitions_come_back() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2], 1: [3, 2]})
    c.ack_all()
    c.kill_broker(2)
    assert c.state("t", 0).leader == -1
    assert c.state("t", 1).isr == [3]
    c.ack_all()
    c.channel.clear()
    node = c.add_broker(2, start_controller=False)
    ch = c.channel
    to2 = ch.requests(2)
    # first an UpdateMetadata with every partition that has a leader, then LeaderAndIsr for its replicas
    assert to2[0].api_key == UPDATE_METADATA and ("t", 1) in to2[0].partition_states()
    assert to2[0].body["broker_epoch"] == node.epoch
    assert any(r.api_key == LEADER_AND_ISR for r in to2[1:])
    s0 = c.state("t", 0)
    # t-0 (RF 1): on failure its leader became -1 (epoch 1, ISR kept [2]); its only ISR member is back and
    # leads again with a new epoch
    assert s0.leader == 2 and s0.isr == [2] and s0.leader_epoch == 2
    assert lai_for(ch, 2, ("t", 0))[-1]["leader"] == 2
    # t-1: broker 2 is a follower again; it rejoins the ISR only through the leader's AlterPartition
    assert c.state("t", 1).isr == [3]
    assert lai_for(ch, 2, ("t", 1))[-1]["leader"] == 3


def test_bounced_broker_is_treated_as_failed_then_started() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2, 3]})
    c.ack_all()
    old_epoch = c.nodes[2].epoch
    c.channel.clear()
    c.bounce_session(2)
    new_epoch = c.nodes[2].epoch
    assert new_epoch > old_epoch
    ctl = c.controller
    assert ctl.ctx.live_broker_epochs[2] == new_epoch
    s = c.state("t", 0)
    assert s.leader == 3 and s.isr == [3]  # failed: leadership moved, ISR shrank
    assert c.channel.removed.count(2) == 1 and 2 in c.channel.brokers
    assert all(r.body["broker_epoch"] == new_epoch for r in c.channel.requests(2))


def test_registration_change_sends_metadata_to_everyone() -> None:
    c = cluster(2)
    c.channel.clear()
    node = c.nodes[2]
    info = node.zk.get_broker(2)
    from broker.config.kafka_config import Endpoint
    from broker.zk.paths import BrokerIdZNode, BrokerInfo
    moved = BrokerInfo(2, [Endpoint("PLAINTEXT", "newhost", 7777)], info.rack, info.features)
    node.zk.kazoo.set(BrokerIdZNode.path(2), BrokerIdZNode.encode(moved))
    c.run()
    um = c.channel.requests(api=UPDATE_METADATA)
    assert brokers_of(um) == {1, 2}
    eps = {b["id"]: b["endpoints"][0]["host"] for b in um[0].body["live_brokers"]}
    assert eps[2] == "newhost"
    assert c.channel.brokers[2].host == "newhost"


def test_log_dir_failure_marks_replicas_offline_from_leader_and_isr_errors() -> None:
    c = cluster(3)
    c.create_topic("t", {0: [2, 3], 1: [3, 2]})
    c.ack_all()
    c.channel.clear()
    c.nodes[2].zk.propagate_log_dir_event(2)
    c.run()
    assert c.admin.get_log_dir_event_notifications() == []
    req = c.channel.pending(2, LEADER_AND_ISR)[0]  # the controller asks broker 2 about all its replicas
    assert set(req.partition_states()) == {("t", 0), ("t", 1)}
    tid = c.topic_uuid("t")
    resp = roundtrip_response(LEADER_AND_ISR, 7, {"error_code": 0, "topics": [{"topic_id": tid, "partition_errors": [
        {"partition_index": 0, "error_code": int(ErrorCode.KAFKA_STORAGE_ERROR)},
        {"partition_index": 1, "error_code": 0}]}]})
    c.channel.respond(req, resp)
    c.run()
    s0, s1 = c.state("t", 0), c.state("t", 1)
    assert s0.leader == 3 and s0.isr == [3]  # its replica of t-0 is offline: leadership moved away
    assert s1.leader == 3 and s1.isr == [3, 2]
    assert c.controller.ctx.replicas_on_offline_dirs[2] == {("t", 0)}
    stops = c.channel.requests(2, STOP_REPLICA)
    assert stops and ("t", 0) in stops[-1].stop_partitions()


def test_zookeeper_gone_mid_event_is_one_line_and_the_waiter_hears_not_controller(caplog) -> None:
    """A ZooKeeper session that expires while an event writes (seen by the nemesis runner during an AlterPartition)
    is logged as one ERROR line without a traceback, and the leader waiting for the answer gets NOT_CONTROLLER (it
    retries with the next controller) instead of waiting forever."""
    import logging

    from kazoo.exceptions import ConnectionLoss, SessionExpiredError

    from broker.cluster.controller import events as ev

    c = cluster(3)
    for error in (SessionExpiredError(), ConnectionLoss()):
        def handler(e: object, error: Exception = error) -> None:
            raise error
        c.controller._handlers[ev.AlterPartitionReceived] = handler
        answers: list = []
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="broker.cluster.controller.kafka_controller"):
            c.controller.process(ev.AlterPartitionReceived(None, 3, answers.append))
        assert answers == [{"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "topics": []}]
        records = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(records) == 1 and records[0].exc_info is None, records
        assert "ZooKeeper" in records[0].getMessage() and type(error).__name__ in records[0].getMessage()
