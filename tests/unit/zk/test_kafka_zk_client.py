"""KafkaZkClient on the in-memory ZooKeeper: the registry operations, and the controller's guarded writes."""
from __future__ import annotations

import json

import pytest
from kazoo.exceptions import NodeExistsError

from broker.config.kafka_config import Endpoint
from broker.zk.client import KafkaZkClient
from broker.zk.errors import BrokerIdInUseError, ControllerMovedError, NoSuchTopicError, TopicExistsError
from broker.zk.paths import FeatureZNode, LeaderAndIsr, topic_id_to_uuid, uuid_to_topic_id
from tests.unit.zk.fake_kazoo import FakeZooKeeper


@pytest.fixture
def zk() -> FakeZooKeeper:
    return FakeZooKeeper()


def client(zk: FakeZooKeeper, connect: str = "fake:2181/kafka", **kw) -> KafkaZkClient:
    c = KafkaZkClient(connect, kazoo_client=zk.client(), **kw)
    c.run_in_background = lambda fn: fn()
    c.start()
    return c


EP = [Endpoint("PLAINTEXT", "h1", 9092)]


def test_start_creates_chroot_and_persistent_paths(zk: FakeZooKeeper) -> None:
    client(zk)
    paths = zk.dump("/kafka")
    for p in ("/kafka/brokers/ids", "/kafka/brokers/topics", "/kafka/admin/delete_topics",
              "/kafka/isr_change_notification", "/kafka/log_dir_event_notification", "/kafka/config/changes"):
        assert p in paths


def test_broker_registration_epoch_is_czxid_and_duplicates_are_refused(zk: FakeZooKeeper) -> None:
    a = client(zk)
    epoch = a.register_broker(1, EP, rack="r1")
    assert epoch == zk.stat("/kafka/brokers/ids/1").czxid
    assert a.get_all_brokers_and_epochs()[1][1] == epoch
    assert a.get_broker_and_epoch(1)[0].rack == "r1"
    b = client(zk, stale_registration_wait_ms=0)
    with pytest.raises(BrokerIdInUseError):
        b.register_broker(1, EP)


def test_reregistration_after_session_expiry(zk: FakeZooKeeper) -> None:
    a = client(zk)
    first = a.register_broker(1, EP)
    lost, renewed = [], []
    a.on_session_lost(lambda: lost.append(1))
    a.on_new_session(lambda: renewed.append(1))
    zk.expire_session(a.kazoo)
    assert lost == [1] and renewed == [1]
    second = a.get_broker_and_epoch(1)[1]
    assert second > first


def test_election_bumps_epoch_in_one_multi_and_returns_the_znode_version(zk: FakeZooKeeper) -> None:
    a, b = client(zk), client(zk)
    assert a.try_elect_controller_with_version(1) == (1, 1)
    assert b.try_elect_controller_with_version(2) is None
    assert a.try_elect_controller(1) == 1  # same session asking again keeps the epoch
    with pytest.raises(ControllerMovedError):
        b.register_controller_and_increment_epoch(2)
    assert json.loads(zk.data("/kafka/controller"))["brokerid"] == 1
    a.close()
    assert b.register_controller_and_increment_epoch(2) == (2, 2)
    assert b.get_controller_epoch_and_version() == (2, 2)


def test_guarded_writes_fail_for_a_stale_epoch_version(zk: FakeZooKeeper) -> None:
    a, b = client(zk), client(zk)
    epoch, version = a.register_controller_and_increment_epoch(1)
    a.create_topic_assignment("t", {0: [1, 2]})
    created = a.create_partition_states({("t", 0): LeaderAndIsr(1, 0, [1, 2], epoch)}, version)
    assert created[("t", 0)].zk_version == 0
    # another controller is elected (the zombie's session is not even gone)
    zk.nodes["/kafka/controller"].owner = 0
    b.resign_controller(1)
    assert b.try_elect_controller_with_version(2) == (2, 2)
    with pytest.raises(ControllerMovedError):
        a.update_leader_and_isr({("t", 0): LeaderAndIsr(2, 1, [2], epoch, zk_version=0)}, epoch, version)
    with pytest.raises(ControllerMovedError):
        a.delete_topic_deletions(["t"], version)
    assert a.get_partition_state("t", 0).leader == 1


def test_update_leader_and_isr_is_compare_and_set(zk: FakeZooKeeper) -> None:
    a = client(zk)
    epoch, version = a.register_controller_and_increment_epoch(1)
    a.create_topic_assignment("t", {0: [1, 2], 1: [2, 1]})
    a.create_partition_states({("t", 0): LeaderAndIsr(1, 0, [1, 2], epoch),
                               ("t", 1): LeaderAndIsr(2, 0, [2, 1], epoch)}, version)
    done, retry = a.update_leader_and_isr({("t", 0): LeaderAndIsr(2, 1, [2], 0, zk_version=0),
                                           ("t", 1): LeaderAndIsr(1, 1, [1], 0, zk_version=7)}, epoch, version)
    assert done[("t", 0)] == LeaderAndIsr(2, 1, [2], epoch, 0, 1) and retry == [("t", 1)]
    assert a.get_partition_states([("t", 0), ("t", 1), ("t", 9)]).keys() == {("t", 0), ("t", 1)}
    again = a.create_partition_states({("t", 0): LeaderAndIsr(1, 0, [1], epoch)}, version)
    assert isinstance(again[("t", 0)], NodeExistsError)


def test_topic_assignment_only_creation_and_additions(zk: FakeZooKeeper) -> None:
    a = client(zk)
    tid = a.create_topic_assignment("t", {0: [1, 2]}, {"cleanup.policy": "compact"})
    assert a.get_topic("t") == (tid, {0: [1, 2]})
    assert "/kafka/brokers/topics/t/partitions" not in zk.dump()
    assert a.get_topic_config("t") == {"cleanup.policy": "compact"}
    with pytest.raises(TopicExistsError):
        a.create_topic_assignment("t", {0: [1]})
    a.add_partitions_assignment("t", {1: [2, 1]})
    assert a.get_topic_assignments(["t", "nope"])["t"].partitions == {0: [1, 2], 1: [2, 1]}
    with pytest.raises(NoSuchTopicError):
        a.add_partitions_assignment("nope", {0: [1]})
    assert uuid_to_topic_id(topic_id_to_uuid(tid)) == tid


def test_old_create_topic_still_writes_states(zk: FakeZooKeeper) -> None:
    a = client(zk)
    a.register_broker(1, EP)
    a.create_topic("old", {0: [1, 2]})
    s = a.get_partition_state("old", 0)
    assert (s.leader, s.isr, s.zk_version) == (1, [1], 0)


def test_delete_topic_znodes_guarded(zk: FakeZooKeeper) -> None:
    a = client(zk)
    epoch, version = a.register_controller_and_increment_epoch(1)
    a.create_topic_assignment("t", {0: [1]}, {"x": "y"})
    a.create_partition_states({("t", 0): LeaderAndIsr(1, 0, [1], epoch)}, version)
    a.mark_topic_for_deletion("t")
    a.delete_topic_znodes_guarded("t", version)
    assert [p for p in zk.dump("/kafka") if p.endswith("/t") or "/t/" in p] == []
    assert a.get_topic("t") is None and a.topics_marked_for_deletion() == set()
    assert a.get_topic_config("t") == {}


def test_notifications_and_admin_znodes(zk: FakeZooKeeper) -> None:
    a = client(zk)
    _, version = a.register_controller_and_increment_epoch(1)
    a.propagate_isr_changes([("t", 0), ("t", 1)])
    a.propagate_isr_changes([("u", 0)])
    names = a.get_isr_change_notifications()
    assert len(names) == 2
    assert a.get_partitions_from_isr_change_notifications(names) == {("t", 0), ("t", 1), ("u", 0)}
    a.delete_isr_change_notifications(names, version)
    assert a.get_isr_change_notifications() == []
    a.propagate_log_dir_event(3)
    names = a.get_log_dir_event_notifications()
    assert a.get_broker_ids_from_log_dir_events(names) == [3]
    a.delete_log_dir_event_notifications(names, version)
    assert a.get_partition_reassignment() is None
    a.create_partition_reassignment({("t", 0): [1, 2]})
    assert a.get_partition_reassignment() == {("t", 0): [1, 2]}
    a.set_or_create_partition_reassignment({("t", 1): [2]}, version)
    assert a.get_partition_reassignment() == {("t", 1): [2]}
    a.delete_partition_reassignment(version)
    assert a.get_partition_reassignment() is None
    a.create_preferred_replica_election([("t", 0)])
    assert a.get_preferred_replica_election() == {("t", 0)}
    a.delete_preferred_replica_election(version)
    assert a.get_preferred_replica_election() is None


def test_feature_znode(zk: FakeZooKeeper) -> None:
    a = client(zk)
    _, version = a.register_controller_and_increment_epoch(1)
    assert a.get_finalized_features() is None
    a.create_feature_znode(FeatureZNode.encode_levels({}))
    assert json.loads(zk.data("/kafka/feature")) == {"version": 2, "status": 1, "features": {}}
    assert a.set_feature_znode(FeatureZNode.encode_levels({"f": 2}), version) == 1
    assert a.get_finalized_features() == (1, {"f": 2})
    assert json.loads(zk.data("/kafka/feature"))["features"] == {"f": {"max_version_level": 2}}


def test_generic_watches_skip_the_initial_state_and_stop_when_cancelled(zk: FakeZooKeeper) -> None:
    a, b = client(zk), client(zk)
    kids, data = [], []
    w1 = a.watch_children("/brokers/ids", lambda: kids.append(1))
    w2 = a.watch_data("/controller", lambda: data.append(1))
    assert kids == [] and data == []
    b.register_broker(5, EP)
    b.try_elect_controller(5)
    assert kids == [1] and data == [1]
    w1.cancel()
    w2.cancel()
    b.resign_controller(5)
    b.kazoo.create("/brokers/ids/7", b"{}", ephemeral=True)
    assert kids == [1] and data == [1]


def test_producer_id_blocks(zk: FakeZooKeeper) -> None:
    a = client(zk)
    assert a.allocate_producer_id_block(1) == (0, 999)
    assert a.allocate_producer_id_block(2) == (1000, 1999)


def test_creation_watch_fires_only_on_creation(zk: FakeZooKeeper) -> None:
    a, b = client(zk), client(zk)
    created = []
    w = a.watch_creation("/admin/reassign_partitions", lambda: created.append(1))
    b.create_partition_reassignment({("t", 0): [1]})
    _, version = b.register_controller_and_increment_epoch(2)
    b.set_or_create_partition_reassignment({("t", 1): [1]}, version)  # the controller's own update
    b.delete_partition_reassignment(version)
    assert created == [1]
    b.create_partition_reassignment({("t", 0): [2]})
    assert created == [1, 1]
    w.cancel()
    b.delete_partition_reassignment(version)
    b.create_partition_reassignment({("t", 0): [2]})
    assert created == [1, 1]


def test_partition_state_json_is_kafkas() -> None:
    """Kafka's TopicPartitionStateZNode.encode writes leader_recovery_state only when RECOVERING (KIP-704)."""
    from broker.zk.paths import TopicPartitionStateZNode

    recovered = TopicPartitionStateZNode.encode(LeaderAndIsr(2, 3, [2, 0], 4))
    assert recovered == b'{"version":1,"leader":2,"leader_epoch":3,"controller_epoch":4,"isr":[2,0]}'
    recovering = json.loads(TopicPartitionStateZNode.encode(LeaderAndIsr(2, 3, [2], 4, leader_recovery_state=1)))
    assert recovering["leader_recovery_state"] == 1
    # and Kafka's own bytes decode (no leader_recovery_state: RECOVERED)
    s = TopicPartitionStateZNode.decode(b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0,2,1]}', 7)
    assert (s.leader, s.isr, s.leader_recovery_state, s.zk_version) == (0, [0, 2, 1], 0, 7)
