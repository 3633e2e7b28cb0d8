"""Client properties in Kafka's Java names mapped to librdkafka's and to the raw client's security settings."""
from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tools.cli.client_config import build_client_config, load_properties_file, parse_key_values
from tools.cli.options import CommandError

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a;b=c";'


def pem_pair(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tool-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_plain_properties_are_renamed_for_librdkafka_and_bootstrap_wins() -> None:
    warnings: list = []
    cfg = build_client_config({"bootstrap.servers": "file:1", "client.id": "me", "fetch.max.wait.ms": "50",
                               "auto.offset.reset": "none", "send.buffer.bytes": "4096", "request.timeout.ms": "7000",
                               "key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
                               "librdkafka.fetch.error.backoff.ms": "5", "no.such.key": "1"},
                              "consumer", "cli:2", warn=warnings.append)
    assert cfg.librdkafka["bootstrap.servers"] == "cli:2"
    assert cfg.librdkafka["client.id"] == "me"
    assert cfg.librdkafka["fetch.wait.max.ms"] == "50"
    assert cfg.librdkafka["auto.offset.reset"] == "error"
    assert cfg.librdkafka["socket.send.buffer.bytes"] == "4096"
    assert cfg.librdkafka["fetch.error.backoff.ms"] == "5"
    assert "key.deserializer" not in cfg.librdkafka and "request.timeout.ms" not in cfg.librdkafka
    assert cfg.request_timeout_ms == 7000 and cfg.client_id == "me"
    assert warnings == ["WARNING: The configuration 'no.such.key' was supplied but isn't a known config."]


def test_producer_keys_and_buffer_memory() -> None:
    cfg = build_client_config({"acks": "all", "linger.ms": "3", "buffer.memory": "33554432",
                               "delivery.timeout.ms": "9000", "max.request.size": "2000000"}, "producer", "h:1",
                              warn=lambda w: None)
    lk = cfg.librdkafka
    assert (lk["acks"], lk["linger.ms"], lk["queue.buffering.max.kbytes"]) == ("all", "3", 32768)
    assert lk["message.timeout.ms"] == "9000" and lk["message.max.bytes"] == "2000000"


def test_sasl_jaas_config_becomes_username_and_password() -> None:
    cfg = build_client_config({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                               "sasl.jaas.config": JAAS}, "admin", "h:1")
    assert cfg.librdkafka["security.protocol"] == "SASL_PLAINTEXT"
    assert (cfg.librdkafka["sasl.mechanism"], cfg.librdkafka["sasl.username"], cfg.librdkafka["sasl.password"]) == \
        ("SCRAM-SHA-512", "alice", "a;b=c")
    assert cfg.security.uses_sasl and not cfg.security.uses_tls and cfg.security.password == "a;b=c"


@pytest.mark.parametrize("props,message", [
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": JAAS}, "GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config must be set"),
    ({"security.protocol": "KERBEROS"}, "Invalid value KERBEROS for configuration security.protocol"),
    ({"request.timeout.ms": "soon"}, "Invalid value soon for configuration request.timeout.ms"),
])
def test_refused_settings(props: dict, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        build_client_config(props, "admin", "h:1")


def test_pem_truststore_and_keystore_reach_librdkafka_inline(tmp_path: Path) -> None:
    cert, key = pem_pair(tmp_path)
    cfg = build_client_config({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                               "ssl.truststore.location": str(cert), "ssl.keystore.type": "PEM",
                               "ssl.keystore.key": key.read_text(), "ssl.keystore.certificate.chain": cert.read_text(),
                               "ssl.endpoint.identification.algorithm": ""}, "admin", "h:1")
    lk = cfg.librdkafka
    assert lk["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert lk["ssl.certificate.pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert "PRIVATE KEY" in lk["ssl.key.pem"]
    assert lk["ssl.endpoint.identification.algorithm"] == "none"
    ctx = cfg.security.ssl_context()  # the raw client's context loads the same material
    assert not ctx.check_hostname
    assert not list(tmp_path.glob("kafka-tool-*"))


def test_properties_file_and_key_values(tmp_path: Path) -> None:
    f = tmp_path / "c.properties"
    f.write_text("# comment\nclient.id = x\\\n  y\nsasl.jaas.config=a=b;\n")
    assert load_properties_file(str(f)) == {"client.id": "xy", "sasl.jaas.config": "a=b;"}
    with pytest.raises(CommandError, match="Cannot read properties file"):
        load_properties_file(str(tmp_path / "missing"))
    assert parse_key_values(["a=b=c", " k = v "]) == {"a": "b=c", "k": "v"}
    with pytest.raises(CommandError, match="expected key=value"):
        parse_key_values(["novalue"])
