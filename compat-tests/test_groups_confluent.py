"""confluent-kafka (librdkafka) consumer groups against a real broker process: assignment with the
range, roundrobin and cooperative-sticky assignors, rebalance on join and leave, commit/restart/
resume, static membership, and group administration through the AdminClient."""
from __future__ import annotations

import time
import uuid
from typing import Callable, List, Set

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.waiting import wait_for

PARTITIONS = 6


def _topic(broker, partitions: int = PARTITIONS) -> str:
    name = f"grp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    return name


def _produce(broker, topic: str, values: List[str]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


class Member:
    """A consumer plus the rebalance callbacks it saw."""

    def __init__(self, broker, group: str, topic: str, assignor: str, commit_on_revoke: bool = False,
                 **extra: object) -> None:
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "partition.assignment.strategy": assignor,
                "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}
        conf.update(extra)
        self.consumer = Consumer(conf)
        self.assigns = 0
        self.revokes = 0
        self.messages: List[str] = []
        self.commit_on_revoke = commit_on_revoke
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, c: Consumer, parts: List[TopicPartition]) -> None:
        self.assigns += 1

    def _on_revoke(self, c: Consumer, parts: List[TopicPartition]) -> None:
        self.revokes += 1
        if self.commit_on_revoke and parts:
            # The usual pattern: commit what was processed before giving partitions away.
            try:
                c.commit(asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._NO_OFFSET:
                    raise

    def poll(self) -> None:
        m = self.consumer.poll(0.05)
        if m is None:
            return
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                return
            raise KafkaException(m.error())
        self.messages.append(m.value().decode())

    def partitions(self) -> Set[int]:
        return {tp.partition for tp in self.consumer.assignment()}


def _poll_until(members: List[Member], cond: Callable[[], bool], timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if cond():
            # keep polling briefly and re-check, so a condition met mid-rebalance does not count
            for _ in range(10):
                for m in members:
                    m.poll()
            if cond():
                return
    raise AssertionError(f"condition not reached; assignments: {[sorted(m.partitions()) for m in members]}")


def _balanced(members: List[Member], each: int) -> Callable[[], bool]:
    def check() -> bool:
        parts = [m.partitions() for m in members]
        union = set().union(*parts)
        return union == set(range(PARTITIONS)) and sum(map(len, parts)) == PARTITIONS and \
            all(len(p) == each for p in parts)
    return check


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_three_consumers_share_partitions_and_rebalance_on_join_and_leave(broker, assignor: str) -> None:
    topic = _topic(broker)
    group = f"g-{assignor}-{uuid.uuid4().hex[:6]}"
    members = [Member(broker, group, topic, assignor)]
    try:
        _poll_until(members, _balanced(members, 6))
        members += [Member(broker, group, topic, assignor) for _ in range(2)]
        _poll_until(members, _balanced(members, 2))  # rebalance on join: every partition exactly once
        assert all(m.assigns >= 1 for m in members)

        # consume everything exactly once across the group
        values = [f"v{i}" for i in range(120)]
        _produce(broker, topic, values)
        _poll_until(members, lambda: sum(len(m.messages) for m in members) >= len(values))
        got = [v for m in members for v in m.messages]
        assert sorted(got) == sorted(values)

        leaving = members.pop()
        leaving.consumer.close()  # sends LeaveGroup
        _poll_until(members, _balanced(members, 3))  # rebalance on leave
    finally:
        for m in members:
            m.consumer.close()


def test_commit_restart_resume_nothing_lost_or_repeated(broker) -> None:
    topic = _topic(broker)
    group = f"g-resume-{uuid.uuid4().hex[:6]}"
    first = [f"a{i}" for i in range(300)]
    second = [f"b{i}" for i in range(300)]

    members = [Member(broker, group, topic, "range") for _ in range(3)]
    _poll_until(members, _balanced(members, 2))
    _produce(broker, topic, first)
    _poll_until(members, lambda: sum(len(m.messages) for m in members) >= len(first))
    for m in members:
        m.consumer.commit(asynchronous=False)
    seen_first = sorted(v for m in members for v in m.messages)
    for m in members:
        m.consumer.close()
    assert seen_first == sorted(first)

    committed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    offsets = committed.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    committed.close()
    assert sum(tp.offset for tp in offsets) == len(first)

    _produce(broker, topic, second)  # while the group is down
    members = [Member(broker, group, topic, "range", commit_on_revoke=True) for _ in range(3)]
    try:
        _poll_until(members, lambda: sum(len(m.messages) for m in members) >= len(second))
        for m in members:  # a little longer: anything repeated would show up now
            for _ in range(10):
                m.poll()
        assert sorted(v for m in members for v in m.messages) == sorted(second)
    finally:
        for m in members:
            m.consumer.close()


def test_static_member_restart_does_not_rebalance(broker) -> None:
    topic = _topic(broker)
    group = f"g-static-{uuid.uuid4().hex[:6]}"
    static = {"session.timeout.ms": 30000}
    a = Member(broker, group, topic, "range", **{"group.instance.id": "a"}, **static)
    b = Member(broker, group, topic, "range", **{"group.instance.id": "b"}, **static)
    _poll_until([a, b], _balanced([a, b], 3))
    a_parts = a.partitions()
    b_assigns, b_revokes = b.assigns, b.revokes
    a.consumer.close()  # static members do not send LeaveGroup

    a2 = Member(broker, group, topic, "range", **{"group.instance.id": "a"}, **static)
    try:
        _poll_until([a2, b], lambda: a2.partitions() == a_parts and b.partitions() == set(range(6)) - a_parts)
        assert (b.assigns, b.revokes) == (b_assigns, b_revokes)  # b saw no rebalance
    finally:
        a2.consumer.close()
        b.consumer.close()


def test_admin_list_describe_delete_groups(broker) -> None:
    topic = _topic(broker)
    group = f"g-admin-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    members = [Member(broker, group, topic, "roundrobin") for _ in range(2)]
    try:
        _poll_until(members, _balanced(members, 3))
        listed = admin.list_consumer_groups(request_timeout=10).result()
        assert group in {g.group_id for g in listed.valid}
        stable = admin.list_consumer_groups(request_timeout=10, states={ConsumerGroupState.STABLE}).result()
        assert group in {g.group_id for g in stable.valid}
        empty = admin.list_consumer_groups(request_timeout=10, states={ConsumerGroupState.EMPTY}).result()
        assert group not in {g.group_id for g in empty.valid}

        desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        assert desc.state == ConsumerGroupState.STABLE
        assert desc.partition_assignor == "roundrobin"
        assert len(desc.members) == 2
        assigned = sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions)
        assert assigned == list(range(PARTITIONS))

        with pytest.raises(KafkaException) as exc:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result()
        assert exc.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        members[0].consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    finally:
        for m in members:
            m.consumer.close()

    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    assert desc.state == ConsumerGroupState.EMPTY
    admin.delete_consumer_groups([group], request_timeout=10)[group].result()
    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert group not in {g.group_id for g in listed.valid}
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert tp.offset < 0  # the committed offset went with the group
    finally:
        c.close()


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_committed_offsets_survive_broker_restart(broker, how: str) -> None:
    topic = _topic(broker)
    group = f"g-restart-{how}-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    wanted = [TopicPartition(topic, p, 10 + p, metadata=f"meta-{p}") for p in range(PARTITIONS)]
    c.commit(offsets=wanted, asynchronous=False)
    c.close()
    _settle(broker, topic)

    if how == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start()

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        c.close()
    assert [(tp.partition, tp.offset, tp.metadata) for tp in got] == \
        [(p, 10 + p, f"meta-{p}") for p in range(PARTITIONS)]
    _settle(broker, topic)


def _settle(broker, topic: str) -> None:
    """Wait until the broker serves ``topic`` (every partition led, in its metadata): its ZooKeeper topic refresh
    has finished, so stopping it next does not cut one short (a shutdown race outside the groups code)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def served() -> bool:
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        return (t is not None and t.error is None and len(t.partitions) == PARTITIONS
                and all(p.leader >= 0 and p.error is None for p in t.partitions.values()))
    wait_for(served, 30, f"the broker to serve the {PARTITIONS} partitions of {topic}")
