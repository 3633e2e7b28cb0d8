"""Every version of the inter-broker and controller APIs, sent as raw requests to real broker processes.

A 3-broker cluster (one module-wide cluster; the ControlledShutdown that really moves leaderships gets its
own). Each (API, version) is encoded with the project's codec, answered by a broker process, decoded and
checked against Kafka 3.9's answers: stale controller epochs (STALE_CONTROLLER_EPOCH), stale broker epochs
(STALE_BROKER_EPOCH, KIP-380: the czxid of /brokers/ids/<id>), non-controllers (NOT_CONTROLLER), and requests
the controller really carries out (ControlledShutdown, AllocateProducerIds, AlterPartition, ElectLeaders,
ListPartitionReassignments) with the shape Kafka gives them.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from tests.harness.cluster_ops import (broker_epoch, call, controller_epoch, controller_id, module_cluster,
                                       partitions, zk_client)
from tests.integration.cluster.conftest import wait_for
from tools.cluster import LocalCluster

TOPIC = "ib"
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]

STALE_CONTROLLER_EPOCH = 11
NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
BROKER_NOT_AVAILABLE = 8
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
UNKNOWN_TOPIC_ID = 100
INELIGIBLE_REPLICA = 107
OPERATION_NOT_ATTEMPTED = 55
BROKER_ID_NOT_REGISTERED = 102

EXPECTED_RANGES = {
    ApiKey.LEADER_AND_ISR: (0, 7), ApiKey.UPDATE_METADATA: (0, 8), ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3), ApiKey.ALTER_PARTITION: (0, 3), ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 2), ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0), ApiKey.UPDATE_FEATURES: (0, 1),
}


def _versions(key: ApiKey) -> List[int]:
    lo, hi = EXPECTED_RANGES[key]
    return list(range(lo, hi + 1))


class Ctx:
    """The module cluster and the facts the requests need (controller, a non-controller, epochs, topic id)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.controller = controller_id(cluster)
        self.other = next(b.broker_id for b in cluster.brokers if b.broker_id != self.controller)
        self.controller_epoch = controller_epoch(cluster)
        m = call(cluster.brokers[0], ApiKey.METADATA, 12, {"topics": [{"name": TOPIC}]})
        self.topic_id: uuid.UUID = m.topics[0].topic_id

    def broker(self, broker_id: int) -> Any:
        return self.cluster.brokers[broker_id]

    def epoch(self, broker_id: int) -> int:
        return broker_epoch(self.cluster, broker_id)

    def state(self, partition: int) -> Tuple[Dict[str, Any], int]:
        """The partition state znode (leader, leader_epoch, isr, ...) and its version (the partition epoch)."""
        with zk_client(self.cluster) as zk:
            data, stat = zk.get(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")
        return json.loads(data), int(stat.version)

    def live_brokers(self, version: int) -> List[Dict[str, Any]]:
        out = []
        for b in self.cluster.brokers:
            host, port = b.bootstrap.rsplit(":", 1)
            out.append({"id": b.broker_id, "v0_host": host, "v0_port": int(port), "rack": None,
                        "endpoints": [{"port": int(port), "host": host, "listener": "PLAINTEXT",
                                       "security_protocol": 0}]})
        return out


@pytest.fixture(scope="module")
def ctx(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ctx]:
    with module_cluster(Path(tmp_path_factory.mktemp("interbroker")), zookeeper) as cluster:
        r = call(cluster.brokers[controller_id(cluster)], ApiKey.CREATE_TOPICS, 7, {"topics": [{
            "name": TOPIC, "num_partitions": -1, "replication_factor": -1,
            "assignments": [{"partition_index": i, "broker_ids": a} for i, a in enumerate(ASSIGNMENT)]}],
            "timeout_ms": 30000})
        assert r.topics[0].error_code == 0, r.topics[0]
        for b in cluster.brokers:
            wait_for(lambda b=b: (lambda p: len(p) == 3 and all(len(i.isr) == 3 for i in p.values()))(
                partitions(b, TOPIC)), 60, f"broker {b.broker_id} to see {TOPIC} fully replicated")
        yield Ctx(cluster)


def test_api_versions_advertises_the_inter_broker_apis(ctx: Ctx) -> None:
    for b in ctx.cluster.brokers:
        r = call(b, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert r.error_code == 0
        adv = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        for key, rng in EXPECTED_RANGES.items():
            assert adv.get(int(key)) == rng, (b.broker_id, key.name, adv.get(int(key)))
            assert tuple(proto.API_VERSIONS_RANGE[key]) == rng, key.name


# ------------------------------------------------------------------------------------ controller -> broker
def _leader_and_isr(ctx: Ctx, version: int, controller_epoch: int, broker_epoch: int, partition: int) -> Any:
    state, zk_version = ctx.state(partition)
    leader = state["leader"]
    ps = {"topic_name": TOPIC, "partition_index": partition, "controller_epoch": state["controller_epoch"],
          "leader": leader, "leader_epoch": state["leader_epoch"], "isr": state["isr"],
          "partition_epoch": zk_version, "replicas": ASSIGNMENT[partition], "adding_replicas": [],
          "removing_replicas": [], "is_new": False, "leader_recovery_state": 0}
    host, port = ctx.broker(leader).bootstrap.rsplit(":", 1)
    body = {"controller_id": ctx.controller, "is_k_raft_controller": False, "controller_epoch": controller_epoch,
            "broker_epoch": broker_epoch, "type": 0, "ungrouped_partition_states": [ps],
            "topic_states": [{"topic_name": TOPIC, "topic_id": ctx.topic_id, "partition_states": [ps]}],
            "live_leaders": [{"broker_id": leader, "host_name": host, "port": int(port)}]}
    return call(ctx.broker(ctx.other), ApiKey.LEADER_AND_ISR, version, body)


def _lai_partition_errors(version: int, r: Any) -> List[Tuple[int, int]]:
    if version < 5:
        return [(p.partition_index, p.error_code) for p in r.partition_errors]
    return [(p.partition_index, p.error_code) for t in r.topics for p in t.partition_errors]


@pytest.mark.parametrize("version", _versions(ApiKey.LEADER_AND_ISR))
def test_leader_and_isr(ctx: Ctx, version: int) -> None:
    target_epoch = ctx.epoch(ctx.other)
    part = ASSIGNMENT.index(next(a for a in ASSIGNMENT if a[0] != ctx.other))  # a partition it follows
    # An older controller: refused as a whole, every partition with the same error.
    r = _leader_and_isr(ctx, version, ctx.controller_epoch - 1, -1, part)
    assert r.error_code == STALE_CONTROLLER_EPOCH, r
    assert _lai_partition_errors(version, r) == [(part, STALE_CONTROLLER_EPOCH)]
    if version >= 5:
        assert r.topics[0].topic_id == ctx.topic_id
    if version >= 2:  # KIP-380: addressed to an older registration of this broker
        r = _leader_and_isr(ctx, version, ctx.controller_epoch, target_epoch - 1, part)
        assert r.error_code == STALE_BROKER_EPOCH, r
        assert _lai_partition_errors(version, r) == [(part, STALE_BROKER_EPOCH)]
    # The current controller and broker epochs, the partition's current leader epoch: accepted as a request, the
    # partition ignored as Kafka's ZooKeeper-mode broker does (an equal leader epoch is stale).
    r = _leader_and_isr(ctx, version, ctx.controller_epoch, target_epoch if version >= 2 else -1, part)
    assert r.error_code == NONE, r
    assert _lai_partition_errors(version, r) == [(part, STALE_CONTROLLER_EPOCH)]
    # ... and the broker still follows it.
    assert partitions(ctx.broker(ctx.other), TOPIC)[part].isr == tuple(ctx.state(part)[0]["isr"])


def _update_metadata(ctx: Ctx, version: int, controller_epoch: int, broker_epoch: int) -> Any:
    body = {"controller_id": ctx.controller, "is_k_raft_controller": False, "type": 0,
            "controller_epoch": controller_epoch, "broker_epoch": broker_epoch, "ungrouped_partition_states": [],
            "topic_states": [], "live_brokers": ctx.live_brokers(version)}
    return call(ctx.broker(ctx.other), ApiKey.UPDATE_METADATA, version, body)


@pytest.mark.parametrize("version", _versions(ApiKey.UPDATE_METADATA))
def test_update_metadata(ctx: Ctx, version: int) -> None:
    target_epoch = ctx.epoch(ctx.other)
    r = _update_metadata(ctx, version, ctx.controller_epoch - 1, -1)
    assert r.error_code == STALE_CONTROLLER_EPOCH
    if version >= 5:
        assert _update_metadata(ctx, version, ctx.controller_epoch, target_epoch - 1).error_code == STALE_BROKER_EPOCH
    # The current epochs with the real live brokers and no partition changes: applied, and nothing changes.
    r = _update_metadata(ctx, version, ctx.controller_epoch, target_epoch if version >= 5 else -1)
    assert r.error_code == NONE
    m = call(ctx.broker(ctx.other), ApiKey.METADATA, 12, {"topics": [{"name": TOPIC}]})
    assert sorted((b.node_id, b.host, b.port) for b in m.brokers) == sorted(
        (b.broker_id, "127.0.0.1", b.port) for b in ctx.cluster.brokers)
    assert m.controller_id == ctx.controller
    assert [p.leader_id for p in sorted(m.topics[0].partitions, key=lambda p: p.partition_index)] == [
        a[0] for a in ASSIGNMENT]


def _stop_replica(ctx: Ctx, version: int, controller_epoch: int, broker_epoch: int, topic: str) -> Any:
    body = {"controller_id": ctx.controller, "is_k_raft_controller": False, "controller_epoch": controller_epoch,
            "broker_epoch": broker_epoch, "delete_partitions": False,
            "ungrouped_partitions": [{"topic_name": topic, "partition_index": 0}],
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "topic_states": [{"topic_name": topic, "partition_states": [
                {"partition_index": 0, "leader_epoch": -1, "delete_partition": False}]}]}
    return call(ctx.broker(ctx.other), ApiKey.STOP_REPLICA, version, body)


@pytest.mark.parametrize("version", _versions(ApiKey.STOP_REPLICA))
def test_stop_replica(ctx: Ctx, version: int) -> None:
    target_epoch = ctx.epoch(ctx.other)
    # Stale requests are answered with the error alone (Kafka sends no partition errors with them).
    r = _stop_replica(ctx, version, ctx.controller_epoch - 1, -1, TOPIC)
    assert (r.error_code, r.partition_errors) == (STALE_CONTROLLER_EPOCH, [])
    if version >= 1:
        r = _stop_replica(ctx, version, ctx.controller_epoch, target_epoch - 1, TOPIC)
        assert (r.error_code, r.partition_errors) == (STALE_BROKER_EPOCH, [])
    # A partition the broker does not host: stopped (nothing to do), as Kafka answers.
    r = _stop_replica(ctx, version, ctx.controller_epoch, target_epoch if version >= 1 else -1, "no-such-topic")
    assert r.error_code == NONE
    assert [(p.topic_name, p.partition_index, p.error_code) for p in r.partition_errors] == [("no-such-topic", 0, 0)]
    # The stale requests did not stop the real partition.
    assert len(partitions(ctx.broker(ctx.other), TOPIC)[0].isr) == 3


# ------------------------------------------------------------------------------------ broker -> controller
@pytest.mark.parametrize("version", _versions(ApiKey.CONTROLLED_SHUTDOWN))
def test_controlled_shutdown_errors(ctx: Ctx, version: int) -> None:
    body = {"broker_id": ctx.other, "broker_epoch": ctx.epoch(ctx.other)}
    r = call(ctx.broker(ctx.other), ApiKey.CONTROLLED_SHUTDOWN, version, body)
    assert (r.error_code, r.remaining_partitions) == (NOT_CONTROLLER, [])
    r = call(ctx.broker(ctx.controller), ApiKey.CONTROLLED_SHUTDOWN, version, {"broker_id": 99, "broker_epoch": -1})
    assert (r.error_code, r.remaining_partitions) == (BROKER_NOT_AVAILABLE, [])
    if version >= 2:
        stale = {"broker_id": ctx.other, "broker_epoch": body["broker_epoch"] - 1}
        r = call(ctx.broker(ctx.controller), ApiKey.CONTROLLED_SHUTDOWN, version, stale)
        assert (r.error_code, r.remaining_partitions) == (STALE_BROKER_EPOCH, [])
    assert all(len(p.isr) == 3 for p in partitions(ctx.broker(ctx.controller), TOPIC).values())


def _alter_partition(ctx: Ctx, version: int, target: int, broker_id: int, broker_epoch: int, partition: int,
                     leader_epoch: int, isr: List[int], partition_epoch: int,
                     topic_id: uuid.UUID | None = None) -> Any:
    epochs = {b: ctx.epoch(b) for b in isr if b < 3}
    body = {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": [{
        "topic_name": TOPIC, "topic_id": topic_id or ctx.topic_id, "partitions": [{
            "partition_index": partition, "leader_epoch": leader_epoch, "new_isr": isr,
            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": epochs.get(b, -1)} for b in isr],
            "leader_recovery_state": 0, "partition_epoch": partition_epoch}]}]}
    return call(ctx.broker(target), ApiKey.ALTER_PARTITION, version, body)


@pytest.mark.parametrize("version", _versions(ApiKey.ALTER_PARTITION))
def test_alter_partition(ctx: Ctx, version: int) -> None:
    part = 0
    state, zk_version = ctx.state(part)
    leader = state["leader"]
    epoch = ctx.epoch(leader)
    args = (part, state["leader_epoch"], state["isr"], zk_version)
    r = _alter_partition(ctx, version, ctx.other, leader, epoch, *args)
    assert (r.error_code, r.topics) == (NOT_CONTROLLER, [])
    r = _alter_partition(ctx, version, ctx.controller, leader, epoch - 1, *args)
    assert (r.error_code, r.topics) == (STALE_BROKER_EPOCH, [])
    # The partition's current state again: accepted (idempotent), answered with the state.
    r = _alter_partition(ctx, version, ctx.controller, leader, epoch, *args)
    assert r.error_code == NONE
    (t,) = r.topics
    if version >= 2:
        assert t.topic_id == ctx.topic_id
    else:
        assert t.topic_name == TOPIC
    (p,) = t.partitions
    assert (p.partition_index, p.error_code, p.leader_id, p.leader_epoch, sorted(p.isr), p.partition_epoch) == (
        part, NONE, leader, state["leader_epoch"], sorted(state["isr"]), zk_version)
    # An older leader epoch is fenced.
    r = _alter_partition(ctx, version, ctx.controller, leader, epoch, part, state["leader_epoch"] - 1,
                         state["isr"], zk_version)
    assert [(p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == [(part, FENCED_LEADER_EPOCH)]
    # A new ISR with a broker that is not alive (nor a replica): refused with KIP-841's INELIGIBLE_REPLICA,
    # OPERATION_NOT_ATTEMPTED before v2, as Kafka's ZooKeeper controller answers.
    r = _alter_partition(ctx, version, ctx.controller, leader, epoch, part, state["leader_epoch"],
                         state["isr"] + [99], zk_version)
    want = INELIGIBLE_REPLICA if version > 1 else OPERATION_NOT_ATTEMPTED
    (code,) = [p.error_code for t in r.topics for p in t.partitions]
    assert code == want, code
    if version >= 2:
        bogus = uuid.uuid4()
        r = _alter_partition(ctx, version, ctx.controller, leader, epoch, *args, topic_id=bogus)
        assert [(t.topic_id, p.error_code) for t in r.topics for p in t.partitions] == [(bogus, UNKNOWN_TOPIC_ID)]
    # Nothing changed.
    assert ctx.state(part) == (state, zk_version)


@pytest.mark.parametrize("version", _versions(ApiKey.ALLOCATE_PRODUCER_IDS))
def test_allocate_producer_ids(ctx: Ctx, version: int) -> None:
    epoch = ctx.epoch(ctx.other)
    r = call(ctx.broker(ctx.other), ApiKey.ALLOCATE_PRODUCER_IDS, version,
             {"broker_id": ctx.other, "broker_epoch": epoch})
    assert r.error_code == NOT_CONTROLLER
    r = call(ctx.broker(ctx.controller), ApiKey.ALLOCATE_PRODUCER_IDS, version,
             {"broker_id": ctx.other, "broker_epoch": epoch - 1})
    assert r.error_code == STALE_BROKER_EPOCH
    r = call(ctx.broker(ctx.controller), ApiKey.ALLOCATE_PRODUCER_IDS, version, {"broker_id": 99, "broker_epoch": 5})
    assert r.error_code == BROKER_ID_NOT_REGISTERED
    first = call(ctx.broker(ctx.controller), ApiKey.ALLOCATE_PRODUCER_IDS, version,
                 {"broker_id": ctx.other, "broker_epoch": epoch})
    second = call(ctx.broker(ctx.controller), ApiKey.ALLOCATE_PRODUCER_IDS, version,
                  {"broker_id": ctx.other, "broker_epoch": epoch})
    assert first.error_code == second.error_code == NONE
    assert first.producer_id_len == second.producer_id_len == 1000
    assert first.producer_id_start >= 0 and first.producer_id_start % 1000 == 0
    assert second.producer_id_start == first.producer_id_start + 1000
    with zk_client(ctx.cluster) as zk:
        block = json.loads(zk.get("/latest_producer_id_block")[0])
    assert (block["broker"], int(block["block_start"]), int(block["block_end"])) == (
        ctx.other, second.producer_id_start, second.producer_id_start + 999)


# ------------------------------------------------------------------------------------ admin, answered by the controller
def _elect(ctx: Ctx, target: int, version: int, election_type: int, tps: Any) -> Any:
    return call(ctx.broker(target), ApiKey.ELECT_LEADERS, version,
                {"election_type": election_type, "topic_partitions": tps, "timeout_ms": 10000})


def _results(r: Any) -> Dict[Tuple[str, int], int]:
    return {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results for p in t.partition_result}


@pytest.mark.parametrize("version", _versions(ApiKey.ELECT_LEADERS))
def test_elect_leaders(ctx: Ctx, version: int) -> None:
    tps = [{"topic": TOPIC, "partitions": [0, 1]}, {"topic": "no-such-topic", "partitions": [0]}]
    r = _elect(ctx, ctx.other, version, 0, tps)
    assert _results(r) == {(TOPIC, 0): NOT_CONTROLLER, (TOPIC, 1): NOT_CONTROLLER,
                           ("no-such-topic", 0): NOT_CONTROLLER}
    for election_type in ([0] if version == 0 else [0, 1]):  # v0 carries no type: preferred
        r = _elect(ctx, ctx.controller, version, election_type, tps)
        if version >= 1:
            assert r.error_code == NONE
        assert _results(r) == {(TOPIC, 0): ELECTION_NOT_NEEDED, (TOPIC, 1): ELECTION_NOT_NEEDED,
                               ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    # All partitions: only those that needed an election (none) are listed.
    r = _elect(ctx, ctx.controller, version, 0, None)
    assert r.replica_election_results == []
    if version >= 1:
        assert r.error_code == NONE


def test_alter_partition_reassignments_v0(ctx: Ctx) -> None:
    def alter(target: int, topics: Any) -> Any:
        return call(ctx.broker(target), ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0,
                    {"timeout_ms": 10000, "topics": topics})

    cancel = [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]}]
    r = alter(ctx.other, cancel)
    assert (r.error_code, r.responses) == (NOT_CONTROLLER, [])
    r = alter(ctx.controller, cancel)
    assert r.error_code == NONE
    assert [(t.name, p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [
        (TOPIC, 0, NO_REASSIGNMENT_IN_PROGRESS)]
    r = alter(ctx.controller, [{"name": TOPIC, "partitions": [{"partition_index": 1, "replicas": [1, 1]}]},
                               {"name": "no-such-topic", "partitions": [{"partition_index": 0, "replicas": [0]}]}])
    got = {(t.name, p.partition_index): p.error_code for t in r.responses for p in t.partitions}
    assert got == {(TOPIC, 1): INVALID_REPLICA_ASSIGNMENT, ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert all(p.replicas == tuple(ASSIGNMENT[i]) for i, p in partitions(ctx.broker(0), TOPIC).items())


def test_list_partition_reassignments_v0(ctx: Ctx) -> None:
    r = call(ctx.broker(ctx.other), ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": None})
    assert (r.error_code, r.topics) == (NOT_CONTROLLER, [])
    for topics in (None, [{"name": TOPIC, "partition_indexes": [0, 1, 2]}]):
        r = call(ctx.broker(ctx.controller), ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                 {"timeout_ms": 10000, "topics": topics})
        assert (r.error_code, r.error_message, r.topics) == (NONE, None, [])


@pytest.mark.parametrize("version", _versions(ApiKey.UPDATE_FEATURES))
def test_update_features(ctx: Ctx, version: int) -> None:
    body = {"timeout_ms": 10000, "validate_only": True, "feature_updates": [
        {"feature": "no.such.feature", "max_version_level": 1, "allow_downgrade": False, "upgrade_type": 1}]}
    r = call(ctx.broker(ctx.other), ApiKey.UPDATE_FEATURES, version, body)
    assert (r.error_code, r.results) == (NOT_CONTROLLER, [])
    r = call(ctx.broker(ctx.controller), ApiKey.UPDATE_FEATURES, version, body)
    assert r.error_code == NONE
    assert [(x.feature, x.error_code) for x in r.results] == [("no.such.feature", INVALID_REQUEST)]
    assert "not supported" in (r.results[0].error_message or "")


# ------------------------------------------------------------------------------------ a real controlled shutdown
def test_controlled_shutdown_every_version_moves_leaderships(new_cluster: Any) -> None:
    """ControlledShutdown v0-3 from a live broker to the controller: answered NONE with no remaining partitions
    once its leaderships moved away, as a stopping broker sees it (the broker is then stopped for real)."""
    cluster = new_cluster(3)
    ctrl = controller_id(cluster)
    leaving = next(b for b in (0, 1, 2) if b != ctrl)
    r = call(cluster.brokers[ctrl], ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": TOPIC, "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": i, "broker_ids": a} for i, a in enumerate(ASSIGNMENT)]}],
        "timeout_ms": 30000})
    assert r.topics[0].error_code == 0
    wait_for(lambda: (lambda p: len(p) == 3 and all(len(i.isr) == 3 for i in p.values()))(
        partitions(cluster.brokers[ctrl], TOPIC)), 60, "a fully replicated topic")
    for version in _versions(ApiKey.CONTROLLED_SHUTDOWN):
        epoch = broker_epoch(cluster, leaving) if version >= 2 else -1
        r = call(cluster.brokers[ctrl], ApiKey.CONTROLLED_SHUTDOWN, version,
                 {"broker_id": leaving, "broker_epoch": epoch})
        assert (r.error_code, r.remaining_partitions) == (NONE, []), (version, r)
        moved = wait_for(lambda: all(
            (lambda p: all(i.leader != leaving and leaving not in i.isr for i in p.values()))(
                partitions(b, TOPIC)) for b in cluster.brokers), 30,
            "every broker to see no leadership and no ISR membership of the leaving broker")
        assert moved
    assert cluster.brokers[leaving].stop() == 0
