"""KafkaZkClient against a real ZooKeeper (fixture `zk_chroot`: a fresh chroot per test)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Iterator

import pytest
from kazoo.client import KazooClient

from broker.config import Endpoint
from broker.zk import BrokerIdInUseError, KafkaZkClient, LeaderAndIsr, TopicExistsError, ZkUnavailableError
from tests.harness.zookeeper import free_port

WAIT = 30.0  # upper bound for events that normally arrive within a few seconds (not an assertion on speed)
EP = [Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]


@pytest.fixture
def clients(zk_chroot: str) -> Iterator[list[KafkaZkClient]]:
    made: list[KafkaZkClient] = []
    yield made
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def new_client(clients: list[KafkaZkClient], connect: str, **kw: int) -> KafkaZkClient:
    kw.setdefault("session_timeout_ms", 4000)
    c = KafkaZkClient(connect, **kw)
    c.start()
    clients.append(c)
    return c


def test_start_creates_chroot_and_persistent_paths(zookeeper: str, zk_chroot: str, clients: list) -> None:
    new_client(clients, zk_chroot)
    chroot = zk_chroot[len(zookeeper):]
    raw = KazooClient(hosts=zookeeper)
    raw.start(10)
    try:
        for p in ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics", "/config/changes",
                  "/admin/delete_topics", "/isr_change_notification", "/latest_producer_id_block", "/consumers"):
            assert raw.exists(chroot + p), p
        assert not raw.exists("/brokers/ids/0")  # nothing leaks outside the chroot
    finally:
        raw.stop()
        raw.close()


def test_cluster_id_created_once_and_reused(zk_chroot: str, clients: list) -> None:
    a = new_client(clients, zk_chroot)
    b = new_client(clients, zk_chroot)
    cid = a.get_or_create_cluster_id()
    assert len(cid) == 22 and "=" not in cid
    assert b.get_or_create_cluster_id() == cid
    data, _ = b.kazoo.get("/cluster/id")
    assert json.loads(data) == {"version": "1", "id": cid}


def test_broker_registration_json_is_kafka_v5(zk_chroot: str, clients: list) -> None:
    c = new_client(clients, zk_chroot)
    eps = [Endpoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"), Endpoint("INTERNAL", "host1", 9093, "PLAINTEXT")]
    czxid = c.register_broker(7, eps, rack="r1")
    data, stat = c.kazoo.get("/brokers/ids/7")
    assert stat.ephemeralOwner == c.session_id and stat.czxid == czxid
    obj = json.loads(data)
    assert isinstance(obj.pop("timestamp"), str)
    assert obj == {"version": 5, "host": "host1", "port": 9092, "jmx_port": -1,
                   "endpoints": ["PLAINTEXT://host1:9092", "INTERNAL://host1:9093"],
                   "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
                   "rack": "r1", "features": {}}
    live = c.get_live_brokers()
    assert list(live) == [7] and live[7].endpoints == eps and live[7].rack == "r1"


def test_duplicate_broker_id_refused_while_first_alive(zk_chroot: str, clients: list) -> None:
    first = new_client(clients, zk_chroot)
    first.register_broker(1, EP)
    second = new_client(clients, zk_chroot, stale_registration_wait_ms=1000)
    with pytest.raises(BrokerIdInUseError) as e:
        second.register_broker(1, [Endpoint("PLAINTEXT", "other", 9999, "PLAINTEXT")])
    msg = str(e.value)
    assert "Broker id 1" in msg and "PLAINTEXT://localhost:9092" in msg and "\n" not in msg
    _, stat = first.kazoo.get("/brokers/ids/1")
    assert stat.ephemeralOwner == first.session_id


_CRASHER = r"""
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=2.0)
zk.start(10)
zk.create("/brokers/ids/3", b'{"version":5,"host":"old","port":1,"jmx_port":-1,"timestamp":"0","endpoints":["PLAINTEXT://old:1"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"rack":null,"features":{}}', ephemeral=True)
print("ready", flush=True)
sys.stdin.read()
"""


def test_stale_registration_of_crashed_process_is_waited_for(zk_chroot: str, clients: list) -> None:
    c = new_client(clients, zk_chroot)  # creates chroot and /brokers/ids first
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen([sys.executable, "-c", _CRASHER, zk_chroot], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        proc.kill()  # crash: the session stays alive in ZooKeeper until it times out (~2 s)
        proc.wait()
        assert c.kazoo.exists("/brokers/ids/3") is not None
        c.register_broker(3, EP)  # waits for the stale node to expire, then registers
    finally:
        if proc.poll() is None:
            proc.kill()
    data, stat = c.kazoo.get("/brokers/ids/3")
    assert stat.ephemeralOwner == c.session_id
    assert json.loads(data)["endpoints"] == ["PLAINTEXT://localhost:9092"]


def _expire_session(zookeeper_hosts: str, client: KafkaZkClient) -> None:
    """Known ZooKeeper trick: attach a second client to the same session and close it."""
    chroot_less = zookeeper_hosts
    other = KazooClient(hosts=chroot_less, client_id=client.kazoo.client_id)
    other.start(10)
    other.stop()
    other.close()


def test_reregistration_after_session_expiry(zookeeper: str, zk_chroot: str, clients: list) -> None:
    c = new_client(clients, zk_chroot, session_timeout_ms=2000)
    c.register_broker(5, EP)
    old_session = c.session_id
    renewed = threading.Event()
    c.on_new_session(renewed.set)
    _expire_session(zookeeper, c)
    assert renewed.wait(WAIT), "no new session after forced expiry"
    assert c.session_id != old_session
    _, stat = c.kazoo.get("/brokers/ids/5")
    assert stat.ephemeralOwner == c.session_id


def test_controller_election(zk_chroot: str, clients: list) -> None:
    a = new_client(clients, zk_chroot)
    b = new_client(clients, zk_chroot)
    assert a.try_elect_controller(1) == 1
    assert a.try_elect_controller(1) == 1  # asking again on the same session keeps the epoch
    assert b.try_elect_controller(2) is None
    assert b.get_controller_id() == 1
    data, _ = b.kazoo.get("/controller")
    obj = json.loads(data)
    assert obj["version"] == 2 and obj["brokerid"] == 1 and obj["kraftControllerEpoch"] == -1
    seen: list = []
    changed = threading.Event()

    def on_controller(cid: int | None) -> None:
        seen.append(cid)
        if cid is None:
            changed.set()

    b.watch_controller(on_controller)
    a.close()
    clients.remove(a)
    assert changed.wait(WAIT)
    assert b.try_elect_controller(2) == 2
    assert b.kazoo.get("/controller_epoch")[0] == b"2"
    assert seen[0] == 1


def test_topic_lifecycle(zk_chroot: str, clients: list) -> None:
    c = new_client(clients, zk_chroot)
    c.register_broker(1, EP)
    assert c.try_elect_controller(1) == 1
    topics_seen: list[set[str]] = []
    got_topic = threading.Event()

    def on_topics(names: set[str]) -> None:
        topics_seen.append(names)
        if "t1" in names:
            got_topic.set()

    c.watch_topics(on_topics)
    tid = c.create_topic("t1", {0: [1, 2], 1: [2, 1]}, {"cleanup.policy": "compact"})
    with pytest.raises(TopicExistsError):
        c.create_topic("t1", {0: [1]}, {})
    assert got_topic.wait(WAIT)
    assert c.get_all_topics() == {"t1"}
    assert c.get_topic("t1") == (tid, {0: [1, 2], 1: [2, 1]})
    assert c.get_topic("nope") is None
    obj = json.loads(c.kazoo.get("/brokers/topics/t1")[0])
    assert obj == {"version": 3, "topic_id": tid, "partitions": {"0": [1, 2], "1": [2, 1]},
                   "adding_replicas": {}, "removing_replicas": {}}
    # leader = first live replica (2 is not registered), ISR = live replicas
    assert json.loads(c.kazoo.get("/brokers/topics/t1/partitions/1/state")[0]) == {
        "version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1]}
    st = c.get_partition_state("t1", 0)
    assert st is not None and (st.leader, st.isr, st.leader_epoch) == (1, [1], 0)
    # compare-and-set
    new = LeaderAndIsr(1, 1, [1, 2], 1)
    v = c.set_partition_state("t1", 0, new, st.zk_version)
    assert v == st.zk_version + 1
    assert c.set_partition_state("t1", 0, new, st.zk_version) is None
    # configs + change notification
    assert c.get_topic_config("t1") == {"cleanup.policy": "compact"}
    changes: list[list[str]] = []
    changed = threading.Event()
    c.watch_config_changes(lambda paths: (changes.append(paths), changed.set()))
    c.set_topic_config("t1", {"retention.ms": "1000"})
    assert changed.wait(WAIT)
    assert changes == [["topics/t1"]]
    assert json.loads(c.kazoo.get("/config/topics/t1")[0]) == {"version": 1, "config": {"retention.ms": "1000"}}
    notes = c.kazoo.get_children("/config/changes")
    assert len(notes) == 1 and notes[0].startswith("config_change_") and len(notes[0]) == len("config_change_") + 10
    assert json.loads(c.kazoo.get("/config/changes/" + notes[0])[0]) == {"version": 2, "entity_path": "topics/t1"}
    # add partitions
    c.add_partitions("t1", {2: [1]})
    assert c.get_topic("t1") == (tid, {0: [1, 2], 1: [2, 1], 2: [1]})
    assert c.get_partition_state("t1", 2) is not None
    # deletion
    c.mark_topic_for_deletion("t1")
    assert c.topics_marked_for_deletion() == {"t1"}
    c.delete_topic_znodes("t1")
    assert c.get_all_topics() == set() and c.topics_marked_for_deletion() == set()
    assert c.get_topic_config("t1") == {}


def test_entity_configs(zk_chroot: str, clients: list) -> None:
    c = new_client(clients, zk_chroot)
    c.set_entity_config("brokers", "<default>", {"log.retention.bytes": "5"})
    c.set_entity_config("users", "alice/clients/app1", {"producer_byte_rate": "1024"})
    assert c.get_entity_config("brokers", "<default>") == {"log.retention.bytes": "5"}
    assert c.get_entity_config("users", "alice/clients/app1") == {"producer_byte_rate": "1024"}
    assert c.get_entity_config("brokers", "9") == {}


def test_producer_id_blocks(zk_chroot: str, clients: list) -> None:
    a = new_client(clients, zk_chroot)
    assert a.allocate_producer_id_block(1) == (0, 999)
    assert a.allocate_producer_id_block(1) == (1000, 1999)
    assert json.loads(a.kazoo.get("/latest_producer_id_block")[0]) == {
        "version": 1, "broker": 1, "block_start": "1000", "block_end": "1999"}
    b = new_client(clients, zk_chroot)
    results: list[tuple[int, int]] = []
    lock = threading.Lock()

    def worker(client: KafkaZkClient, broker_id: int) -> None:
        for _ in range(5):
            blk = client.allocate_producer_id_block(broker_id)
            with lock:
                results.append(blk)

    threads = [threading.Thread(target=worker, args=(cl, i)) for i, cl in enumerate([a, b, a, b])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts = sorted(s for s, _ in results)
    assert starts == [2000 + 1000 * i for i in range(20)]
    assert all(e == s + 999 for s, e in results)


def test_watch_brokers(zk_chroot: str, clients: list) -> None:
    a = new_client(clients, zk_chroot)
    b = new_client(clients, zk_chroot)
    states: list[set[int]] = []
    cond = threading.Condition()

    def on_brokers(live: dict) -> None:
        with cond:
            states.append(set(live))
            cond.notify_all()

    a.watch_brokers(on_brokers)
    b.register_broker(2, EP)
    with cond:
        assert cond.wait_for(lambda: states and states[-1] == {2}, WAIT)
    b.close()
    clients.remove(b)
    with cond:
        assert cond.wait_for(lambda: states[-1] == set(), WAIT)


def test_unreachable_zookeeper_raises_naming_address() -> None:
    port = free_port()
    c = KafkaZkClient(f"127.0.0.1:{port}/kafka", session_timeout_ms=6000, connection_timeout_ms=1000)
    with pytest.raises(ZkUnavailableError) as e:
        c.start()
    assert f"127.0.0.1:{port}/kafka" in str(e.value)
    assert "Timed out waiting for connection while in state: CONNECTING" in str(e.value)  # Kafka's words


def test_generated_broker_ids_and_isr_notifications(zk_chroot: str, clients: list) -> None:
    c = new_client(clients, zk_chroot)
    first = c.generate_broker_id(1000)
    assert first > 1000 and c.generate_broker_id(1000) == first + 1
    c.propagate_isr_changes([("t", 0), ("t", 1)])
    (child,) = c.kazoo.get_children("/isr_change_notification")
    assert child.startswith("isr_change_")
    assert json.loads(c.kazoo.get("/isr_change_notification/" + child)[0]) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}


def test_watch_topic_sees_added_partitions(zk_chroot: str, clients: list) -> None:
    c = new_client(clients, zk_chroot)
    c.create_topic("w", {0: [1]}, {}, live_brokers={1})
    seen: list = []
    cond = threading.Condition()

    def on_topic(value: object) -> None:
        with cond:
            seen.append(value)
            cond.notify_all()

    c.watch_topic("w", on_topic)
    c.add_partitions("w", {1: [1]})
    with cond:
        assert cond.wait_for(lambda: seen and seen[-1] is not None and len(seen[-1][1]) == 2, WAIT)
    c.delete_topic_znodes("w")
    with cond:
        assert cond.wait_for(lambda: seen[-1] is None, WAIT)
