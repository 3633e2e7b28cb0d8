"""Controller election, failover, resignation and zombie fencing."""
from __future__ import annotations

import json

from broker.cluster.controller import events as ev
from tests.unit.cluster.controller_harness import (LEADER_AND_ISR, UPDATE_METADATA, Cluster, brokers_of, lai_for,
                                                   um_for)


def three_brokers(**config) -> Cluster:
    c = Cluster(**config)
    for b in (1, 2, 3):
        c.add_broker(b)
    c.ack_all()
    return c


def test_first_broker_wins_and_bumps_the_epoch() -> None:
    c = Cluster()
    c.add_broker(1)
    c.add_broker(2)
    ctl = c.nodes[1].controller
    assert ctl.is_active and ctl.epoch == 1 and ctl.ctx.epoch_zk_version == 1
    assert not c.nodes[2].controller.is_active
    assert c.nodes[2].controller.active_controller_id == 1
    assert json.loads(c.fake.data("/controller"))["brokerid"] == 1
    assert c.fake.data("/controller_epoch") == b"1"
    # /feature is created by the first controller (IBP >= 2.7: enabled, nothing finalized)
    assert json.loads(c.fake.data("/feature")) == {"version": 2, "status": 1, "features": {}}


def test_new_controller_on_controller_death_with_higher_epoch() -> None:
    c = three_brokers()
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    c.kill_broker(1)
    ctl = c.controller
    assert ctl.config.broker_id == 2 and ctl.epoch == 2
    s = c.state("t", 0)
    # the dead controller led t-0. As in Kafka, failover first takes the offline replica out of the ISR
    # (leader -1, epoch 1), then elects a leader among the live ISR (epoch 2)
    assert s.leader == 2 and s.leader_epoch == 2 and s.isr == [2, 3] and s.controller_epoch == 2


def test_failover_tells_every_broker_everything() -> None:
    c = three_brokers()
    c.create_topic("t", {0: [1, 2], 1: [2, 3]})
    c.ack_all()
    for n in c.nodes.values():
        n.channel.clear()
    # the controller resigns (e.g. its /controller node was deleted by an operator)
    c.admin.kazoo.delete("/controller")
    c.run()
    ch = c.channel
    first_um = [r for r in ch.requests(api=UPDATE_METADATA)][:3]
    assert brokers_of(first_um) == {1, 2, 3} and all(not r.partition_states() for r in first_um)
    # LeaderAndIsr for every partition to its replicas; UpdateMetadata with both partitions to all
    assert lai_for(ch, 1, ("t", 0)) and lai_for(ch, 2, ("t", 0)) and lai_for(ch, 2, ("t", 1))
    assert lai_for(ch, 3, ("t", 1)) and not lai_for(ch, 3, ("t", 0))
    for b in (1, 2, 3):
        assert um_for(ch, b, ("t", 0)) and um_for(ch, b, ("t", 1))
    req = ch.requests(1, LEADER_AND_ISR)[0]
    assert req.body["controller_epoch"] == c.controller.epoch == 2
    assert req.body["broker_epoch"] == c.nodes[1].epoch and req.body["controller_id"] == c.controller.config.broker_id
    assert req.message.topic_states[0].topic_id == c.topic_uuid("t")


def test_zombie_write_fails_then_resigns() -> None:
    c = three_brokers()
    c.create_topic("t", {0: [1, 2, 3]})
    c.ack_all()
    zombie = c.nodes[1].controller
    c.nodes[1].controller = None
    c.fake.nodes["/controller"].owner = 0
    c.admin.kazoo.delete("/controller")
    c.run()
    assert c.controller.config.broker_id == 2
    before = c.state("t", 0)
    # queued before it noticed: a controlled shutdown of broker 3 (moves nothing, but shrinks ISRs = writes)
    replies: list = []
    zombie.event_manager.put(ev.ControlledShutdown(3, -1, lambda code, parts: replies.append(code)))
    zombie.event_manager.process_pending()
    assert replies == [41]  # NOT_CONTROLLER: its write was rejected
    assert not zombie.is_active and zombie.ctx.live_broker_epochs == {}
    assert c.state("t", 0) == before


def test_session_expiry_resigns_and_reelects() -> None:
    c = three_brokers()
    ctl = c.nodes[1].controller
    c.bounce_session(1)
    # broker 1 lost /controller with its session; another broker (or 1 again) won the next election
    active = [n.broker_id for n in c.nodes.values() if n.controller.is_active]
    assert len(active) == 1
    assert c.controller.epoch == 2
    if active != [1]:
        assert not ctl.is_active and ctl.ctx.live_broker_epochs == {}


def test_controller_change_listener_and_shutdown() -> None:
    c = Cluster()
    c.add_broker(1)
    seen: list = []
    c.add_broker(2)
    c.nodes[2].controller.add_controller_change_listener(seen.append)
    c.kill_broker(1)
    assert seen == [-1, 2] or seen == [2]
    ctl = c.nodes[2].controller
    ctl.shutdown()
    assert not ctl.is_active
