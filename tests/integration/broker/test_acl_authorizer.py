"""The ACL authorizer end to end, on a real broker process, with stock clients and Kafka's own kafka-acls tool.

On PLAINTEXT every client is User:ANONYMOUS, so the test runs in two phases on one ZooKeeper chroot and log dir:

1. the broker starts with ``super.users=User:ANONYMOUS``: as a super user the test creates topics, data and ACLs
   for User:ANONYMOUS (CreateAcls at every version, and Kafka 3.9.1's ``kafka.admin.AclCommand``);
2. the broker restarts without super users (``allow.everyone.if.no.acl.found=false``): it loads those ACLs from
   ZooKeeper and the same principal is now held to them. confluent-kafka clients produce, consume in a group and
   administer; what the ACLs do not allow is refused with Kafka's error codes (DENY over ALLOW included); an ACL
   written straight into ZooKeeper in Kafka's format, with its change notification, takes effect without restart;
   refusals are audited in ``kafka-authorizer.log``.

The broker's own inter-broker requests (the controller's LeaderAndIsr/UpdateMetadata to itself) also come as
User:ANONYMOUS here, so the ACLs grant it ClusterAction on the cluster, as a Kafka deployment must for its brokers.
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.harness.broker_process import BrokerProcess, free_port
from tests.harness.cluster_ops import run_kafka_tool
from tests.integration.broker.wire import RawClient

ANON = "User:ANONYMOUS"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE, CLUSTER_ACTION = 3, 4, 5, 8, 9
ALLOW, DENY = 3, 2


def creation(rt: int, name: str, op: int, pattern: int = LITERAL, perm: int = ALLOW,
             principal: str = ANON) -> Dict[str, Any]:
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
            "host": "*", "operation": op, "permission_type": perm}


ANY_FILTER = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}

#: What User:ANONYMOUS may do once it is no longer a super user.
ACLS = [
    creation(CLUSTER, "kafka-cluster", CLUSTER_ACTION),  # the broker's own inter-broker requests
    creation(TOPIC, "app-", WRITE, PREFIXED),
    creation(TOPIC, "app-", READ, PREFIXED),
    creation(TOPIC, "app-secret", READ, perm=DENY),  # DENY wins over the prefixed ALLOW
    creation(GROUP, "app-group", READ),
]


class Broker:
    """One broker process of the test (phase 1 and phase 2 share its chroot, log dir, port and log files)."""

    def __init__(self, workdir: Path, zk_connect: str) -> None:
        self.workdir = workdir
        self.zk_connect = zk_connect
        self.port = free_port()
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.proc: Optional[BrokerProcess] = None

    def start(self, **overrides: str) -> BrokerProcess:
        props = {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "false",
                 "auto.create.topics.enable": "false"}
        props.update(overrides)
        self.proc = BrokerProcess(self.workdir, self.zk_connect, broker_id=0, port=self.port, overrides=props)
        self.proc.start(extra_env={"BROKER_LOG_DIR": str(self.logs)})
        return self.proc

    def stop(self) -> None:
        assert self.proc is not None
        rc = self.proc.stop()
        out = self.proc.output()
        assert "Traceback" not in out, out[-6000:]
        assert rc == 0, f"broker exited with {rc}:\n{out[-3000:]}"
        self.proc = None


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(Path(tmp_path_factory.mktemp("acl")), f"{zookeeper}/acl-{uuid.uuid4().hex[:10]}")
    try:
        yield b
    finally:
        if b.proc is not None:
            b.proc.kill()


def produce(bootstrap: str, topic: str, value: bytes, **conf: Any) -> Optional[KafkaError]:
    """One record with acks=all; the delivery error (None: delivered)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000, **conf})
    errors: List[Optional[KafkaError]] = []
    p.produce(topic, value=value, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(20)
    assert errors, f"no delivery report for {topic}"
    return errors[0]


def consume_group(bootstrap: str, topic: str, group: str, expected: int,
                  timeout_s: float = 30.0) -> List[Any]:
    """Subscribe in a group and read `expected` records (commits on close); raises KafkaException on an error."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 10000})
    c.subscribe([topic])
    got: List[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for m in c.consume(10, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                got.append(m)
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def eventually_produces(bootstrap: str, topic: str, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while produce(bootstrap, topic, b"allowed now") is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def acl_tool(bootstrap: str, *args: str) -> str:
    out = run_kafka_tool("kafka.admin.AclCommand", ["--bootstrap-server", bootstrap, *args])
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def describe_all(c: RawClient, version: int = 3) -> Any:
    body = dict(ANY_FILTER)
    if version == 0:
        body["pattern_type_filter"] = LITERAL  # (v0 carries none: literal patterns only)
    return c.request(ApiKey.DESCRIBE_ACLS, version, body)


@pytest.fixture(scope="module")
def acls_set_up(broker: Broker) -> Broker:
    """Phase 1, once per module (phase 2 depends on it even when run alone)."""
    super_user_sets_up_acls(broker)
    return broker


def test_phase1_super_user_sets_up_acls(acls_set_up: Broker) -> None:
    assert acls_set_up.proc is None  # set up by the fixture, broker stopped cleanly


def super_user_sets_up_acls(broker: Broker) -> None:
    b = broker.start(**{"super.users": ANON})
    with RawClient(b.bootstrap) as c:
        created = c.request(ApiKey.CREATE_ACLS, 3, {"creations": ACLS})
        assert [r.error_code for r in created.results] == [0] * len(ACLS)
        bad = c.request(ApiKey.CREATE_ACLS, 3, {"creations": [creation(CLUSTER, "not-the-cluster", READ),
                                                             creation(TOPIC, "a/b", READ)]})
        assert [(r.error_code, r.error_message) for r in bad.results] == [
            (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (ErrorCode.INVALID_REQUEST, "Failed to create ACL")]
        # every version of the three ACL APIs (v0-1 encode no pattern type: literal patterns only)
        for v in range(4):
            extra = creation(GROUP, f"v{v}-group", DESCRIBE)
            assert c.request(ApiKey.CREATE_ACLS, v, {"creations": [extra]}).results[0].error_code == 0
            d = describe_all(c, v)
            assert d.error_code == 0
            names = {r.resource_name for r in d.resources}
            assert f"v{v}-group" in names and "kafka-cluster" in names
            assert ("app-" in names) == (v >= 1)
            gone = c.request(ApiKey.DELETE_ACLS, v, {"filters": [dict(
                ANY_FILTER, resource_type_filter=GROUP, resource_name_filter=f"v{v}-group",
                pattern_type_filter=LITERAL)]})
            assert [m.resource_name for m in gone.filter_results[0].matching_acls] == [f"v{v}-group"]
        d = describe_all(c)
        assert sorted((r.resource_type, r.resource_name, r.pattern_type, len(r.acls)) for r in d.resources) == [
            (TOPIC, "app-", PREFIXED, 2), (TOPIC, "app-secret", LITERAL, 1), (GROUP, "app-group", LITERAL, 1),
            (CLUSTER, "kafka-cluster", LITERAL, 1)]

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for name, fut in admin.create_topics([NewTopic(t, 1, 1) for t in ("app-orders", "app-secret", "other",
                                                                      "later", "zk-events")]).items():
        fut.result(30)
    for topic in ("app-orders", "app-secret", "other"):
        assert produce(b.bootstrap, topic, b"from-super-user") is None

    # Kafka's own tool against this broker: list, add, remove
    listed = acl_tool(b.bootstrap, "--list", "--topic", "app-secret")
    assert "User:ANONYMOUS" in listed and "DENY" in listed and "READ" in listed
    acl_tool(b.bootstrap, "--add", "--allow-principal", "User:tool", "--operation", "Describe", "--group", "tool-g")
    with RawClient(b.bootstrap) as c:
        assert ("tool-g", "User:tool") in {(r.resource_name, a.principal) for r in describe_all(c).resources
                                          for a in r.acls}
    acl_tool(b.bootstrap, "--remove", "--force", "--allow-principal", "User:tool", "--operation", "Describe",
             "--group", "tool-g")
    with RawClient(b.bootstrap) as c:
        assert "tool-g" not in {r.resource_name for r in describe_all(c).resources}
    broker.stop()


def test_phase2_acls_hold_without_super_user(acls_set_up: Broker) -> None:
    broker = acls_set_up
    b = broker.start()  # no super.users: User:ANONYMOUS gets exactly what the ACLs grant
    boot = b.bootstrap
    # produce: WRITE on the prefix, idempotent producers included (KIP-679: WRITE on some topic suffices)
    assert produce(boot, "app-orders", b"one", **{"enable.idempotence": True}) is None
    err = produce(boot, "other", b"nope")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # consume in a group allowed to READ; another group is refused
    got = consume_group(boot, "app-orders", "app-group", 2)
    assert [m.value() for m in got] == [b"from-super-user", b"one"]
    with pytest.raises(KafkaException) as refused:
        consume_group(boot, "app-orders", "intruders", 1, timeout_s=15)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # DENY over ALLOW: app-secret may be written (prefix ALLOW) but not read (literal DENY)
    assert produce(boot, "app-secret", b"write-only") is None
    with RawClient(boot) as c:
        f = c.request(ApiKey.FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
            {"topic": "app-secret", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                    "partition_max_bytes": 100000}]}]})
        assert f.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        p = c.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "other", "partition_data": [{"index": 0, "records": build_batch([(None, b"raw")])}]}]})
        assert p.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        # metadata: only describable topics, named ones refused without saying whether they exist
        everything = c.request(ApiKey.METADATA, 12, {"topics": None})
        assert sorted(t.name for t in everything.topics) == ["app-orders", "app-secret"]
        named = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "other"}, {"name": "no-such-topic"}]})
        assert [(t.name, t.error_code) for t in named.topics] == [
            ("other", ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("no-such-topic", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
        # administration needs cluster (or topic) permissions this principal lacks
        assert c.request(ApiKey.DESCRIBE_ACLS, 3, ANY_FILTER).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert c.request(ApiKey.CREATE_ACLS, 3, {"creations": [creation(TOPIC, "other", READ)]}).results[0] \
            .error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        logdirs = c.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
        assert logdirs.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    admin = AdminClient({"bootstrap.servers": boot})
    fut = admin.create_topics([NewTopic("app-new", 1, 1)])["app-new"]
    with pytest.raises(KafkaException) as create_refused:
        fut.result(30)
    assert create_refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # An ACL written straight into ZooKeeper, as a Kafka broker or kafka-acls --authorizer-properties does,
    # reaches this broker through /kafka-acl-changes without a restart.
    assert produce(boot, "later", b"refused") is not None
    from kazoo.client import KazooClient
    hosts, chroot = broker.zk_connect.split("/", 1)
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=10)
    try:
        zk.create(f"/{chroot}/kafka-acl/Topic/later", json.dumps({"version": 1, "acls": [
            {"principal": ANON, "permissionType": "Allow", "operation": "Write", "host": "*"}]}).encode(),
            makepath=True)
        zk.create(f"/{chroot}/kafka-acl-changes/acl_changes_", b"TOPIC:later", sequence=True)
    finally:
        zk.stop()
        zk.close()
    assert eventually_produces(boot, "later"), "the ACL written in ZooKeeper was not applied"

    # Kafka 3.9.1's own kafka-acls working on ZooKeeper directly (--authorizer-properties, its AclAuthorizer):
    # it reads the ACLs this broker wrote, and what it writes reaches this broker
    zk_tool = ["--authorizer-properties", f"zookeeper.connect={broker.zk_connect}"]
    listed = run_kafka_tool("kafka.admin.AclCommand", [*zk_tool, "--list", "--topic", "app-secret"])
    assert listed.returncode == 0 and "operation=READ, permissionType=DENY" in listed.stdout, listed.stdout
    assert produce(boot, "zk-events", b"refused") is not None
    added = run_kafka_tool("kafka.admin.AclCommand", [*zk_tool, "--add", "--allow-principal", ANON, "--operation",
                                                      "Write", "--topic", "zk-", "--resource-pattern-type",
                                                      "prefixed"])
    assert added.returncode == 0, added.stdout + added.stderr
    assert eventually_produces(boot, "zk-events"), "the ACL Kafka's tool wrote was not applied"

    broker.stop()
    audit = (broker.logs / "kafka-authorizer.log").read_text()
    for line in ("INFO Principal = User:ANONYMOUS is Denied Operation = Describe from host = 127.0.0.1 on resource = "
                 "Topic:LITERAL:other for request = Metadata with resourceRefCount = 1 (kafka.authorizer.logger)",
                 "is Denied Operation = Write from host = 127.0.0.1 on resource = Topic:LITERAL:other for request = "
                 "Produce with resourceRefCount = 1",
                 "is Denied Operation = Describe from host = 127.0.0.1 on resource = Group:LITERAL:intruders for "
                 "request = FindCoordinator"):
        assert line in audit, audit[-3000:]
    assert " DEBUG " not in audit  # grants are logged at DEBUG, below the file's INFO level


def test_unknown_authorizer_stops_start_up_with_one_line(zookeeper: str, tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, f"{zookeeper}/acl-bad-{uuid.uuid4().hex[:8]}", broker_id=0,
                      overrides={"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    with pytest.raises(RuntimeError, match="exited with 1"):
        b.start(extra_env={"BROKER_LOG_DIR": str(tmp_path)})
    errors = [line for line in b.output().splitlines() if line.startswith("ERROR ")]
    assert len(errors) == 1 and "authorizer.class.name" in errors[0] and "refusing to start" in errors[0], \
        b.output()[-2000:]
