"""A broker with all four security protocols on four listeners (PLAINTEXT for the brokers), a test PKI,
PLAIN users in the JAAS config and SCRAM users in ZooKeeper (written in Kafka's format)."""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator

import pytest
from kazoo.client import KazooClient

from broker.quota.entity import sanitize
from broker.security.scram import ScramCredential, format_credential
from tests.harness.broker_process import BrokerProcess, free_port, running_broker
from tests.harness.security import ADMIN, ADMIN_PW, ALICE, ALICE_PW, SecurityPki, make_pki, plain_jaas, scram_jaas

LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL", "MTLS")
BOB, BOB_PW = "bob", "bob-secret"


@dataclass
class SecuredBroker:
    broker: BrokerProcess
    pki: SecurityPki
    ports: Dict[str, int]
    zk_connect: str

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client(self, listener: str, mechanism: str = "", user: str = ALICE, password: str = ALICE_PW,
               cert: bool = False, untrusted: bool = False) -> Dict[str, str]:
        """librdkafka settings for one listener."""
        protocol = {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL",
                    "SASL_SSL": "SASL_SSL", "MTLS": "SSL"}[listener]
        conf = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": protocol}
        if protocol.startswith("SASL"):
            conf.update({"sasl.mechanism": mechanism or "PLAIN", "sasl.username": user, "sasl.password": password})
        if protocol.endswith("SSL"):
            conf.update(self.pki.client_ssl(with_cert=cert, untrusted=untrusted))
        return conf


def add_scram_user(zk_connect: str, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                   iterations: int = 4096) -> None:
    """What Kafka's tools wrote before AlterUserScramCredentials: /config/users/<user> + a change notification."""
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=10)
    try:
        path = f"/config/users/{sanitize(user)}"
        config: Dict[str, str] = {}
        if zk.exists(path):
            data, _ = zk.get(path)
            config = dict(json.loads(data or b"{}").get("config") or {})
        config[mechanism] = format_credential(ScramCredential.from_password(mechanism, password,
                                                                            iterations=iterations))
        body = json.dumps({"version": 1, "config": config}).encode()
        if zk.exists(path):
            zk.set(path, body)
        else:
            zk.create(path, body, makepath=True)
        zk.create("/config/changes/config_change_", json.dumps(
            {"version": 2, "entity_path": f"users/{sanitize(user)}"}).encode(), sequence=True, makepath=True)
    finally:
        zk.stop()
        zk.close()


def secured_overrides(pki: SecurityPki, ports: Dict[str, int], extra: Dict[str, str] | None = None) -> Dict[str, str]:
    users = {ADMIN: ADMIN_PW, ALICE: ALICE_PW}
    ov = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,"
                                          "SASL_SSL:SASL_SSL,MTLS:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms": "300",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=Eng,.*$/$1/,DEFAULT",
        "listener.name.mtls.ssl.client.auth": "required",
        **pki.broker_ssl_props(),
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        ov[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain_jaas(users)
        ov[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = scram_jaas()
        ov[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = scram_jaas()
    ov.update(extra or {})
    return ov


@pytest.fixture(scope="package")
def secured(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    d = Path(tmp_path_factory.mktemp("secured"))
    pki = make_pki(d / "pki")
    ports = {n: free_port() for n in LISTENERS}
    zk_connect = f"{zookeeper}/sec-{uuid.uuid4().hex[:10]}"
    with running_broker(d, zk_connect, broker_id=0, port=ports["PLAINTEXT"],
                        overrides=secured_overrides(pki, ports)) as b:
        add_scram_user(f"{zk_connect}", ALICE, ALICE_PW, "SCRAM-SHA-512")
        add_scram_user(f"{zk_connect}", ALICE, ALICE_PW, "SCRAM-SHA-256")
        add_scram_user(f"{zk_connect}", BOB, BOB_PW, "SCRAM-SHA-512", iterations=8192)
        yield SecuredBroker(b, pki, ports, zk_connect)
