"""Test PKI and SASL settings for secured brokers: a CA, a broker keystore (JKS, Kafka's default type),
a truststore, client certificates (trusted and untrusted), and JAAS texts. Everything is generated at
test time with the JDK's keytool and openssl; nothing is committed. Fails loudly if a tool is missing.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

PASSWORD = "test-secret"
ADMIN, ADMIN_PW = "admin", "admin-secret"
ALICE, ALICE_PW = "alice", "alice-secret"

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def require_tools(*names: str) -> None:
    """Fail the calling test (never skip it) when a tool it needs is not installed."""
    import pytest
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} required by this test but not installed (scripts/install.sh installs "
                    f"Java and openssl)", pytrace=False)


def _run(*cmd: str) -> None:
    if shutil.which(cmd[0]) is None:
        raise RuntimeError(f"{cmd[0]} is required to build the test PKI but is not installed")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed: {r.stderr.strip() or r.stdout.strip()}")


@dataclass
class SecurityPki:
    """Paths of the generated material."""

    dir: Path
    ca_pem: Path
    broker_jks: Path
    broker_p12: Path
    truststore_jks: Path
    client_cert: Path
    client_key: Path
    client_dn: str
    untrusted_cert: Path
    untrusted_key: Path
    client_p12: Path

    def java_client_props(self, protocol: str, mechanism: str = "", user: str = "", password: str = "",
                          with_cert: bool = False) -> Dict[str, str]:
        """The Java client's settings (JKS truststore, PKCS12 client keystore, JAAS login) for a listener."""
        out = {"security.protocol": protocol}
        if protocol.endswith("SSL"):
            out.update({"ssl.truststore.location": str(self.truststore_jks), "ssl.truststore.password": PASSWORD,
                        "ssl.endpoint.identification.algorithm": ""})
            if with_cert:
                out.update({"ssl.keystore.location": str(self.client_p12), "ssl.keystore.type": "PKCS12",
                            "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD})
        if protocol.startswith("SASL"):
            module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
            out.update({"sasl.mechanism": mechanism,
                        "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'})
        return out

    def broker_ssl_props(self, prefix: str = "") -> Dict[str, str]:
        """Kafka's ssl.* keys for the broker (JKS keystore and truststore), optionally listener-prefixed."""
        return {f"{prefix}ssl.keystore.location": str(self.broker_jks),
                f"{prefix}ssl.keystore.password": PASSWORD, f"{prefix}ssl.key.password": PASSWORD,
                f"{prefix}ssl.truststore.location": str(self.truststore_jks),
                f"{prefix}ssl.truststore.password": PASSWORD}

    def client_ssl(self, with_cert: bool = False, untrusted: bool = False) -> Dict[str, str]:
        """librdkafka settings for a TLS client."""
        out = {"ssl.ca.location": str(self.ca_pem), "ssl.endpoint.identification.algorithm": "none"}
        if with_cert or untrusted:
            out["ssl.certificate.location"] = str(self.untrusted_cert if untrusted else self.client_cert)
            out["ssl.key.location"] = str(self.untrusted_key if untrusted else self.client_key)
        return out


def make_pki(d: Path) -> SecurityPki:
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca_pem = d / "ca.key", d / "ca.pem"
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_pem),
         "-days", "3", "-subj", "/CN=test-ca")

    def signed(name: str, subj: str, san: str, key_path: Path, cert_path: Path, ca: Path, cakey: Path) -> None:
        csr = d / f"{name}.csr"
        ext = d / f"{name}.ext"
        ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key_path), "-out", str(csr),
             "-subj", subj)
        _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(cakey), "-CAcreateserial",
             "-out", str(cert_path), "-days", "3", "-extfile", str(ext))

    broker_key, broker_cert = d / "broker.key", d / "broker.pem"
    signed("broker", "/CN=localhost", "DNS:localhost,IP:127.0.0.1", broker_key, broker_cert, ca_pem, ca_key)
    p12 = d / "broker.p12"
    _run("openssl", "pkcs12", "-export", "-in", str(broker_cert), "-inkey", str(broker_key), "-certfile",
         str(ca_pem), "-name", "broker", "-out", str(p12), "-passout", f"pass:{PASSWORD}")
    jks = d / "broker.jks"
    _run("keytool", "-importkeystore", "-noprompt", "-srckeystore", str(p12), "-srcstoretype", "PKCS12",
         "-srcstorepass", PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS", "-deststorepass", PASSWORD,
         "-destkeypass", PASSWORD)
    trust = d / "truststore.jks"
    _run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), "-keystore", str(trust),
         "-storetype", "JKS", "-storepass", PASSWORD)
    client_key, client_cert = d / "client.key", d / "client.pem"
    signed("client", "/C=FR/O=Acme/OU=Eng/CN=alice", "", client_key, client_cert, ca_pem, ca_key)
    other_key, other_pem = d / "other-ca.key", d / "other-ca.pem"
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(other_key), "-out",
         str(other_pem), "-days", "3", "-subj", "/CN=other-ca")
    bad_key, bad_cert = d / "untrusted.key", d / "untrusted.pem"
    signed("untrusted", "/CN=mallory", "", bad_key, bad_cert, other_pem, other_key)
    client_p12 = d / "client.p12"
    _run("openssl", "pkcs12", "-export", "-in", str(client_cert), "-inkey", str(client_key), "-certfile",
         str(ca_pem), "-name", "client", "-out", str(client_p12), "-passout", f"pass:{PASSWORD}")
    return SecurityPki(d, ca_pem, jks, p12, trust, client_cert, client_key, "CN=alice,OU=Eng,O=Acme,C=FR",
                   bad_cert, bad_key, client_p12)


def plain_jaas(users: Dict[str, str], login: tuple = (ADMIN, ADMIN_PW)) -> str:
    """A broker's PlainLoginModule config: its own login plus the users it accepts."""
    opts = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f'{PLAIN_MODULE} required username="{login[0]}" password="{login[1]}" {opts};'


def scram_jaas(login: tuple = (ADMIN, ADMIN_PW)) -> str:
    return f'{SCRAM_MODULE} required username="{login[0]}" password="{login[1]}";'


__all__ = ["require_tools", "make_pki", "SecurityPki", "plain_jaas", "scram_jaas", "PASSWORD", "ADMIN", "ADMIN_PW", "ALICE", "ALICE_PW"]
