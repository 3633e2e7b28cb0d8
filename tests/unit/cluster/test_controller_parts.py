"""The controller's smaller parts: IBP parsing, election rules, ReplicaAssignment, the event manager, feature
validation and the request batch's versions."""
from __future__ import annotations

import threading

import pytest

from broker.cluster.controller import ControllerConfig, InterBrokerProtocolVersion
from broker.cluster.controller.context import ControllerContext, ReplicaAssignment
from broker.cluster.controller.election import (controlled_shutdown_leader, leader_for_controlled_shutdown,
                                                leader_for_offline, offline_partition_leader,
                                                preferred_replica_leader, reassign_partition_leader)
from broker.cluster.controller.event_manager import ControllerEvent, ControllerEventManager
from broker.cluster.controller.features import SAFE_DOWNGRADE, UPGRADE, validate_feature_update
from broker.cluster.controller.partition_state_machine import (ControlledShutdownElection, OfflineElection,
                                                               PreferredElection, ReassignElection, strategy_text)
from broker.errors import ErrorCode as E
from broker.util.clock import ManualClock
from broker.zk.paths import LeaderAndIsr


# ------------------------------------------------------------------------------------------- IBP
@pytest.mark.parametrize("text,release,iv", [("3.9", "3.9", 0), ("3.9-IV0", "3.9", 0), ("3.9.1", "3.9", 0),
                                             ("2.6", "2.6", 0), ("2.8", "2.8", 1), ("3.3", "3.3", 3),
                                             ("0.10.2", "0.10.2", 0), ("0.8.2", "0.8.2", -1)])
def test_ibp_parse(text: str, release: str, iv: int) -> None:
    v = InterBrokerProtocolVersion.parse(text)
    assert (v.release, v.iv) == (release, iv)


@pytest.mark.parametrize("bad", ["4.5", "3.9-IV7", "x", "3.9-V0"])
def test_ibp_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        InterBrokerProtocolVersion.parse(bad)


def test_ibp_gates_and_request_versions() -> None:
    new = ControllerConfig(1)
    assert new.is_alter_partition_enabled and new.is_allocate_producer_ids_enabled and new.uses_topic_id
    assert (new.leader_and_isr_version, new.update_metadata_version, new.stop_replica_version) == (7, 8, 4)
    assert ControllerConfig(1, inter_broker_protocol_version="2.7").is_alter_partition_enabled
    assert not ControllerConfig(1, inter_broker_protocol_version="2.7-IV1").is_alter_partition_enabled
    assert not ControllerConfig(1, inter_broker_protocol_version="2.8").is_allocate_producer_ids_enabled
    old = ControllerConfig(1, inter_broker_protocol_version="2.6")
    assert (old.leader_and_isr_version, old.update_metadata_version, old.stop_replica_version) == (4, 6, 3)
    assert not old.is_feature_versioning_supported
    assert ControllerConfig(1, inter_broker_protocol_version="3.2").feature_znode_version == 1
    with pytest.raises(ValueError):
        ControllerConfig(1, inter_broker_protocol_version="9.9")


def test_from_kafka_config() -> None:
    from broker.config.kafka_config import KafkaConfig
    cfg = KafkaConfig({"broker.id": "3", "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x",
                       "listeners": "PLAINTEXT://:9092", "inter.broker.protocol.version": "2.8",
                       "unclean.leader.election.enable": "true", "auto.leader.rebalance.enable": "false"})
    cc = ControllerConfig.from_kafka_config(cfg)
    assert (cc.broker_id, cc.inter_broker_protocol_version, cc.unclean_leader_election_enable,
            cc.auto_leader_rebalance_enable, cc.inter_broker_listener_name) == (3, "2.8", True, False, "PLAINTEXT")


# ------------------------------------------------------------------------------------------- elections
def test_election_algorithms() -> None:
    assert offline_partition_leader([1, 2, 3], [3, 2], {1, 2, 3}, False) == 2
    assert offline_partition_leader([1, 2, 3], [3], {1, 2}, False) is None
    assert offline_partition_leader([1, 2, 3], [3], {2, 1}, True) == 1
    assert reassign_partition_leader([4, 5], [1, 5, 4], {4, 5}) == 4
    assert preferred_replica_leader([2, 1], [1, 2], {1, 2}) == 2
    assert preferred_replica_leader([2, 1], [1], {1, 2}) is None
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == 2


def ctx_with(live: dict[int, int], assignment: list[int], shutting: set[int] = frozenset()) -> ControllerContext:
    ctx = ControllerContext()
    ctx.live_broker_epochs.update(live)
    ctx.shutting_down_broker_ids |= set(shutting)
    ctx.update_partition_full_replica_assignment(("t", 0), ReplicaAssignment.of(assignment))
    return ctx


def test_offline_election_states() -> None:
    ctx = ctx_with({2: 1, 3: 1}, [1, 2, 3])
    s = LeaderAndIsr(1, 4, [1, 2, 3], 1, 0, 9)
    r = leader_for_offline(ctx, ("t", 0), s, False, True)
    assert r.state == LeaderAndIsr(2, 5, [2, 3], 1, 0, 9) and r.recipients == [2, 3]
    s = LeaderAndIsr(1, 4, [1], 1, 0, 9)
    assert leader_for_offline(ctx, ("t", 0), s, False, True).state is None
    unclean = leader_for_offline(ctx, ("t", 0), s, True, True).state
    assert unclean == LeaderAndIsr(2, 5, [2], 1, 1, 9)
    assert leader_for_offline(ctx, ("t", 0), s, True, False).state.leader_recovery_state == 0


def test_controlled_shutdown_election_drops_shutting_down_brokers_from_isr() -> None:
    ctx = ctx_with({1: 1, 2: 1, 3: 1}, [1, 2, 3], shutting={1, 3})
    r = leader_for_controlled_shutdown(ctx, ("t", 0), LeaderAndIsr(1, 0, [1, 2, 3], 1))
    assert r.state.leader == 2 and r.state.isr == [2] and r.recipients == [1, 2, 3]


def test_failed_election_messages_name_partition_and_strategy_as_kafka() -> None:
    """ElectLeaders answers carry these messages; Kafka's tools print them (``t-0``, Scala's strategy names)."""
    assert strategy_text(PreferredElection()) == "PreferredReplicaPartitionLeaderElectionStrategy"
    assert strategy_text(OfflineElection(True)) == "OfflinePartitionLeaderElectionStrategy(true)"
    assert strategy_text(OfflineElection()) == "OfflinePartitionLeaderElectionStrategy(false)"
    assert strategy_text(ReassignElection()) == "ReassignPartitionLeaderElectionStrategy"
    assert strategy_text(ControlledShutdownElection()) == "ControlledShutdownPartitionLeaderElectionStrategy"


def test_replica_assignment_reassign_to() -> None:
    a = ReplicaAssignment.of([1, 2, 3]).reassign_to([3, 4, 2])
    assert a == ReplicaAssignment((3, 4, 2, 1), (4,), (1,))
    assert a.origin_replicas == [3, 2, 1] and a.target_replicas == [3, 4, 2] and a.is_being_reassigned
    # a new target replaces the in-progress one, computed from the original replicas
    b = a.reassign_to([5])
    assert b == ReplicaAssignment((5, 3, 2, 1), (5,), (3, 2, 1))
    assert a.reassign_to(a.origin_replicas) == ReplicaAssignment((3, 2, 1))
    assert a.remove_replica(4) == ReplicaAssignment((3, 2, 1), (), (1,))


# ------------------------------------------------------------------------------------------- event manager
class Ev(ControllerEvent):
    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def preempt(self) -> None:
        self.log.append(("preempted", self.name))


def test_event_manager_order_timers_and_preemption() -> None:
    clock = ManualClock()
    seen: list = []
    em = ControllerEventManager(lambda e: seen.append(e.name), clock)
    em.put(Ev("a", seen))
    em.put(Ev("b", seen))
    em.schedule("t1", 100, lambda: Ev("timer", seen))
    em.schedule("t2", 50, lambda: Ev("early", seen))
    em.schedule("t2", 200, lambda: Ev("replaced", seen))
    assert em.process_pending() == 2 and seen == ["a", "b"]
    clock.advance(99)
    assert em.process_pending() == 0
    clock.advance(1)
    em.process_pending()
    assert seen[-1] == "timer"
    em.cancel("t2")
    clock.advance(500)
    assert em.process_pending() == 0
    em.put(Ev("c", seen))
    em.clear_and_put(Ev("d", seen))
    assert ("preempted", "c") in seen
    em.close()
    assert ("preempted", "d") in seen
    em.put(Ev("late", seen))
    assert seen[-1] == ("preempted", "late")


def test_event_manager_errors_do_not_stop_processing() -> None:
    seen: list = []

    def process(e: ControllerEvent) -> None:
        if e.name == "boom":
            raise RuntimeError("boom")
        seen.append(e.name)

    em = ControllerEventManager(process, ManualClock())
    em.put(Ev("boom", seen))
    em.put(Ev("ok", seen))
    em.process_pending()
    assert seen == ["ok"]


def test_event_manager_thread() -> None:
    done = threading.Event()
    names: list = []

    def process(e: ControllerEvent) -> None:
        names.append((e.name, threading.current_thread().name))
        if e.name == "last":
            done.set()

    em = ControllerEventManager(process)
    em.start()
    em.put(Ev("first", []))
    em.schedule("x", 0, lambda: Ev("last", []))
    assert done.wait(5)
    em.close()
    assert names == [("first", "controller-event-thread"), ("last", "controller-event-thread")]
    assert not em.is_running


# ------------------------------------------------------------------------------------------- features
def test_feature_update_validation() -> None:
    sup = {"f": (1, 3)}
    brokers = [{"f": (1, 3)}, {"f": (1, 2)}]
    assert validate_feature_update("f", 2, UPGRADE, None, sup, brokers) == (E.NONE, None, 2)
    assert validate_feature_update("f", 3, UPGRADE, None, sup, brokers)[0] == E.INVALID_REQUEST  # a broker says no
    assert validate_feature_update("f", 2, UPGRADE, 2, sup, brokers)[0] == E.INVALID_REQUEST  # same level
    assert validate_feature_update("f", 1, UPGRADE, 2, sup, brokers)[0] == E.INVALID_REQUEST  # downgrade w/o SAFE
    assert validate_feature_update("f", 1, SAFE_DOWNGRADE, 2, sup, brokers) == (E.NONE, None, 1)
    assert validate_feature_update("f", 2, SAFE_DOWNGRADE, 1, sup, brokers)[0] == E.INVALID_REQUEST
    assert validate_feature_update("f", 0, SAFE_DOWNGRADE, 1, sup, brokers) == (E.NONE, None, None)
    assert validate_feature_update("f", 0, SAFE_DOWNGRADE, None, sup, brokers)[0] == E.INVALID_REQUEST
    assert validate_feature_update("f", 0, UPGRADE, None, sup, brokers)[0] == E.INVALID_REQUEST
    assert validate_feature_update("", 1, UPGRADE, None, sup, brokers)[0] == E.INVALID_REQUEST
    assert validate_feature_update("g", 1, UPGRADE, None, sup, brokers)[0] == E.INVALID_REQUEST
    assert validate_feature_update("f", 1, 9, None, sup, brokers)[1] == "Received unknown upgrade type."
