"""Contexts built from Kafka ``ssl.*`` configs, exercised by real TLS handshakes over a socketpair."""
from __future__ import annotations

import os
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from tests.harness.security import require_tools

from broker.security.principal import SslPrincipalMapper, ssl_principal
from broker.security.ssl_factory import (
    IANA_TO_OPENSSL,
    SslConfigError,
    build_client_context,
    build_server_context,
    openssl_cipher_names,
)

#: run once, in the native pass of the unit lane (scripts/test.sh): keystores and TLS contexts: no record, codec,
#: CRC, varint or index code (no twin) is imported
pytestmark = pytest.mark.twin_independent


@pytest.fixture(autouse=True)
def _tools() -> None:
    """The fixtures are built with the JDK's keytool and openssl: a machine without them fails loudly."""
    require_tools("keytool", "openssl")
JVM_FAST = ["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"]


def _run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def keytool(*args: str) -> None:
    _run("keytool", *JVM_FAST, *args)


def _signed_keystore(d: Path, alias: str, dname: str, store: str, store_type: str, password: str,
                     *extra: str) -> None:
    """A key entry signed by the test CA, chain installed (the CA goes in as a trusted entry first)."""
    ks = ["-keystore", str(d / store), "-storepass", password]
    keytool("-genkeypair", "-alias", alias, "-keyalg", "RSA", "-keysize", "2048", "-dname", dname, "-validity", "2",
            "-storetype", store_type, *ks)
    keytool("-certreq", "-alias", alias, *ks, "-file", str(d / f"{alias}.csr"))
    keytool("-gencert", "-alias", "ca", "-keystore", str(d / "ca.p12"), "-storepass", "capass1", "-rfc",
            "-infile", str(d / f"{alias}.csr"), "-outfile", str(d / f"{alias}.crt"), "-validity", "2", *extra)
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(d / "ca.pem"), *ks)
    keytool("-importcert", "-alias", alias, "-file", str(d / f"{alias}.crt"), *ks)


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    keytool("-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=Test CA",
            "-ext", "bc:c", "-validity", "2", "-storetype", "PKCS12", "-keystore", str(d / "ca.p12"),
            "-storepass", "capass1")
    keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", str(d / "ca.p12"), "-storepass", "capass1",
            "-file", str(d / "ca.pem"))
    _signed_keystore(d, "server", "CN=localhost", "server.jks", "JKS", "serverpass",
                     "-ext", "SAN=dns:localhost,ip:127.0.0.1")
    _signed_keystore(d, "alice", "CN=alice,OU=Eng,O=Acme", "alice.p12", "PKCS12", "alicepass")
    # Self-signed, so no trust store here vouches for it.
    keytool("-genkeypair", "-alias", "mallory", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=mallory",
            "-validity", "2", "-storetype", "PKCS12", "-keystore", str(d / "mallory.p12"), "-storepass", "malpass")
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(d / "ca.pem"), "-storetype", "JKS",
            "-keystore", str(d / "trust.jks"), "-storepass", "trustpass")
    # PEM server identity signed by the same CA, key encrypted (PKCS#8).
    _run("openssl", "pkcs12", "-in", str(d / "ca.p12"), "-passin", "pass:capass1", "-nocerts", "-noenc",
         "-out", str(d / "ca.key"))
    _run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-subj", "/CN=localhost",
         "-keyout", str(d / "pem.key"), "-passout", "pass:pempass", "-out", str(d / "pem.csr"))
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _run("openssl", "x509", "-req", "-in", str(d / "pem.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
         "-days", "1", "-extfile", str(d / "san.ext"), "-out", str(d / "pem.crt"))
    (d / "server.pem").write_text((d / "pem.key").read_text() + (d / "pem.crt").read_text()
                                  + (d / "ca.pem").read_text())
    return d


def server_cfg(d: Path, **extra) -> dict:
    cfg = {"ssl.keystore.location": str(d / "server.jks"), "ssl.keystore.password": "serverpass",
           "ssl.truststore.location": str(d / "trust.jks"), "ssl.truststore.password": "trustpass"}
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return cfg


def client_cfg(d: Path, keystore: str | None = None, **extra) -> dict:
    cfg = {"ssl.truststore.location": str(d / "trust.jks"), "ssl.truststore.password": "trustpass"}
    if keystore:
        cfg.update({"ssl.keystore.location": str(d / f"{keystore}.p12"), "ssl.keystore.type": "PKCS12",
                    "ssl.keystore.password": {"alice": "alicepass", "mallory": "malpass"}[keystore]})
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return cfg


class Result:
    def __init__(self) -> None:
        self.principal: str | None = None
        self.version: str | None = None
        self.cipher: str | None = None
        self.error: BaseException | None = None


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str = "localhost",
              mapper: SslPrincipalMapper | None = None) -> tuple[Result, Result]:
    """Handshake both ends over a socketpair and exchange one byte each way; errors are collected, not raised."""
    srv_sock, cli_sock = socket.socketpair()
    srv_sock.settimeout(20)
    cli_sock.settimeout(20)
    srv, cli = Result(), Result()

    def serve() -> None:
        try:
            with server.wrap_socket(srv_sock, server_side=True) as tls:
                srv.principal = ssl_principal(tls.getpeercert(binary_form=True), mapper)
                srv.version, srv.cipher = tls.version(), tls.cipher()[0]
                tls.sendall(b"s")
                tls.recv(1)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            srv.error = e
        finally:
            srv_sock.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(cli_sock, server_hostname=hostname) as tls:
            # Under TLS 1.3 a rejected client certificate only shows on the first read.
            if tls.recv(1) != b"s":
                raise ConnectionError("server closed the connection")
            tls.sendall(b"c")
            cli.version, cli.cipher = tls.version(), tls.cipher()[0]
    except (OSError, ConnectionError) as e:
        cli.error = e
    finally:
        cli_sock.close()
        thread.join(30)
    return srv, cli


# --- handshakes ---------------------------------------------------------------------------------------------------


def test_jks_server_without_client_auth(d):
    srv, cli = handshake(build_server_context(server_cfg(d)), build_client_context(client_cfg(d)))
    assert srv.error is None and cli.error is None
    assert srv.principal == "User:ANONYMOUS"
    assert srv.version == cli.version == "TLSv1.3"


def test_client_auth_required_with_trusted_client(d):
    server = build_server_context(server_cfg(d, ssl_client_auth="required"))
    srv, cli = handshake(server, build_client_context(client_cfg(d, "alice")))
    assert srv.error is None and cli.error is None
    assert srv.principal == "User:CN=alice,OU=Eng,O=Acme"
    srv, _ = handshake(server, build_client_context(client_cfg(d, "alice")),
                       mapper=SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=Acme$/$1@$2/L,DEFAULT"))
    assert srv.principal == "User:alice@eng"


def test_client_auth_required_rejects_untrusted_client(d):
    server = build_server_context(server_cfg(d, ssl_client_auth="required"))
    srv, cli = handshake(server, build_client_context(client_cfg(d, "mallory")))
    assert isinstance(srv.error, ssl.SSLCertVerificationError)
    assert cli.error is not None


def test_client_auth_required_rejects_missing_certificate(d):
    server = build_server_context(server_cfg(d, ssl_client_auth="required"))
    srv, cli = handshake(server, build_client_context(client_cfg(d)))
    assert isinstance(srv.error, ssl.SSLError)
    assert cli.error is not None


def test_client_auth_requested(d):
    server = build_server_context(server_cfg(d, ssl_client_auth="requested"))
    srv, cli = handshake(server, build_client_context(client_cfg(d)))
    assert srv.error is None and cli.error is None and srv.principal == "User:ANONYMOUS"
    srv, cli = handshake(server, build_client_context(client_cfg(d, "alice")))
    assert srv.principal == "User:CN=alice,OU=Eng,O=Acme"
    srv, cli = handshake(server, build_client_context(client_cfg(d, "mallory")))
    assert srv.error is not None  # a certificate that is sent must verify, as with Java's "want" client auth


def test_pem_stores(d):
    server = build_server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(d / "server.pem"),
                                   "ssl.key.password": "pempass", "ssl.client.auth": "required",
                                   "ssl.truststore.type": "PEM", "ssl.truststore.location": str(d / "ca.pem")})
    alice = _run("openssl", "pkcs12", "-in", str(d / "alice.p12"), "-passin", "pass:alicepass", "-noenc")
    client = build_client_context({
        "ssl.keystore.type": "PEM", "ssl.keystore.key": alice, "ssl.keystore.certificate.chain": alice,
        "ssl.truststore.type": "PEM", "ssl.truststore.certificates": (d / "ca.pem").read_text()})
    srv, cli = handshake(server, client)
    assert srv.error is None and cli.error is None
    assert srv.principal == "User:CN=alice,OU=Eng,O=Acme"


def test_hostname_verification(d):
    server = build_server_context(server_cfg(d))
    _, cli = handshake(server, build_client_context(client_cfg(d)), hostname="broker-9.example")
    assert isinstance(cli.error, ssl.SSLCertVerificationError)
    assert "Hostname mismatch" in str(cli.error) or "hostname" in str(cli.error).lower()
    relaxed = build_client_context(client_cfg(d, ssl_endpoint_identification_algorithm=""))
    assert relaxed.check_hostname is False and relaxed.verify_mode == ssl.CERT_REQUIRED
    srv, cli = handshake(server, relaxed, hostname="broker-9.example")
    assert srv.error is None and cli.error is None
    _, cli = handshake(server, build_client_context({"ssl.endpoint.identification.algorithm": ""}))
    assert isinstance(cli.error, ssl.SSLCertVerificationError)  # default CAs do not know the test CA


def test_enabled_protocols_and_cipher_suites(d):
    server = build_server_context(server_cfg(d, ssl_enabled_protocols=["TLSv1.2"],
                                             ssl_cipher_suites=["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]))
    srv, cli = handshake(server, build_client_context(client_cfg(d)))
    assert srv.error is None and cli.error is None
    assert srv.version == "TLSv1.2" and srv.cipher == "ECDHE-RSA-AES128-GCM-SHA256"
    # No TLS 1.2 suite in common: refused.
    client = build_client_context(client_cfg(d, ssl_cipher_suites="TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                                             ssl_enabled_protocols="TLSv1.2"))
    srv, cli = handshake(server, client)
    assert srv.error is not None and cli.error is not None


def test_only_tls13_suites_means_tls13_only(d):
    ctx = build_server_context(server_cfg(d, ssl_cipher_suites=["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"]))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    srv, cli = handshake(ctx, build_client_context(client_cfg(d, ssl_enabled_protocols=["TLSv1.2"])))
    assert srv.error is not None and cli.error is not None


def test_protocol_defaults_and_range(d):
    ctx = build_client_context(client_cfg(d))
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    ctx = build_client_context(client_cfg(d, ssl_enabled_protocols=["TLSv1.3"]))
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_3


def test_key_material_temp_files_are_removed(d, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    build_server_context(server_cfg(d))
    assert os.listdir(tmp_path) == []


# --- configuration errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra,key,text", [
    ({"ssl.enabled.protocols": ["TLSv1.2", "SSLv3"]}, "ssl.enabled.protocols", "'SSLv3'"),
    ({"ssl.enabled.protocols": ["TLSv1", "TLSv1.2"]}, "ssl.enabled.protocols", "gap"),
    ({"ssl.cipher.suites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_FOO_WITH_BAR"]}, "ssl.cipher.suites",
     "'TLS_FOO_WITH_BAR'"),
    ({"ssl.cipher.suites": ["TLS_AES_128_GCM_SHA256"], "ssl.enabled.protocols": ["TLSv1.2"]}, "ssl.cipher.suites",
     "TLSv1.3 is not enabled"),
    ({"ssl.client.auth": "always"}, "ssl.client.auth", "'always'"),
    ({"ssl.protocol": "QUIC"}, "ssl.protocol", "'QUIC'"),
    ({"ssl.keystore.password": "wrong"}, "ssl.keystore.location", "tampered with, or password was incorrect"),
    ({"ssl.keystore.password": None}, "ssl.keystore.password", "required"),
    ({"ssl.keystore.location": None, "ssl.keystore.password": None}, "ssl.keystore.location", "needs a key store"),
    ({"ssl.keystore.location": None}, "ssl.keystore.location", "required when ssl.keystore.password"),
    ({"ssl.keystore.location": "/nonexistent/ks.jks"}, "ssl.keystore.location", "not found"),
    ({"ssl.keystore.type": "PEM"}, "ssl.keystore.password", "not allowed for PEM"),
    ({"ssl.keystore.key": "x"}, "ssl.keystore.key", "only allowed with ssl.keystore.type=PEM"),
    ({"ssl.keystore.certificate.chain": "x"}, "ssl.keystore.key", "required"),
    ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type", "unsupported store type 'BKS'"),
    ({"ssl.truststore.type": "JCEKS"}, "ssl.truststore.type", "unsupported store type 'JCEKS'"),
    ({"ssl.truststore.location": None}, "ssl.truststore.location", "required when ssl.truststore.password"),
    ({"ssl.truststore.password": "wrong"}, "ssl.truststore.location", "password was incorrect"),
    ({"ssl.truststore.certificates": "x"}, "ssl.truststore.certificates", "only allowed with"),
])
def test_config_errors_name_the_key(d, extra, key, text):
    with pytest.raises(SslConfigError) as info:
        build_server_context({**server_cfg(d), **extra})
    message = str(info.value)
    assert message.startswith(key + ":") and text in message and "\n" not in message


def test_client_config_errors(d):
    with pytest.raises(SslConfigError, match="ssl.endpoint.identification.algorithm"):
        build_client_context({"ssl.endpoint.identification.algorithm": "ftp"})


# --- cipher suite names -------------------------------------------------------------------------------------------


def test_cipher_table_matches_openssl_names():
    # Lines read "IANA_NAME - OPENSSL-NAME TLSv1.2 Kx=... ".
    rows = [line.split() for line in _run("openssl", "ciphers", "-stdname", "ALL").splitlines()]
    pairs = {row[0]: row[2] for row in rows if len(row) > 2 and row[1] == "-"}
    assert {iana: pairs.get(iana) for iana in IANA_TO_OPENSSL} == IANA_TO_OPENSSL


def test_cipher_name_translation():
    legacy, tls13 = openssl_cipher_names(["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                                          "TLS_EMPTY_RENEGOTIATION_INFO_SCSV", "SSL_RSA_WITH_AES_128_CBC_SHA"])
    assert legacy == ["ECDHE-ECDSA-AES256-GCM-SHA384", "AES128-SHA"]
    assert tls13 == ["TLS_CHACHA20_POLY1305_SHA256"]
    with pytest.raises(SslConfigError, match="TLS_RSA_WITH_RC4_128_MD5"):
        openssl_cipher_names(["TLS_RSA_WITH_RC4_128_MD5"])
