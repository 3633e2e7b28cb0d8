"""Controller failover with a bounced leader (bounced_leaders.py): a leader that registered after its leadership
was written is treated as bounced (failed, then started), so the partition's leader epoch always advances."""
from __future__ import annotations

import logging

from broker.cluster.controller.bounced_leaders import find_bounced_leaders
from broker.zk.paths import LeaderAndIsr
from tests.unit.cluster.controller_harness import STOP_REPLICA, Cluster, lai_for

BOUNCE_LOG = "registered after the leadership of"


def _state(leader: int, epoch: int = 0, isr: tuple[int, ...] = (1, 2, 3)) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, list(isr), 1, 0, 0)


def test_find_bounced_leaders_compares_registration_with_last_state_write() -> None:
    states = {("t", 0): (_state(1), 100),   # written before broker 1 registered (czxid 150): bounced
              ("t", 1): (_state(1), 200),   # written after: not
              ("t", 2): (_state(2), 100),   # broker 2 registered before it
              ("t", 3): (_state(4), 10),    # leader 4 is not live
              ("t", 4): (_state(-1), 10),   # no leader
              ("u", 0): (_state(1), 120),
              ("solo", 0): (_state(1, isr=(1,)), 100),   # no other ISR member: kept, as Kafka keeps it
              ("v", 0): (_state(1, isr=(1, 4)), 100)}    # the other ISR member is not live: kept
    assert find_bounced_leaders(states, {1: 150, 2: 50, 3: 300}) == {1: [("t", 0), ("u", 0)]}
    assert find_bounced_leaders(states, {}) == {}


def _three_with_controller_leading(**config) -> Cluster:
    """Brokers 1-3, each running a controller; 1 is the controller and leads t-0 (RF 3) and solo-0 (RF 1)."""
    c = Cluster(**config)
    for b in (1, 2, 3):
        c.add_broker(b)
    c.ack_all()
    assert c.controller_node.broker_id == 1
    c.create_topic("t", {0: [1, 2, 3]})
    c.create_topic("solo", {0: [1]})
    c.create_topic("other", {0: [2, 3]})
    c.ack_all()
    return c


def _kill_and_reregister_at_once(c: Cluster, broker_id: int) -> None:
    """The broker dies and its restart registers before any other controller processes an event: what the
    controllers see when the restarted broker registers the moment its old session expires."""
    node = c.nodes.pop(broker_id)
    node.controller.event_manager.close()
    node.zk.close()  # its ephemerals (/controller, /brokers/ids/<id>) vanish
    c.add_broker(broker_id, start_controller=False)  # registers again, then the others' events run


def test_failover_treats_a_leader_registered_after_its_leadership_as_bounced(caplog) -> None:
    c = _three_with_controller_leading()
    before = {tp: c.state(*tp) for tp in (("t", 0), ("solo", 0), ("other", 0))}
    assert before[("t", 0)].leader == 1 and before[("solo", 0)].leader == 1
    with caplog.at_level(logging.INFO, logger="broker.cluster.controller.kafka_controller"):
        _kill_and_reregister_at_once(c, 1)
        c.ack_all()
    new = c.controller
    assert new.config.broker_id in (2, 3)
    assert new.ctx.live_broker_epochs[1] == c.nodes[1].epoch  # broker 1 is live again, with its new epoch
    lines = [r.getMessage() for r in caplog.records if BOUNCE_LOG in r.getMessage()]
    # solo-0 has no other ISR member and does not count; t-0 does
    assert lines == ["Broker 1 registered after the leadership of 1 partitions was written: treating it as "
                     "bounced"]
    # RF 3: leadership moved to another ISR member, with a new epoch; broker 1 left the ISR
    t0 = c.state("t", 0)
    assert t0.leader in (2, 3) and 1 not in t0.isr and t0.leader_epoch > before[("t", 0)].leader_epoch
    # RF 1: no other ISR member: broker 1 is elected again, with a new epoch
    solo = c.state("solo", 0)
    assert solo.leader == 1 and solo.isr == [1] and solo.leader_epoch > before[("solo", 0)].leader_epoch
    # the restarted broker never heard it leads with the epoch of its previous life
    ch = c.channel
    sent_to_1 = lai_for(ch, 1, ("t", 0)) + lai_for(ch, 1, ("solo", 0))
    assert sent_to_1 and all(ps["leader_epoch"] > before[(ps["topic_name"], 0)].leader_epoch for ps in sent_to_1)
    assert lai_for(ch, 1, ("solo", 0))[-1]["leader"] == 1
    assert lai_for(ch, 1, ("t", 0))[-1]["leader"] == t0.leader
    # held back during the failover: its first request is the start-up's UpdateMetadata, no StopReplica
    assert ch.requests(1)[0].name == "UpdateMetadata" and not ch.requests(1, STOP_REPLICA)
    # a partition broker 1 does not lead is left alone
    assert c.state("other", 0) == before[("other", 0)]


def test_failover_keeps_leaders_whose_leadership_was_written_after_they_registered(caplog) -> None:
    c = _three_with_controller_leading()
    c.kill_broker(1)  # the controller dies for good: its partitions move, written after 2 and 3 registered
    c.ack_all()
    moved = c.state("t", 0)
    old = c.controller_node.broker_id
    states = {tp: c.state(*tp) for tp in (("t", 0), ("other", 0))}
    with caplog.at_level(logging.INFO, logger="broker.cluster.controller.kafka_controller"):
        c.kill_broker(old)  # a second failover: the remaining broker takes over
        c.ack_all()
    assert not [r for r in caplog.records if BOUNCE_LOG in r.getMessage()]
    survivor = c.controller_node.broker_id
    for tp, s in states.items():
        now = c.state(*tp)
        if s.leader == survivor:  # its leadership is untouched: same leader, same epoch
            assert (now.leader, now.leader_epoch) == (s.leader, s.leader_epoch)
    assert moved.leader in (2, 3)


def test_bounced_controller_that_wins_again_treats_itself_as_bounced() -> None:
    """Only broker 1 runs a controller: its restart wins the election and finds its own leadership stale."""
    c = Cluster()
    c.add_broker(1)
    c.add_broker(2, start_controller=False)
    c.ack_all()
    c.create_topic("t", {0: [1, 2]})
    c.ack_all()
    before = c.state("t", 0)
    assert before.leader == 1
    node = c.nodes.pop(1)
    node.controller.event_manager.close()
    node.zk.close()
    c.add_broker(1)  # registers, then its controller is elected with the stale state in ZooKeeper
    c.ack_all()
    assert c.controller_node.broker_id == 1
    s = c.state("t", 0)
    assert s.leader == 2 and s.leader_epoch > before.leader_epoch and s.isr == [2]
    assert all(ps["leader_epoch"] > before.leader_epoch for ps in lai_for(c.channel, 1, ("t", 0)))


def test_a_one_broker_cluster_restarting_is_not_a_bounce(caplog) -> None:
    """A one-broker cluster's broker is always its own new controller after a restart and always registered after
    its leaderships were written: with no other ISR member nothing is re-elected (no state rewritten), as Kafka."""
    c = Cluster()
    c.add_broker(1)
    c.ack_all()
    c.create_topic("t", {0: [1], 1: [1]})
    c.ack_all()
    before = {p: c.state("t", p) for p in (0, 1)}
    with caplog.at_level(logging.INFO, logger="broker.cluster.controller.kafka_controller"):
        c.restart_broker(1)  # registers again, then its new controller takes over
        c.ack_all()
    assert c.controller.config.broker_id == 1
    assert not [r for r in caplog.records if BOUNCE_LOG in r.getMessage()]
    for p in (0, 1):
        s = c.state("t", p)
        assert (s.leader, s.leader_epoch, s.zk_version) == (1, before[p].leader_epoch, before[p].zk_version)
