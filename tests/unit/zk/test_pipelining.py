"""KafkaZkClient's pipelined requests: at most zookeeper.max.in.flight.requests unanswered at once (all threads
together), state znodes written as two-op multis guarded by /controller_epoch, partition parents in few multis."""
from __future__ import annotations

import threading

import pytest

from broker.zk.client import KafkaZkClient
from broker.zk.errors import ControllerMovedError
from broker.zk.paths import LeaderAndIsr, TopicPartitionStateZNode, TopicPartitionZNode
from tests.unit.zk.fake_kazoo import FakeZooKeeper
from tests.unit.zk.recording_kazoo import InFlightRecorder


def client(zk: FakeZooKeeper, **kw) -> tuple[KafkaZkClient, InFlightRecorder]:
    rec = InFlightRecorder(zk.client())
    c = KafkaZkClient("fake:2181/kafka", kazoo_client=rec, **kw)
    c.run_in_background = lambda fn: fn()
    c.start()
    return c, rec


def controller(zk: FakeZooKeeper, **kw) -> tuple[KafkaZkClient, InFlightRecorder, int, int]:
    c, rec = client(zk, **kw)
    epoch, version = c.register_controller_and_increment_epoch(1)
    return c, rec, epoch, version


def new_states(c: KafkaZkClient, topics: int, partitions: int, epoch: int, prefix: str = "t"
               ) -> dict[tuple[str, int], LeaderAndIsr]:
    """New topics' assignments written (as the admin does), and their partitions' first states."""
    for t in range(topics):
        c.create_topic_assignment(f"{prefix}{t}", {p: [1] for p in range(partitions)})
    return {(f"{prefix}{t}", p): LeaderAndIsr(1, 0, [1], epoch, 0, 0) for t in range(topics)
            for p in range(partitions)}


@pytest.mark.parametrize("max_in_flight", [1, 3, 10])
def test_reads_and_guarded_writes_never_exceed_max_in_flight(max_in_flight: int) -> None:
    zk = FakeZooKeeper()
    c, rec, epoch, version = controller(zk, max_in_flight_requests=max_in_flight)
    states = new_states(c, 4, 250, epoch)
    rec.reset()
    created = c.create_partition_states(states, version)
    assert all(isinstance(r, LeaderAndIsr) for r in created.values()) and len(created) == 1000
    read = c.get_partition_states(list(states))
    assert len(read) == 1000
    written, retry = c.update_leader_and_isr({tp: s for tp, s in read.items()}, epoch, version)
    assert not retry and all(isinstance(r, LeaderAndIsr) and r.zk_version == 1 for r in written.values())
    assert rec.max_in_flight == max_in_flight  # reached, never exceeded
    assert rec.in_flight == 0


def test_state_writes_are_two_op_multis_checking_the_controller_epoch_version() -> None:
    zk = FakeZooKeeper()
    c, rec, epoch, version = controller(zk)
    states = new_states(c, 2, 100, epoch)
    rec.reset()
    c.create_partition_states(states, version)
    state_multis = [ops for ops in rec.multis if any(op[1].endswith("/state") for op in ops)]
    assert len(state_multis) == 200
    for ops in state_multis:
        assert len(ops) == 2
        assert ops[0] == ("check", "/kafka/controller_epoch", version)
        assert ops[1][0] == "create"
    rec.reset()
    c.update_leader_and_isr(c.get_partition_states(list(states)), epoch, version)
    assert len(rec.multis) == 200
    assert all(len(ops) == 2 and ops[0] == ("check", "/kafka/controller_epoch", version) and ops[1][0] == "set"
               for ops in rec.multis)


def test_partition_parents_go_in_a_few_guarded_multis() -> None:
    zk = FakeZooKeeper()
    c, rec, epoch, version = controller(zk)
    states = new_states(c, 1, 1200, epoch, prefix="big")
    rec.reset()
    c.create_partition_states(states, version)
    parent_multis = [ops for ops in rec.multis if not any(op[1].endswith("/state") for op in ops)]
    # /brokers/topics/big0/partitions and its 1200 children: 1201 creates in chunks of PARENTS_PER_MULTI
    assert len(parent_multis) == 3
    assert all(ops[0] == ("check", "/kafka/controller_epoch", version) for ops in parent_multis)
    assert sum(len(ops) - 1 for ops in parent_multis) == 1201
    assert zk.stat(f"/kafka{TopicPartitionStateZNode.path('big0', 1199)}") is not None


def test_existing_parents_fall_back_to_one_create_each() -> None:
    zk = FakeZooKeeper()
    c, rec, epoch, version = controller(zk)
    c.create_topic_assignment("t", {p: [1] for p in range(10)})
    first = {("t", p): LeaderAndIsr(1, 0, [1], epoch, 0, 0) for p in range(3)}
    c.create_partition_states(first, version)
    # partition 3's parent exists already (written by someone else), 4..9 are new
    c.ensure_paths(TopicPartitionZNode.path("t", 3))
    more = {("t", p): LeaderAndIsr(1, 0, [1], epoch, 0, 0) for p in range(3, 10)}
    created = c.create_partition_states(more, version)
    assert all(isinstance(r, LeaderAndIsr) for r in created.values())
    assert set(c.get_partition_states([("t", p) for p in range(10)])) == {("t", p) for p in range(10)}


def test_a_stale_epoch_version_fails_the_whole_pipeline() -> None:
    zk = FakeZooKeeper()
    c, rec, epoch, version = controller(zk, max_in_flight_requests=4)
    states = new_states(c, 1, 50, epoch)
    c.create_partition_states(states, version)
    other, _ = client(zk)
    other.delete_controller(version)
    other.register_controller_and_increment_epoch(2)
    with pytest.raises(ControllerMovedError):
        c.update_leader_and_isr(c.get_partition_states(list(states)), epoch, version)
    assert rec.in_flight == 0  # every permit given back


def test_threads_share_the_in_flight_limit() -> None:
    zk = FakeZooKeeper()
    c, rec, epoch, version = controller(zk, max_in_flight_requests=4)
    states = new_states(c, 4, 100, epoch)
    c.create_partition_states(states, version)
    rec.reset()
    tps = list(states)
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def read(part: list[tuple[str, int]]) -> None:
        try:
            start.wait()
            for _ in range(5):
                assert len(c.get_partition_states(part)) == len(part)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=read, args=(tps[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert rec.max_in_flight <= 4 and rec.issued == 2000
