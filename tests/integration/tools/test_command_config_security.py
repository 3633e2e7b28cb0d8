"""Client properties files in Kafka's Java names (--command-config, --producer.config, --consumer.config) against a
broker with SASL and TLS listeners: Kafka's JKS truststore, a PKCS12 keystore for mutual TLS, SCRAM and PLAIN logins
from sasl.jaas.config, through both the confluent-kafka path and the raw protocol client path of the tools."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.broker_process import free_port, running_broker
from tests.harness.security import ALICE, ALICE_PW, PASSWORD, make_pki, require_tools
from tests.integration.security.conftest import LISTENERS, SecuredBroker, add_scram_user, secured_overrides
from tests.integration.tools.kafka_tools import run_tool

pytestmark = pytest.mark.slow

SCRAM_LOGIN = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{u}" password="{p}";'
PLAIN_LOGIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="{u}" password="{p}";'


@pytest.fixture(scope="module")
def secured(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    require_tools("openssl", "keytool")
    d = Path(tmp_path_factory.mktemp("tools-secured"))
    pki = make_pki(d / "pki")
    ports = {n: free_port() for n in LISTENERS}
    zk_connect = f"{zookeeper}/tsec-{uuid.uuid4().hex[:10]}"
    with running_broker(d, zk_connect, broker_id=0, port=ports["PLAINTEXT"],
                        overrides=secured_overrides(pki, ports, {"offsets.topic.replication.factor": "1",
                                                                 "group.initial.rebalance.delay.ms": "0"})) as b:
        add_scram_user(zk_connect, ALICE, ALICE_PW, "SCRAM-SHA-512")
        yield SecuredBroker(b, pki, ports, zk_connect)


def props_file(tmp_path: Path, name: str, lines: dict) -> str:
    path = tmp_path / name
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return str(path)


def test_sasl_ssl_scram_with_a_jks_truststore(secured: SecuredBroker, tmp_path: Path) -> None:
    bs = secured.bootstrap("SASL_SSL")
    cfg = props_file(tmp_path, "scram.properties", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM_LOGIN.format(u=ALICE, p=ALICE_PW),
        "ssl.truststore.location": str(secured.pki.truststore_jks), "ssl.truststore.password": PASSWORD,
        "ssl.truststore.type": "JKS"})
    topic = f"sec-{uuid.uuid4().hex[:6]}"
    created = run_tool("topics", "--bootstrap-server", bs, "--command-config", cfg, "--create", "--topic", topic)
    assert created.code == 0 and created.stdout == f"Created topic {topic}.\n", created.stderr
    # the raw protocol client (TLS + SCRAM on its own socket) behind broker-api-versions and kafka-configs
    versions = run_tool("broker-api-versions", "--bootstrap-server", bs, "--command-config", cfg)
    assert versions.code == 0 and versions.stdout.startswith(f"{bs} (id: 0 rack: null) -> (")
    assert "\tSaslAuthenticate(36): 0 to 2 [usable: 2]," in versions.stdout
    described = run_tool("configs", "--bootstrap-server", bs, "--command-config", cfg, "--describe",
                         "--entity-type", "topics", "--entity-name", topic)
    assert described.code == 0 and described.stdout == f"Dynamic configs for topic {topic} are:\n"
    wrong = props_file(tmp_path, "wrong.properties", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM_LOGIN.format(u=ALICE, p="not-the-password"),
        "ssl.truststore.location": str(secured.pki.truststore_jks), "ssl.truststore.password": PASSWORD})
    denied = run_tool("broker-api-versions", "--bootstrap-server", bs, "--command-config", wrong)
    assert denied.code == 1 and "Authentication failed" in denied.stderr


def test_sasl_plaintext_plain_console_clients(secured: SecuredBroker, tmp_path: Path) -> None:
    bs = secured.bootstrap("SASL_PLAINTEXT")
    cfg = props_file(tmp_path, "plain.properties", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN_LOGIN.format(u=ALICE, p=ALICE_PW), "client.id": "plain-tool"})
    topic = f"plain-{uuid.uuid4().hex[:6]}"
    assert run_tool("topics", "--bootstrap-server", bs, "--command-config", cfg, "--create", "--topic",
                    topic).code == 0
    sent = run_tool("console-producer", "--bootstrap-server", bs, "--topic", topic, "--producer.config", cfg,
                    input="one\ntwo\n")
    assert sent.code == 0, sent.stderr
    got = run_tool("console-consumer", "--bootstrap-server", bs, "--topic", topic, "--consumer.config", cfg,
                   "--from-beginning", "--max-messages", "2", "--timeout-ms", "20000")
    assert got.code == 0 and got.stdout == "one\ntwo\n", got.stderr


def test_mutual_tls_with_a_pkcs12_keystore(secured: SecuredBroker, tmp_path: Path) -> None:
    bs = secured.bootstrap("MTLS")
    cfg = props_file(tmp_path, "mtls.properties", {
        "security.protocol": "SSL", "ssl.truststore.location": str(secured.pki.truststore_jks),
        "ssl.truststore.password": PASSWORD, "ssl.keystore.location": str(secured.pki.client_p12),
        "ssl.keystore.type": "PKCS12", "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD})
    listed = run_tool("topics", "--bootstrap-server", bs, "--command-config", cfg, "--list")
    assert listed.code == 0, listed.stderr
    versions = run_tool("broker-api-versions", "--bootstrap-server", bs, "--command-config", cfg)
    assert versions.code == 0 and versions.stdout.startswith(f"{bs} (id: 0 rack: null) -> ("), versions.stderr
    no_cert = props_file(tmp_path, "nocert.properties", {
        "security.protocol": "SSL", "ssl.truststore.location": str(secured.pki.truststore_jks),
        "ssl.truststore.password": PASSWORD})
    refused = run_tool("broker-api-versions", "--bootstrap-server", bs, "--command-config", no_cert)
    assert refused.code == 1 and refused.stderr.startswith("Error: "), refused.stderr
