"""Secured listeners on a real broker process, driven by stock clients (confluent-kafka/librdkafka, kcat) and a raw
client for the refusals: SASL PLAIN and SCRAM, TLS with and without client certificates, re-authentication."""
from __future__ import annotations

import struct
import subprocess
import time
import uuid
from typing import Dict, List

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey, encode_request
from broker.security.plain import plain_client_message
from broker.security.scram import ScramClient
from tests.harness.security import ALICE, ALICE_PW
from tests.integration.broker.wire import ConnectionClosed, RawClient
from tests.integration.security.conftest import BOB, BOB_PW, SecuredBroker


def wait_log(b: SecuredBroker, text: str, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = b.broker.output()
        if text in out:
            return out
        time.sleep(0.1)
    raise AssertionError(f"no log line containing {text!r}:\n{b.broker.output()[-3000:]}")


def round_trip(conf: Dict[str, str], n: int = 20) -> None:
    """Admin create, produce n records (acks=all), consume them in a group, commit: the whole client surface."""
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=30)[topic].result(30)
    md = admin.list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 2
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: List[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))


@pytest.mark.parametrize("listener,mechanism,user,password", [
    ("SASL_PLAINTEXT", "PLAIN", ALICE, ALICE_PW),
    ("SASL_SSL", "SCRAM-SHA-512", ALICE, ALICE_PW),
    ("SASL_SSL", "SCRAM-SHA-256", ALICE, ALICE_PW),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", BOB, BOB_PW),
])
def test_confluent_kafka_over_sasl(secured: SecuredBroker, listener: str, mechanism: str, user: str,
                                   password: str) -> None:
    round_trip(secured.client(listener, mechanism, user, password))


@pytest.mark.parametrize("listener,cert", [("SSL", False), ("SSL", True), ("MTLS", True)])
def test_confluent_kafka_over_tls(secured: SecuredBroker, listener: str, cert: bool) -> None:
    round_trip(secured.client(listener, cert=cert))


def test_kcat_over_sasl_plaintext_plain(secured: SecuredBroker) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    conf = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X", f"sasl.username={ALICE}",
            "-X", f"sasl.password={ALICE_PW}", "-b", secured.bootstrap("SASL_PLAINTEXT")]
    admin = AdminClient(secured.client("SASL_PLAINTEXT", "PLAIN"))
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)
    r = subprocess.run(["kcat", *conf, "-P", "-t", topic], input="one\ntwo\nthree\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["kcat", *conf, "-C", "-t", topic, "-o", "beginning", "-c", "3", "-e"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["one", "two", "three"], r.stderr
    r = subprocess.run(["kcat", *conf, "-L", "-t", topic], capture_output=True, text=True, timeout=60)  # metadata
    assert r.returncode == 0 and f'topic "{topic}" with 1 partitions' in r.stdout, r.stdout + r.stderr
    # a balanced consumer group (kcat -G): joins, reads everything, commits
    r = subprocess.run(["kcat", *conf, "-G", f"g-{topic}", "-o", "beginning", "-c", "3", "-e", topic],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0 and r.stdout.split() == ["one", "two", "three"], r.stderr


# ------------------------------------------------------------------------------------------------ refusals
def canary(secured: SecuredBroker) -> None:
    """Other clients are served throughout."""
    p = Producer({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    p.produce("canary-security", b"x")
    assert p.flush(30) == 0


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", ALICE, "wrong"), ("PLAIN", "nobody", "x"),
    ("SCRAM-SHA-512", ALICE, "wrong"), ("SCRAM-SHA-512", "nobody", "x"),
])
def test_bad_credentials_are_refused_and_logged(secured: SecuredBroker, mechanism: str, user: str,
                                                password: str) -> None:
    conf = secured.client("SASL_PLAINTEXT", mechanism, user, password)
    errors: List[str] = []
    p = Producer({**conf, "error_cb": lambda e: errors.append(f"{e.name()}: {e.str()}")})
    deadline = time.monotonic() + 15
    while not any("Authentication failed" in e for e in errors) and time.monotonic() < deadline:
        p.poll(0.2)
    assert any(e.startswith("_AUTHENTICATION") and "Authentication failed" in e for e in errors), errors
    wait_log(secured, f"using {mechanism}: Authentication failed")
    canary(secured)


def raw_sasl(secured: SecuredBroker, listener: str = "SASL_PLAINTEXT") -> RawClient:
    return RawClient(secured.bootstrap(listener))


def test_unknown_and_wrong_password_fail_identically_raw(secured: SecuredBroker) -> None:
    """SCRAM-SHA-512 over the raw protocol: an unknown user gets a normal server-first message and fails only at the
    final step, with the same error as a wrong password (no user enumeration)."""
    answers = []
    for user, password in ((ALICE, "wrong"), ("nobody-at-all", "wrong")):
        with raw_sasl(secured) as c:
            hs = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
            assert hs.error_code == 0
            client = ScramClient("SCRAM-SHA-512", user, password)
            r1 = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first_message()})
            assert r1.error_code == 0 and r1.auth_bytes.startswith(b"r=")
            t0 = time.monotonic()
            r2 = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final_message(r1.auth_bytes)})
            waited = time.monotonic() - t0
            answers.append((r2.error_code, r2.error_message))
            assert waited >= 0.25, "a failed login is answered after connection.failed.authentication.delay.ms"
            assert c.closed_by_peer(5.0)
    assert answers[0] == answers[1] and answers[0][0] == ErrorCode.SASL_AUTHENTICATION_FAILED, answers


def test_unknown_mechanism_gets_the_enabled_list(secured: SecuredBroker) -> None:
    with raw_sasl(secured) as c:
        hs = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.closed_by_peer(5.0)
    wait_log(secured, "unsupported SASL mechanism GSSAPI")
    canary(secured)


def test_only_api_versions_and_handshake_before_authentication(secured: SecuredBroker) -> None:
    with raw_sasl(secured) as c:
        av = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1"})
        keys = {k.api_key for k in av.api_keys}
        assert av.error_code == 0 and {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= keys
        c.send_raw(encode_request(ApiKey.METADATA, 12, 7, "raw", {"topics": None,
                                                                   "allow_auto_topic_creation": False,
                                                                   "include_topic_authorized_operations": False}))
        assert c.closed_by_peer(5.0), "a request before authentication must close the connection"
    wait_log(secured, "unexpected METADATA request during SASL handshake")


def test_legacy_unframed_sasl_plain(secured: SecuredBroker) -> None:
    """SaslHandshake v0, then the PLAIN token as a raw size-prefixed frame; then requests are served."""
    with raw_sasl(secured) as c:
        assert c.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = plain_client_message(ALICE, ALICE_PW)
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.recv_frame() == struct.pack(">i", 0)  # empty challenge: authenticated
        md = c.request(ApiKey.METADATA, 1, {"topics": None})
        assert len(md.brokers) == 1


def test_sasl_after_authentication_is_an_illegal_state(secured: SecuredBroker) -> None:
    with raw_sasl(secured) as c:
        assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
        ok = c.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": plain_client_message(ALICE, ALICE_PW)})
        assert ok.error_code == 0 and ok.session_lifetime_ms == 0  # no connections.max.reauth.ms here
        again = c.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"x"})
        assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
    with RawClient(secured.bootstrap("PLAINTEXT")) as c:  # SASL on a PLAINTEXT listener
        assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_plaintext_bytes_on_a_tls_port_are_refused_and_logged(secured: SecuredBroker) -> None:
    with RawClient(secured.bootstrap("SSL")) as c:
        c.send_raw(encode_request(ApiKey.API_VERSIONS, 0, 1, "plain", {}))
        with pytest.raises((ConnectionClosed, OSError)):
            c.recv_frame()
    wait_log(secured, "SSL handshake failed")
    canary(secured)


def test_untrusted_client_certificate_is_refused(secured: SecuredBroker) -> None:
    conf = secured.client("MTLS", untrusted=True)
    admin = AdminClient({**conf, "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=8)
    out = wait_log(secured, "SSL handshake failed")
    assert "on listener MTLS" in out
    # and without any certificate on the listener that requires one
    with pytest.raises(KafkaException):
        AdminClient({**secured.client("MTLS"), "socket.timeout.ms": 5000}).list_topics(timeout=8)
    canary(secured)


def test_reauthentication_and_session_expiry(zookeeper: str, tmp_path_factory: pytest.TempPathFactory,
                                             secured: SecuredBroker) -> None:
    """connections.max.reauth.ms on a second broker: SaslAuthenticate v1+ carries the session lifetime; a client
    re-authenticates on the same connection before it ends; one that does not is closed at its next request;
    librdkafka re-authenticates by itself and keeps producing."""
    from tests.harness.broker_process import free_port, running_broker
    from tests.integration.security.conftest import secured_overrides
    d = tmp_path_factory.mktemp("reauth")
    ports = {n: free_port() for n in secured.ports}
    ov = secured_overrides(secured.pki, ports, {"connections.max.reauth.ms": "2000"})
    with running_broker(d, f"{zookeeper}/reauth-{uuid.uuid4().hex[:8]}", broker_id=0, port=ports["PLAINTEXT"],
                        overrides=ov) as b:
        bootstrap = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
        with RawClient(bootstrap) as c:
            assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
            r = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_client_message(ALICE, ALICE_PW)})
            assert r.error_code == 0 and r.session_lifetime_ms == 2000
            # re-authenticate before the end: same connection, same principal
            assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
            r = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_client_message(ALICE, ALICE_PW)})
            assert r.error_code == 0 and r.session_lifetime_ms == 2000
            assert len(c.request(ApiKey.METADATA, 1, {"topics": None}).brokers) == 1
            # a different principal may not take over the connection
            assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
            r = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_client_message("admin", "admin-secret")})
            assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "principal" in (r.error_message or "")
        with RawClient(bootstrap) as c:
            c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_client_message(ALICE, ALICE_PW)})
            time.sleep(2.3)
            c.send_raw(encode_request(ApiKey.METADATA, 1, 99, "late", {"topics": None}))
            assert c.closed_by_peer(5.0), "a request after the session ended must close the connection"
        # librdkafka (KIP-368 support) keeps producing across several session lifetimes
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": ALICE, "sasl.password": ALICE_PW}
        topic = f"reauth-{uuid.uuid4().hex[:6]}"
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)
        p = Producer({**conf, "acks": "all"})
        errors: List[str] = []
        end = time.monotonic() + 6
        i = 0
        while time.monotonic() < end:
            p.produce(topic, str(i).encode(), on_delivery=lambda err, m: errors.append(str(err)) if err else None)
            p.poll(0.05)
            i += 1
        assert p.flush(30) == 0 and not errors, errors[:3]
        assert "Traceback" not in b.output()


def test_scram_credentials_from_zookeeper_in_kafkas_format_follow_changes(secured: SecuredBroker) -> None:
    """A credential changed in ZooKeeper (Kafka's format + /config/changes) is used by the next login."""
    from tests.integration.security.conftest import add_scram_user
    user = f"carol-{uuid.uuid4().hex[:4]}"
    add_scram_user(secured.zk_connect, user, "first-password", "SCRAM-SHA-256")
    conf = secured.client("SASL_PLAINTEXT", "SCRAM-SHA-256", user, "first-password")
    deadline = time.monotonic() + 10
    while True:
        try:
            AdminClient({**conf, "socket.timeout.ms": 3000}).list_topics(timeout=4)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the new SCRAM user never became usable"
    add_scram_user(secured.zk_connect, user, "second-password", "SCRAM-SHA-256")
    conf2 = secured.client("SASL_PLAINTEXT", "SCRAM-SHA-256", user, "second-password")
    deadline = time.monotonic() + 10
    while True:
        try:
            AdminClient({**conf2, "socket.timeout.ms": 3000}).list_topics(timeout=4)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the changed SCRAM password never took effect"
    with pytest.raises(KafkaException):
        AdminClient({**conf, "socket.timeout.ms": 3000}).list_topics(timeout=4)

