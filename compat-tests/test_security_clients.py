"""Stock clients against a secured 3-broker cluster whose brokers also talk to each other over SASL_SSL (SCRAM-SHA-512),
with the ACL authorizer on (`allow.everyone.if.no.acl.found=false`): the brokers' own principal (User:admin, their SCRAM
login) is a super user, so controller requests and replica fetches pass CLUSTER_ACTION; clients are User:alice, by
SCRAM or by the certificate CN=alice,... mapped through ssl.principal.mapping.rules, and hold ACLs granted by the admin.
The Java client (kafka-clients 4.3.0, KafkaCompat scenarios unchanged) over SASL_SSL with SCRAM-SHA-512 and over SSL with
a client certificate; confluent-kafka over both. Produce (acks=all, RF=3: replication runs over the secured inter-broker
listener), consume, groups, admin."""
from __future__ import annotations

import importlib.util
import json
import ssl
import subprocess
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey
from broker.security.scram import ScramClient
from tests.integration.broker.wire import RawClient
from tests.harness.security import ADMIN, ADMIN_PW, ALICE, ALICE_PW, SecurityPki, make_pki, plain_jaas, scram_jaas
from tests.harness.broker_process import free_port
from tests.integration.security.conftest import add_scram_user
from tools.cluster import BrokerProcess

_spec = importlib.util.spec_from_file_location("compat_java_jars", Path(__file__).parent / "java" / "jars.py")
assert _spec is not None and _spec.loader is not None
jars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jars)

LISTENERS = ("INTERNAL", "SASL_SSL", "SSL")


class SecuredCluster:
    def __init__(self, workdir: Path, zk_connect: str, pki: SecurityPki) -> None:
        self.pki = pki
        self.zk_connect = zk_connect
        self.brokers: List[BrokerProcess] = []
        self.ports: List[Dict[str, int]] = []
        for i in range(3):
            ports = {n: free_port() for n in LISTENERS}
            ov = {
                "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
                "listener.security.protocol.map": "INTERNAL:SASL_SSL,SASL_SSL:SASL_SSL,SSL:SSL",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.ssl.ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),.*$/$1/,DEFAULT",
                "offsets.topic.replication.factor": "3", "default.replication.factor": "3",
                "min.insync.replicas": "2", "zookeeper.session.timeout.ms": "6000",
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false",
                **pki.broker_ssl_props(),
            }
            for listener in ("internal", "sasl_ssl"):
                ov[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = scram_jaas((ADMIN, ADMIN_PW))
                ov[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain_jaas({ADMIN: ADMIN_PW})
            # the INTERNAL port is what BrokerProcess waits on; clients use the others
            self.brokers.append(BrokerProcess(workdir, zk_connect, broker_id=i, port=ports["INTERNAL"],
                                              overrides=ov))
            self.ports.append(ports)

    def bootstrap(self, listener: str) -> str:
        return ",".join(f"127.0.0.1:{p[listener]}" for p in self.ports)

    def start(self) -> None:
        # the brokers log in to each other with SCRAM: the credentials must exist before the first connection
        add_scram_user(self.zk_connect, ADMIN, ADMIN_PW, "SCRAM-SHA-512")
        add_scram_user(self.zk_connect, ALICE, ALICE_PW, "SCRAM-SHA-512")
        for b in self.brokers:
            b.start(wait=False)
        for b in self.brokers:
            b.wait_started(120)
        self.grant_alice()

    def grant_alice(self) -> None:
        """As the super user: User:alice may do everything on topics and groups, create topics, and (for the admin
        scenarios) describe and alter configs; nothing else."""
        creations = []
        for rtype, name in ((2, "*"), (3, "*")):  # TOPIC, GROUP
            creations.append({"resource_type": rtype, "resource_name": name, "resource_pattern_type": 3,
                              "principal": "User:alice", "host": "*", "operation": 2, "permission_type": 3})
        for op in (5, 8, 10, 11, 12):  # CREATE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
            creations.append({"resource_type": 4, "resource_name": "kafka-cluster", "resource_pattern_type": 3,
                              "principal": "User:alice", "host": "*", "operation": op, "permission_type": 3})
        with RawClient(self.bootstrap("SASL_SSL").split(",")[0], timeout_s=30) as c:
            # the super user's own SASL_SSL login on a raw connection
            ctx = ssl.create_default_context(cafile=str(self.pki.ca_pem))
            ctx.check_hostname = False
            c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
            assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
            sc = ScramClient("SCRAM-SHA-512", ADMIN, ADMIN_PW)
            r1 = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": sc.first_message()})
            r2 = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": sc.final_message(r1.auth_bytes)})
            assert r2.error_code == 0, r2.error_message
            r = c.request(ApiKey.CREATE_ACLS, 3, {"creations": creations})
            assert all(res.error_code == 0 for res in r.results), [res.error_message for res in r.results]

    def stop(self) -> None:
        for b in self.brokers:
            try:
                b.stop()
            except Exception:
                b.kill()
        for b in self.brokers:
            assert "Traceback" not in b.output(), b.output()[-4000:]


@pytest.fixture(scope="module")
def secured_cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    d = Path(tmp_path_factory.mktemp("secured-cluster"))
    c = SecuredCluster(d, f"{zookeeper}/sc-{uuid.uuid4().hex[:8]}", make_pki(d / "pki"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def java_ready() -> None:
    try:
        jars.compile_harness(jars.ensure_jars())
    except jars.JavaUnavailable as exc:
        pytest.fail(f"Java client unavailable: {exc}", pytrace=False)


def run_java(scenarios: str, bootstrap: str, props: Dict[str, str], tmp: Path) -> List[dict]:
    cfg = tmp / f"client-{uuid.uuid4().hex[:6]}.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**__import__("os").environ, "COMPAT_CLIENT_CONFIG": str(cfg)}
    r = subprocess.run(jars.java_command(scenarios, bootstrap, f"sec-{uuid.uuid4().hex[:6]}"), capture_output=True,
                       text=True, timeout=600, env=env)
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    done = [e for e in events if e["step"] == "done"]
    assert r.returncode == 0 and done and all(e.get("ok") for e in done), \
        f"Java scenarios failed: {done}\n{r.stderr[-3000:]}"
    return events


def test_without_acls_a_principal_is_refused(secured_cluster: SecuredCluster) -> None:
    """User:bob authenticates fine but holds no ACL: his produce is refused with TOPIC_AUTHORIZATION_FAILED."""
    add_scram_user(secured_cluster.zk_connect, "bob", "bob-secret", "SCRAM-SHA-512")
    conf = {"bootstrap.servers": secured_cluster.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret",
            **secured_cluster.pki.client_ssl()}
    errors: List[str] = []
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p = Producer({**conf, "message.timeout.ms": 5000, "enable.idempotence": False})
        p.produce("bobs-topic", b"x", on_delivery=lambda err, m: errors.append(err.name()) if err else None)
        p.flush(10)
    assert errors and errors[0] == "TOPIC_AUTHORIZATION_FAILED", errors


def test_java_over_sasl_ssl_scram_sha_512(secured_cluster: SecuredCluster, java_ready: None,
                                          tmp_path: Path) -> None:
    props = secured_cluster.pki.java_client_props("SASL_SSL", "SCRAM-SHA-512", ALICE, ALICE_PW)
    events = run_java("admin,produce-consume,group", secured_cluster.bootstrap("SASL_SSL"), props, tmp_path)
    assert any(e["step"] == "consumed" for e in events)


def test_java_over_ssl_with_client_certificate(secured_cluster: SecuredCluster, java_ready: None,
                                               tmp_path: Path) -> None:
    props = secured_cluster.pki.java_client_props("SSL", with_cert=True)
    run_java("admin,produce-consume", secured_cluster.bootstrap("SSL"), props, tmp_path)


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_confluent_kafka_rf3_over_secured_listeners(secured_cluster: SecuredCluster, listener: str) -> None:
    conf = {"bootstrap.servers": secured_cluster.bootstrap(listener), "security.protocol": listener}
    if listener == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ALICE, "sasl.password": ALICE_PW})
    conf.update(secured_cluster.pki.client_ssl(with_cert=listener == "SSL"))
    topic = f"rf3-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 3)], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 30
    while True:  # replication over SASL_SSL between brokers brings every replica into the ISR
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if all(len(p.isrs) == 3 for p in md.partitions.values()):
            break
        assert time.monotonic() < deadline, {p.id: p.isrs for p in md.partitions.values()}
        time.sleep(0.2)
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = set()
    deadline = time.monotonic() + 60
    while len(got) < 300 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.add(m.value())
    c.close()
    assert len(got) == 300
