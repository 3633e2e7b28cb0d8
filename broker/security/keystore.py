"""Read Kafka's key and trust stores (JKS, PKCS12, PEM) into PEM bytes that Python's ``ssl`` can load.

Kafka hands ``ssl.keystore.*``/``ssl.truststore.*`` to Java's ``KeyStore``; brokers migrating from Kafka keep their
files, so we read the same formats. JKS, Kafka's default type, has no Python reader, so it is parsed here from
Java's published format. PKCS12 and PEM go through ``cryptography``.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import struct
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.security.der import oid_text, read_tlv

STORE_TYPES = ("JKS", "PKCS12", "PEM")

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"
_JKS_KEY_ENTRY, _JKS_CERT_ENTRY, _JCEKS_SECRET_ENTRY = 1, 2, 3
# Integrity digest salt used by Sun's JavaKeyStore: SHA-1(password UTF-16BE + this + store bytes).
_JKS_WHITENER = b"Mighty Aphrodite"
# OID 1.3.6.1.4.1.42.2.17.1.1: Sun's proprietary "JKS key protector" (SHA-1 keystream XOR).
_JKS_KEY_PROTECTOR_OID = "1.3.6.1.4.1.42.2.17.1.1"
_SHA1_LEN = 20
TAMPERED = "Keystore was tampered with, or password was incorrect"

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----", re.DOTALL)
_KEY_LABELS = (b"PRIVATE KEY", b"ENCRYPTED PRIVATE KEY", b"RSA PRIVATE KEY", b"EC PRIVATE KEY", b"DSA PRIVATE KEY")


class KeystoreError(Exception):
    """A store could not be read; the message is one line, fit for a startup error."""


@dataclass(frozen=True)
class KeyMaterial:
    """A private key (unencrypted PKCS#8 PEM, kept in memory only) and its chain (PEM, leaf first)."""

    key_pem: bytes
    chain_pem: bytes


# --- public API ---------------------------------------------------------------------------------------------------


def load_keystore(path: str, store_type: str | None, password: str | None,
                  key_password: str | None = None) -> KeyMaterial:
    """Load the private key entry of a key store, as Kafka's ``ssl.keystore.*`` configure it.

    For JKS/PKCS12 the key password falls back to the store password, as Kafka does. For PEM the store password is
    unused (Kafka forbids it) and ``key_password`` decrypts an encrypted key. With several key entries the first one
    in the file wins (Java would pick per handshake by key type).
    """
    kind = _store_type(store_type)
    data = _read(path, "keystore")
    where = f"keystore {path}"
    if kind == "PEM":
        return _pem_key_material(data, key_password, where)
    effective_key_password = key_password if key_password is not None else password
    if _is_jks(data, where):
        return _jks_key_material(data, password, effective_key_password, where)
    return _pkcs12_key_material(data, password, where)


def load_pem_keystore_inline(key_pem: str | bytes, chain_pem: str | bytes,
                             key_password: str | None = None) -> KeyMaterial:
    """Key material from Kafka's inline ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` values."""
    key_data = _as_bytes(key_pem)
    chain_data = _as_bytes(chain_pem)
    where = "ssl.keystore.key"
    key = _pem_private_key(key_data, key_password, where)
    certs = _pem_certificates(chain_data)
    if not certs:
        raise KeystoreError("ssl.keystore.certificate.chain holds no PEM certificate")
    return _material(key, _leaf_first(key, certs, "ssl.keystore.certificate.chain"))


def load_truststore(path: str, store_type: str | None, password: str | None) -> list[bytes]:
    """Trusted certificates (one PEM each) of a trust store, as Kafka's ``ssl.truststore.*`` configure it.

    Like Java, a JKS store read without a password skips the integrity check, and the leaf certificate of a key entry
    counts as trusted too. From PKCS12 every certificate is taken (Java keeps only those marked trusted).
    """
    kind = _store_type(store_type)
    data = _read(path, "truststore")
    where = f"truststore {path}"
    if kind == "PEM":
        certs = _pem_certificates(data)
    elif _is_jks(data, where):
        store = _parse_jks(data, password, where)
        certs = [x509.load_der_x509_certificate(der) for der in store.trusted]
        certs += [x509.load_der_x509_certificate(chain[0]) for _, _, chain in store.keys if chain]
    else:
        loaded = _load_pkcs12(data, password, where)
        certs = ([loaded.cert.certificate] if loaded.cert else []) + [c.certificate for c in loaded.additional_certs]
    if not certs:
        raise KeystoreError(f"{where} holds no certificate")
    return [_cert_pem(c) for c in certs]


def load_pem_truststore_inline(certs_pem: str | bytes) -> list[bytes]:
    """Trusted certificates from Kafka's inline ``ssl.truststore.certificates`` value."""
    certs = _pem_certificates(_as_bytes(certs_pem))
    if not certs:
        raise KeystoreError("ssl.truststore.certificates holds no PEM certificate")
    return [_cert_pem(c) for c in certs]


# --- common helpers -----------------------------------------------------------------------------------------------


def _store_type(store_type: str | None) -> str:
    kind = (store_type or "JKS").strip().upper()
    if kind not in STORE_TYPES:
        raise KeystoreError(f"unsupported store type {store_type!r}: expected one of {', '.join(STORE_TYPES)}")
    return kind


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise KeystoreError(f"{what} file not found: {path}") from None
    except OSError as e:
        raise KeystoreError(f"cannot read {what} file {path}: {e.strerror or e}") from None


def _is_jks(data: bytes, where: str) -> bool:
    """Pick the parser by content, not by configured type.

    Java's ``keystore.type.compat=true`` (the default since Java 8) makes the JKS and PKCS12 KeyStore types each load
    files of the other format; Java 9+ keytool writes PKCS12 unless ``-storetype JKS``, so a PKCS12 file configured
    as JKS is common and must load. We do the same: JKS magic means JKS, a DER SEQUENCE means PKCS12.
    """
    if data[:4] == _JKS_MAGIC:
        return True
    if data[:4] == _JCEKS_MAGIC:
        raise KeystoreError(f"{where} is a JCEKS store, which is not supported: convert it to PKCS12")
    if data[:1] == b"\x30":
        return False
    raise KeystoreError(f"{where} is neither a JKS nor a PKCS12 store")


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _material(key, chain: list[x509.Certificate]) -> KeyMaterial:
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return KeyMaterial(key_pem=key_pem, chain_pem=b"".join(_cert_pem(c) for c in chain))


def _spki(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _leaf_first(key, certs: list[x509.Certificate], where: str) -> list[x509.Certificate]:
    """Put the certificate matching the key first: TLS sends the leaf first, PEM files are not always ordered."""
    wanted = _spki(key.public_key())
    for i, cert in enumerate(certs):
        if _spki(cert.public_key()) == wanted:
            return [cert] + certs[:i] + certs[i + 1:]
    raise KeystoreError(f"the private key matches no certificate in {where}")


# --- PEM ----------------------------------------------------------------------------------------------------------


def _pem_blocks(data: bytes) -> list[tuple[bytes, bytes]]:
    return [(m.group(1), m.group(0)) for m in _PEM_BLOCK.finditer(data)]


def _pem_certificates(data: bytes) -> list[x509.Certificate]:
    certs = []
    for label, block in _pem_blocks(data):
        if label == b"CERTIFICATE":
            try:
                certs.append(x509.load_pem_x509_certificate(block))
            except ValueError as e:
                raise KeystoreError(f"invalid PEM certificate: {e}") from None
    return certs


def _pem_private_key(data: bytes, key_password: str | None, where: str):
    blocks = [block for label, block in _pem_blocks(data) if label in _KEY_LABELS]
    if not blocks:
        raise KeystoreError(f"no PEM private key in {where}")
    if len(blocks) > 1:
        raise KeystoreError(f"expected one private key in {where}, found {len(blocks)}")
    password = key_password.encode("utf-8") if key_password is not None else None
    try:
        return serialization.load_pem_private_key(blocks[0], password)
    except TypeError:
        if password is None:
            raise KeystoreError(f"the private key in {where} is encrypted but no key password is set") from None
        # A key password with an unencrypted key: Kafka would fail, we just ignore the password.
        return serialization.load_pem_private_key(blocks[0], None)
    except ValueError:
        raise KeystoreError(f"cannot read the private key in {where}: wrong key password or corrupt key") from None
    except Exception as e:  # unsupported algorithm and the like
        raise KeystoreError(f"cannot read the private key in {where}: {e}") from None


def _pem_key_material(data: bytes, key_password: str | None, where: str) -> KeyMaterial:
    key = _pem_private_key(data, key_password, where)
    certs = _pem_certificates(data)
    if not certs:
        raise KeystoreError(f"no PEM certificate in {where}")
    return _material(key, _leaf_first(key, certs, where))


# --- PKCS12 -------------------------------------------------------------------------------------------------------


def _load_pkcs12(data: bytes, password: str | None, where: str):
    secret = password.encode("utf-8") if password is not None else None
    try:
        return pkcs12.load_pkcs12(data, secret)
    except ValueError:
        if password is None:
            raise KeystoreError(f"cannot read PKCS12 {where} without a password") from None
        raise KeystoreError(f"cannot read PKCS12 {where}: {TAMPERED}") from None
    except Exception as e:  # e.g. an unsupported encryption scheme
        raise KeystoreError(f"cannot read PKCS12 {where}: {e}") from None


def _pkcs12_key_material(data: bytes, password: str | None, where: str) -> KeyMaterial:
    loaded = _load_pkcs12(data, password, where)
    if loaded.key is None or loaded.cert is None:
        raise KeystoreError(f"{where} holds no private key entry")
    leaf = loaded.cert.certificate
    return _material(loaded.key, _chain_from(leaf, [c.certificate for c in loaded.additional_certs]))


def _chain_from(leaf: x509.Certificate, pool: list[x509.Certificate]) -> list[x509.Certificate]:
    """Follow issuer names from the leaf: a PKCS12 file lists its certificates in no guaranteed order."""
    chain = [leaf]
    remaining = list(pool)
    current = leaf
    while current.issuer != current.subject:
        parent = next((c for c in remaining if c.subject == current.issuer), None)
        if parent is None:
            break
        chain.append(parent)
        remaining.remove(parent)
        current = parent
    return chain


# --- JKS ----------------------------------------------------------------------------------------------------------


@dataclass
class _JksStore:
    keys: list[tuple[str, bytes, list[bytes]]]  # alias, protected key (EncryptedPrivateKeyInfo DER), chain DERs
    trusted: list[bytes]  # trusted certificate DERs


class _Cursor:
    """Big-endian reader over the store bytes; any overrun is a corrupt store."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.pos, self.where = data, 0, where

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise KeystoreError(f"{self.where} is truncated or corrupt")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def utf(self) -> str:
        # Java's DataOutput.writeUTF: u16 length + modified UTF-8; aliases are plain text in practice.
        return self.take(self.u16()).decode("utf-8", errors="replace")

    def cert(self, version: int) -> bytes:
        if version == 2:
            cert_type = self.utf()
            if cert_type != "X.509":
                raise KeystoreError(f"{self.where} holds a {cert_type} certificate; only X.509 is supported")
        return self.take(self.u32())


def _password_bytes(password: str) -> bytes:
    """Java feeds a char[] password as two big-endian bytes per UTF-16 unit."""
    return password.encode("utf-16-be")


def _parse_jks(data: bytes, password: str | None, where: str) -> _JksStore:
    """Parse a JKS store (magic 0xFEEDFEED, version 1 or 2) and check its trailing SHA-1 digest if a password is set."""
    cur = _Cursor(data, where)
    cur.take(4)  # magic, checked by _is_jks
    version = cur.u32()
    if version not in (1, 2):
        raise KeystoreError(f"{where} has unsupported JKS version {version}")
    store = _JksStore(keys=[], trusted=[])
    for _ in range(cur.u32()):
        tag = cur.u32()
        alias = cur.utf()
        cur.take(8)  # creation date, ms since epoch
        if tag == _JKS_KEY_ENTRY:
            protected = cur.take(cur.u32())
            chain = [cur.cert(version) for _ in range(cur.u32())]
            store.keys.append((alias, protected, chain))
        elif tag == _JKS_CERT_ENTRY:
            store.trusted.append(cur.cert(version))
        elif tag == _JCEKS_SECRET_ENTRY:
            raise KeystoreError(f"{where} holds a secret-key entry, which JKS cannot hold")
        else:
            raise KeystoreError(f"{where} has an unknown JKS entry tag {tag}")
    body_end = cur.pos
    digest = cur.take(_SHA1_LEN)
    if password is not None:  # Java skips the integrity check when no password is given
        expected = hashlib.sha1(_password_bytes(password) + _JKS_WHITENER + data[:body_end]).digest()
        if not hmac.compare_digest(expected, digest):
            raise KeystoreError(f"cannot read JKS {where}: {TAMPERED}")
    return store


def _jks_key_material(data: bytes, password: str | None, key_password: str | None, where: str) -> KeyMaterial:
    if password is None:
        raise KeystoreError(f"cannot read JKS {where} without a password")
    store = _parse_jks(data, password, where)
    if not store.keys:
        raise KeystoreError(f"{where} holds no private key entry")
    alias, protected, chain = store.keys[0]
    if not chain:
        raise KeystoreError(f"key entry {alias!r} in {where} has no certificate chain")
    plain = _jks_recover_key(protected, key_password or "", alias, where)
    try:
        key = serialization.load_der_private_key(plain, None)
    except Exception as e:
        raise KeystoreError(f"key entry {alias!r} in {where} is not a usable PKCS#8 key: {e}") from None
    return _material(key, [x509.load_der_x509_certificate(der) for der in chain])


def _jks_recover_key(protected: bytes, key_password: str, alias: str, where: str) -> bytes:
    """Undo Sun's JKS key protector.

    The payload is salt(20) | key XOR keystream | check(20); the keystream is the chain of
    SHA-1(password || previous), starting from the salt; check = SHA-1(password || plaintext key).
    """
    oid, payload = _encrypted_private_key_info(protected, alias, where)
    if oid != _JKS_KEY_PROTECTOR_OID:
        raise KeystoreError(f"key entry {alias!r} in {where} uses unsupported protection algorithm {oid}")
    if len(payload) < 2 * _SHA1_LEN:
        raise KeystoreError(f"key entry {alias!r} in {where} is corrupt")
    salt, encrypted, check = payload[:_SHA1_LEN], payload[_SHA1_LEN:-_SHA1_LEN], payload[-_SHA1_LEN:]
    secret = _password_bytes(key_password)
    stream = bytearray()
    block = salt
    while len(stream) < len(encrypted):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(encrypted, stream[:len(encrypted)], strict=True))
    if not hmac.compare_digest(hashlib.sha1(secret + plain).digest(), check):
        raise KeystoreError(f"cannot recover key {alias!r} from {where}: wrong key password")
    return plain


def _encrypted_private_key_info(der: bytes, alias: str, where: str) -> tuple[str, bytes]:
    """(algorithm OID, encrypted bytes) of SEQUENCE { SEQUENCE { OID, params }, OCTET STRING }."""
    try:
        tag, body, _ = _tlv(der, 0)
        if tag != 0x30:
            raise ValueError
        tag, alg, after_alg = _tlv(der, body[0])
        if tag != 0x30:
            raise ValueError
        tag, oid_span, _ = _tlv(der, alg[0])
        if tag != 0x06:
            raise ValueError
        tag, data, _ = _tlv(der, after_alg)
        if tag != 0x04:
            raise ValueError
    except (ValueError, IndexError):
        raise KeystoreError(f"key entry {alias!r} in {where} is not an EncryptedPrivateKeyInfo") from None
    return _oid_text(der[oid_span[0]:oid_span[1]]), der[data[0]:data[1]]


def _tlv(der: bytes, pos: int) -> tuple[int, tuple[int, int], int]:
    """(tag, (value start, value end), next position) of the DER element at ``pos``."""
    tag, start, end = read_tlv(der, pos)
    return tag, (start, end), end


_oid_text = oid_text
