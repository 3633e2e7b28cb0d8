"""Key and trust stores written by Java's keytool and by openssl, read back; JKS keys are checked against the same
key exported by keytool to PKCS12, so the hand-written JKS decoder is verified by Java itself."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.harness.security import require_tools
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.security.keystore import (
    KeystoreError,
    load_keystore,
    load_pem_keystore_inline,
    load_pem_truststore_inline,
    load_truststore,
)

#: run once, in the native pass of the unit lane (scripts/test.sh): keystores: no record, codec, CRC, varint or index
#: code (no twin) is imported
pytestmark = pytest.mark.twin_independent


@pytest.fixture(autouse=True)
def _tools() -> None:
    """The fixtures are built with the JDK's keytool and openssl: a machine without them fails loudly."""
    require_tools("keytool", "openssl")
JVM_FAST = ["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"]
TAMPERED = "Keystore was tampered with, or password was incorrect"


def keytool(*args: str) -> None:
    _run("keytool", *JVM_FAST, *args)


def _run(*cmd: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    """Stores written by keytool and openssl into a fresh temp directory."""
    d = tmp_path_factory.mktemp("stores")
    ca = ["-keystore", str(d / "ca.p12"), "-storepass", "capass1"]
    srv = ["-keystore", str(d / "server.jks"), "-storepass", "storepass1", "-keypass", "keypass22"]
    keytool("-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=Test CA",
            "-ext", "bc:c", "-validity", "2", "-storetype", "PKCS12", *ca)
    keytool("-exportcert", "-rfc", "-alias", "ca", *ca, "-file", str(d / "ca.pem"))
    # JKS key entry signed by the CA (chain of two) next to a trusted-cert entry; key and store passwords differ.
    keytool("-genkeypair", "-alias", "server", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=server",
            "-validity", "2", "-storetype", "JKS", *srv)
    keytool("-certreq", "-alias", "server", *srv, "-file", str(d / "server.csr"))
    keytool("-gencert", "-alias", "ca", *ca, "-infile", str(d / "server.csr"), "-outfile", str(d / "server.crt"),
            "-validity", "2", "-rfc")
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(d / "ca.pem"), *srv[:4])
    keytool("-importcert", "-alias", "server", "-file", str(d / "server.crt"), *srv)
    # The same entry converted by keytool to PKCS12: Java's own reading of the JKS key, for comparison.
    keytool("-importkeystore", "-srckeystore", str(d / "server.jks"), "-srcstorepass", "storepass1",
            "-srcalias", "server", "-srckeypass", "keypass22", "-destkeystore", str(d / "server.p12"),
            "-deststoretype", "PKCS12", "-deststorepass", "p12pass1", "-destkeypass", "p12pass1")
    # A JKS whose key password is the store password, and keytool's default format (PKCS12 since Java 9).
    keytool("-genkeypair", "-alias", "same", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=same",
            "-validity", "2", "-storetype", "JKS", "-keystore", str(d / "same.jks"), "-storepass", "samepass")
    keytool("-genkeypair", "-alias", "dflt", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=dflt",
            "-validity", "2", "-keystore", str(d / "default.ks"), "-storepass", "dfltpass")
    for store_type, name in (("JKS", "trust.jks"), ("PKCS12", "trust.p12")):
        keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(d / "ca.pem"), "-storetype", store_type,
                "-keystore", str(d / name), "-storepass", "trustpass")
    # PEM: openssl writes PKCS#8, encrypted ("ENCRYPTED PRIVATE KEY") or not.
    _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-days", "1",
         "-subj", "/CN=pem", "-keyout", str(d / "enc.key"), "-passout", "pass:pempass", "-out", str(d / "pem.crt"))
    _run("openssl", "pkcs8", "-in", str(d / "enc.key"), "-passin", "pass:pempass", "-out", str(d / "plain.key"))
    return d


def _key(material) -> object:
    return serialization.load_pem_private_key(material.key_pem, None)


def _chain(material) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(material.chain_pem)


def _subjects(certs) -> list[str]:
    return [c.subject.rfc4514_string() for c in certs]


def test_jks_key_matches_what_java_exports(d):
    material = load_keystore(str(d / "server.jks"), "JKS", "storepass1", "keypass22")
    java = pkcs12.load_pkcs12((d / "server.p12").read_bytes(), b"p12pass1")
    assert _key(material).private_numbers() == java.key.private_numbers()
    chain = _chain(material)
    assert _subjects(chain) == ["CN=server", "CN=Test CA"]
    assert chain[0] == java.cert.certificate


def test_jks_wrong_passwords(d):
    with pytest.raises(KeystoreError, match=TAMPERED):
        load_keystore(str(d / "server.jks"), "JKS", "wrong", "keypass22")
    with pytest.raises(KeystoreError, match="wrong key password"):
        load_keystore(str(d / "server.jks"), "JKS", "storepass1", "wrong")
    with pytest.raises(KeystoreError, match="wrong key password"):  # key password defaults to the store password
        load_keystore(str(d / "server.jks"), "JKS", "storepass1")


def test_jks_key_password_defaults_to_store_password(d):
    material = load_keystore(str(d / "same.jks"), "jks", "samepass")
    assert _subjects(_chain(material)) == ["CN=same"]


def test_jks_tampering_is_detected(d, tmp_path):
    data = bytearray((d / "server.jks").read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / "bad.jks").write_bytes(bytes(data))
    with pytest.raises(KeystoreError, match=TAMPERED):
        load_keystore(str(tmp_path / "bad.jks"), "JKS", "storepass1", "keypass22")
    (tmp_path / "short.jks").write_bytes((d / "server.jks").read_bytes()[:300])
    with pytest.raises(KeystoreError, match="truncated or corrupt"):
        load_keystore(str(tmp_path / "short.jks"), "JKS", "storepass1", "keypass22")


def test_pkcs12_keystore(d):
    material = load_keystore(str(d / "server.p12"), "PKCS12", "p12pass1")
    assert _subjects(_chain(material)) == ["CN=server", "CN=Test CA"]
    with pytest.raises(KeystoreError, match=TAMPERED):
        load_keystore(str(d / "server.p12"), "PKCS12", "wrong")


def test_store_type_compat_like_java(d):
    # keystore.type.compat: a PKCS12 file configured as JKS loads, and a JKS file configured as PKCS12 too.
    assert _subjects(_chain(load_keystore(str(d / "default.ks"), "JKS", "dfltpass"))) == ["CN=dflt"]
    assert _subjects(_chain(load_keystore(str(d / "same.jks"), "PKCS12", "samepass"))) == ["CN=same"]


def test_pem_keystore_file(d, tmp_path):
    # Certificate before the key, as people do write them.
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes((d / "pem.crt").read_bytes() + (d / "enc.key").read_bytes())
    material = load_keystore(str(bundle), "PEM", None, "pempass")
    assert _subjects(_chain(material)) == ["CN=pem"]
    with pytest.raises(KeystoreError, match="encrypted but no key password"):
        load_keystore(str(bundle), "PEM", None)
    with pytest.raises(KeystoreError, match="wrong key password"):
        load_keystore(str(bundle), "PEM", None, "wrong")
    plain = tmp_path / "plain.pem"
    plain.write_bytes((d / "plain.key").read_bytes() + (d / "pem.crt").read_bytes())
    assert load_keystore(str(plain), "PEM", None).key_pem == material.key_pem


def test_pem_keystore_inline(d):
    chain = (d / "ca.pem").read_text() + (d / "pem.crt").read_text()  # leaf not first: reordered
    material = load_pem_keystore_inline((d / "enc.key").read_text(), chain, "pempass")
    assert _subjects(_chain(material)) == ["CN=pem", "CN=Test CA"]
    with pytest.raises(KeystoreError, match="matches no certificate"):
        load_pem_keystore_inline((d / "plain.key").read_text(), (d / "ca.pem").read_text())
    with pytest.raises(KeystoreError, match="no PEM certificate"):
        load_pem_keystore_inline((d / "plain.key").read_text(), "")


def test_truststores(d):
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    for name, store_type, password in (("trust.jks", "JKS", "trustpass"), ("trust.jks", "JKS", None),
                                       ("trust.p12", "PKCS12", "trustpass"), ("ca.pem", "PEM", None)):
        certs = load_truststore(str(d / name), store_type, password)
        assert [x509.load_pem_x509_certificate(c) for c in certs] == [ca], name
    with pytest.raises(KeystoreError, match=TAMPERED):
        load_truststore(str(d / "trust.jks"), "JKS", "wrong")
    with pytest.raises(KeystoreError, match=TAMPERED):
        load_truststore(str(d / "trust.p12"), "PKCS12", "wrong")
    inline = load_pem_truststore_inline((d / "ca.pem").read_text() + (d / "pem.crt").read_text())
    assert len(inline) == 2


def test_jks_truststore_trusts_trusted_entries_and_key_entry_leaves(d):
    # Like Java's trust manager: trusted-cert entries plus the first certificate of each key entry.
    certs = [x509.load_pem_x509_certificate(c) for c in load_truststore(str(d / "server.jks"), "JKS", "storepass1")]
    assert sorted(_subjects(certs)) == ["CN=Test CA", "CN=server"]


def test_file_and_type_errors(d, tmp_path):
    with pytest.raises(KeystoreError, match="keystore file not found: .*missing.jks"):
        load_keystore(str(tmp_path / "missing.jks"), "JKS", "x")
    with pytest.raises(KeystoreError, match="unsupported store type 'BKS'"):
        load_keystore(str(d / "server.jks"), "BKS", "x")
    (tmp_path / "store.jceks").write_bytes(b"\xce\xce\xce\xce" + bytes(40))
    with pytest.raises(KeystoreError, match="JCEKS"):
        load_keystore(str(tmp_path / "store.jceks"), "JKS", "x")
    (tmp_path / "junk").write_bytes(b"hello")
    with pytest.raises(KeystoreError, match="neither a JKS nor a PKCS12"):
        load_truststore(str(tmp_path / "junk"), "JKS", "x")
    with pytest.raises(KeystoreError, match="no private key entry"):
        load_keystore(str(d / "trust.jks"), "JKS", "trustpass")
