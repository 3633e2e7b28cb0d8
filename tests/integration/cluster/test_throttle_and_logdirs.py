"""Replication throttling and moves between log dirs, against real broker processes.

- A follower restarted with a backlog catches up no faster than ``leader/follower.replication.throttled.rate``
  allows for the replicas listed in ``leader/follower.replication.throttled.replicas``, and at full speed once the
  throttle is removed (AlterConfigs / IncrementalAlterConfigs on broker resources, as kafka-reassign-partitions
  sets them).
- AlterReplicaLogDirs (every version) moves a replica between a broker's two log dirs while acks=all producers
  keep writing: DescribeLogDirs shows the future replica while it moves, the files end up in the target dir,
  every acknowledged record stays readable; a broker killed mid-move resumes the move after its restart.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from confluent_kafka import Producer

from broker.protocol.api import ApiKey
from tests.harness.clients import consume_from_start
from tests.integration.broker.wire import RawClient
from tests.integration.cluster.conftest import ClusterView, wait_for
from tools.cluster import BrokerProcess

BROKER = 4
SET, DELETE = 0, 1
NONE, REPLICA_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, LOG_DIR_NOT_FOUND = 0, 9, 3, 57
LONG_MAX = 2 ** 63 - 1


def _call(broker: BrokerProcess, key: ApiKey, version: int, body: Dict[str, Any]) -> Any:
    with RawClient(broker.bootstrap, timeout_s=30) as c:
        return c.request(key, version, body)


def _alter_broker_configs(broker: BrokerProcess, entity: str, ops: Dict[str, Optional[str]]) -> None:
    """IncrementalAlterConfigs on a broker resource ("" = the cluster default); a None value deletes the key."""
    configs = [{"name": k, "config_operation": DELETE if v is None else SET, "value": v} for k, v in ops.items()]
    r = _call(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": BROKER, "resource_name": entity, "configs": configs}], "validate_only": False})
    assert [(x.error_code, x.error_message) for x in r.responses] == [(0, None)]


def _broker_config(broker: BrokerProcess, name: str) -> Optional[str]:
    r = _call(broker, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": BROKER, "resource_name": str(broker.broker_id), "configuration_keys": [name]}],
        "include_synonyms": False, "include_documentation": False})
    return {c.name: c.value for c in r.results[0].configs}.get(name)


def _log_dirs(broker: BrokerProcess, topic: str) -> Dict[Tuple[str, bool], Tuple[int, int]]:
    """(log dir, is future) -> (size, offset lag) of partition 0 of ``topic``, from DescribeLogDirs v4."""
    r = _call(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": topic, "partitions": [0]}]})
    out = {}
    for res in r.results:
        assert res.error_code == 0
        for t in res.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == 0:
                    out[(res.log_dir, bool(p.is_future_key))] = (int(p.partition_size), int(p.offset_lag))
    return out


def _replica_size(broker: BrokerProcess, topic: str) -> int:
    return sum(size for (_, future), (size, _) in _log_dirs(broker, topic).items() if not future)


def _produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 65536})
    errors: List[Any] = []
    for i in range(n):
        p.produce(topic, b"%07d" % i + b"x" * (size - 7), partition=0,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]


# ---------------------------------------------------------------------------------------------- throttling
RATE = 200_000  # bytes/s


def test_throttled_catch_up_after_a_restart(new_cluster: Callable[..., Any]) -> None:
    """Follower 1 comes back to a ~3 MB backlog with both throttles set: it catches up at about RATE bytes/s
    (never above twice that), and completes once the rates are removed."""
    cluster = new_cluster(2, overrides={"replica.fetch.max.bytes": "65536", "replica.fetch.wait.max.ms": "200"})
    view = ClusterView(cluster.bootstrap)
    topic = "throttled"
    view.admin.create_topics([_new_topic(topic, {"leader.replication.throttled.replicas": "0:0",
                                                 "follower.replication.throttled.replicas": "0:1"})],
                             operation_timeout=30)[topic].result(40)
    wait_for(lambda: sorted(view.partitions(topic)[0][2]) == [0, 1], 60, "both replicas in sync")
    b0, b1 = cluster.brokers
    assert b1.stop() == 0
    wait_for(lambda: view.partitions(topic)[0][2] == [0], 60, "broker 1 out of the ISR")
    _produce(b0.bootstrap, topic, 3000, 1000)
    backlog = _replica_size(b0, topic)
    assert backlog > 2_900_000
    # As kafka-reassign-partitions --throttle does: the leader's rate on the leader, the follower's on the follower
    # (here as the cluster default, which broker 1 reads when it starts).
    _alter_broker_configs(b0, "0", {"leader.replication.throttled.rate": str(RATE)})
    _alter_broker_configs(b0, "", {"follower.replication.throttled.rate": str(RATE)})
    assert _broker_config(b0, "leader.replication.throttled.rate") == str(RATE)
    assert _broker_config(b0, "follower.replication.throttled.rate") == str(RATE)
    b1.start()
    first = wait_for(lambda: _sample(b1, topic, lambda s: s > 0), 60, "the follower to start copying")
    time.sleep(8)
    last = _sample(b1, topic, lambda s: True)
    rate = (last[1] - first[1]) / (last[0] - first[0])
    print(f"throttled catch-up: {last[1] - first[1]} bytes in {last[0] - first[0]:.1f} s = {rate:.0f} B/s "
          f"(throttle {RATE} B/s, backlog {backlog} B)")
    assert rate <= 2 * RATE, f"{rate:.0f} B/s with a {RATE} B/s throttle"
    assert rate >= RATE / 5, f"{rate:.0f} B/s: the throttled catch-up should still progress"
    assert last[1] < backlog and 1 not in view.partitions(topic)[0][2]  # still catching up
    # Removing the throttles (per broker and the default) lets it finish at once.
    _alter_broker_configs(b0, "0", {"leader.replication.throttled.rate": None})
    _alter_broker_configs(b0, "", {"follower.replication.throttled.rate": None})
    t0 = time.monotonic()
    wait_for(lambda: sorted(view.partitions(topic)[0][2]) == [0, 1], 60, "broker 1 back in the ISR")
    wait_for(lambda: _replica_size(b1, topic) == _replica_size(b0, topic), 30, "identical sizes")
    print(f"unthrottled: the rest of the backlog in {time.monotonic() - t0:.1f} s")


def _new_topic(name: str, config: Dict[str, str], replicas: Tuple[int, ...] = (0, 1)) -> Any:
    from confluent_kafka.admin import NewTopic
    return NewTopic(name, 1, replica_assignment=[list(replicas)], config=config)


def _sample(broker: BrokerProcess, topic: str, ok: Callable[[int], bool]) -> Optional[Tuple[float, int]]:
    size = _replica_size(broker, topic)
    return (time.monotonic(), size) if ok(size) else None


# ---------------------------------------------------------------------------------------------- log dirs
class BackgroundProducer:
    """acks=all, idempotent, one record at a time-ish; remembers (offset, value) of every acknowledged record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 2, "batch.size": 65536, "message.timeout.ms": 120000})
        self.topic = topic
        self.acked: List[Tuple[int, bytes]] = []
        self.errors: List[Any] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err: Any, msg: Any) -> None:
        if err:
            self.errors.append(err)
        else:
            self.acked.append((msg.offset(), msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.p.produce(self.topic, b"live-%08d" % i + b"y" * 300, partition=0, on_delivery=self._cb)
            i += 1
            self.p.poll(0.005)
        self.p.flush(120)

    def start(self) -> "BackgroundProducer":
        self._t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._t.join(180)


def _alter_dir(broker: BrokerProcess, version: int, moves: Dict[str, List[Tuple[str, int]]]
               ) -> Dict[Tuple[str, int], int]:
    r = _call(broker, ApiKey.ALTER_REPLICA_LOG_DIRS, version, {"dirs": [
        {"path": path, "topics": [{"name": t, "partitions": [p]} for t, p in tps]} for path, tps in moves.items()]})
    return {(t.topic_name, p.partition_index): p.error_code for t in r.results for p in t.partitions}


def _dirs_on_disk(dirs: List[Path], topic: str) -> List[Tuple[str, str]]:
    return sorted((d.name, n) for d in dirs for n in os.listdir(d) if n.startswith(topic + "-"))


def test_move_between_log_dirs_under_acks_all_produce(new_cluster: Callable[..., Any], tmp_path: Path) -> None:
    a, b = tmp_path / "b0-dir-a", tmp_path / "b0-dir-b"
    cluster = new_cluster(2, overrides={"log.segment.delete.delay.ms": "500", "log.segment.bytes": "262144"},
                          broker_overrides={0: {"log.dirs": f"{a},{b}"}})
    view = ClusterView(cluster.bootstrap)
    topic = "moving"
    view.admin.create_topics([_new_topic(topic, {})], operation_timeout=30)[topic].result(40)
    wait_for(lambda: sorted(view.partitions(topic)[0][2]) == [0, 1], 60, "both replicas in sync")
    b0 = cluster.brokers[0]
    _produce(b0.bootstrap, topic, 3000, 500)  # ~1.5 MB before the move
    where = _log_dirs(b0, topic)
    assert len(where) == 1
    (src, _), = where
    dst = str(b) if src == str(a) else str(a)
    src_dir, dst_dir = Path(src), Path(dst)
    # Errors as Kafka gives them (v0, v1): a path not in log.dirs; a partition this broker does not host.
    view.admin.create_topics([_new_topic("on-b1", {}, (1,))], operation_timeout=30)["on-b1"].result(40)
    wait_for(lambda: view.partitions("on-b1")[0][0] == 1, 60, "a topic on broker 1 only")
    assert _alter_dir(b0, 0, {str(tmp_path / "elsewhere"): [(topic, 0)]}) == {(topic, 0): LOG_DIR_NOT_FOUND}
    assert _alter_dir(b0, 1, {dst: [("on-b1", 0), ("later", 0)]}) == {
        ("on-b1", 0): REPLICA_NOT_AVAILABLE, ("later", 0): UNKNOWN_TOPIC_OR_PARTITION}
    # ... but the dir is remembered: the replica is created there when it comes (not in the emptier dir)
    assert _alter_dir(b0, 1, {src: [("later", 0)]}) == {("later", 0): UNKNOWN_TOPIC_OR_PARTITION}
    view.admin.create_topics([_new_topic("later", {}, (0,))], operation_timeout=30)["later"].result(40)
    wait_for(lambda: (src_dir / "later-0").is_dir(), 30, "the new replica in the requested dir")
    assert not (dst_dir / "later-0").exists()
    # Copy slowly enough to see the future replica (replica.alter.log.dirs.io.max.bytes.per.second).
    _alter_broker_configs(b0, "0", {"replica.alter.log.dirs.io.max.bytes.per.second": "300000"})
    producer = BackgroundProducer(cluster.bootstrap, topic).start()
    wait_for(lambda: len(producer.acked) >= 50, 60, "acknowledged records before the move")
    assert _alter_dir(b0, 2, {dst: [(topic, 0)]}) == {(topic, 0): NONE}
    moving = wait_for(lambda: _future_seen(b0, topic, dst), 30, "the future replica in DescribeLogDirs")
    print(f"moving: {moving}")
    on_disk = _dirs_on_disk([src_dir, dst_dir], topic)
    assert (src_dir.name, f"{topic}-0") in on_disk
    assert any(d == dst_dir.name and n.startswith(f"{topic}-0.") and n.endswith("-future") for d, n in on_disk)
    _alter_broker_configs(b0, "0", {"replica.alter.log.dirs.io.max.bytes.per.second": None})
    wait_for(lambda: list(_log_dirs(b0, topic)) == [(dst, False)], 60, "the move to finish")
    wait_for(lambda: _dirs_on_disk([src_dir, dst_dir], topic) == [(dst_dir.name, f"{topic}-0")], 30,
             "only the moved log on disk")
    assert any(n.endswith(".log") for n in os.listdir(dst_dir / f"{topic}-0"))
    n = len(producer.acked)
    wait_for(lambda: len(producer.acked) >= n + 50, 60, "acknowledged records after the move")

    # Move back, and kill the broker in the middle of it: after the restart the move resumes and completes.
    # (The throttle is the cluster default this time, so broker 1 can lift it while broker 0 is down.)
    b1 = cluster.brokers[1]
    _alter_broker_configs(b1, "", {"replica.alter.log.dirs.io.max.bytes.per.second": "100000"})
    wait_for(lambda: _broker_config(b0, "replica.alter.log.dirs.io.max.bytes.per.second") == "100000", 30,
             "broker 0 to see the new default")
    assert _alter_dir(b0, 2, {src: [(topic, 0)]}) == {(topic, 0): NONE}
    wait_for(lambda: _future_seen(b0, topic, src), 30, "the second move under way")
    b0.kill()
    _alter_broker_configs(b1, "", {"replica.alter.log.dirs.io.max.bytes.per.second": None})
    disk = _dirs_on_disk([src_dir, dst_dir], topic)
    assert (dst_dir.name, f"{topic}-0") in disk and len(disk) == 2, disk
    b0.start()
    wait_for(lambda: list(_log_dirs(b0, topic)) == [(src, False)], 90, "the resumed move to finish")
    wait_for(lambda: _dirs_on_disk([src_dir, dst_dir], topic) == [(src_dir.name, f"{topic}-0")], 30,
             "only the moved-back log on disk")
    wait_for(lambda: sorted(view.partitions(topic)[0][2]) == [0, 1], 60, "broker 0 back in the ISR")
    n = len(producer.acked)
    wait_for(lambda: len(producer.acked) >= n + 50, 90, "acknowledged records after the restart")
    producer.stop()
    assert not producer.errors, producer.errors[:5]
    acked = sorted(producer.acked)
    assert len({o for o, _ in acked}) == len(acked)
    total = 3000 + len(acked)
    got = consume_from_start(cluster.bootstrap, [(topic, 0)], total, timeout_s=120)
    by_offset = {m.offset(): m.value() for m in got}
    assert len(got) == total and sorted(by_offset) == list(range(total))
    missing = [(o, v) for o, v in acked if by_offset.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged records not read back, e.g. {missing[:3]}"
    print(f"{len(acked)} acknowledged records during the moves, all read back")


def _future_seen(broker: BrokerProcess, topic: str, target: str) -> Optional[Dict[Tuple[str, bool], Tuple[int, int]]]:
    d = _log_dirs(broker, topic)
    return d if (target, True) in d and any(not f for _, f in d) else None
