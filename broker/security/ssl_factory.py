"""Build the ``ssl.SSLContext`` of a listener (server) or of an inter-broker connection (client) from Kafka's ``ssl.*``.

``cfg`` is a plain mapping of Kafka keys to resolved values (strings, lists, None). The checks and their order follow
Kafka's ``DefaultSslEngineFactory`` so a broker config that Kafka refuses is refused here too, with one-line
:class:`SslConfigError` messages that name the key.
"""
from __future__ import annotations

import os
import secrets
import shutil
import ssl
import tempfile
from typing import Any, Mapping

from cryptography.hazmat.primitives import serialization

from broker.security.keystore import (
    STORE_TYPES,
    KeyMaterial,
    KeystoreError,
    load_keystore,
    load_pem_keystore_inline,
    load_pem_truststore_inline,
    load_truststore,
)

DEFAULT_ENABLED_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
# What Java's SSLContext.getInstance accepts for ``ssl.protocol``; the enabled protocols decide what is negotiated.
_CONTEXT_PROTOCOLS = {"TLS", "TLSV1", "TLSV1.1", "TLSV1.2", "TLSV1.3", "SSL", "SSLV3"}
_PROTOCOL_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

# TLS 1.3 suites carry the same name in IANA, Java and OpenSSL. Python's set_ciphers() cannot restrict them
# (OpenSSL's SSL_CTX_set_ciphersuites is not exposed), so they are accepted and all stay enabled under TLS 1.3.
TLS13_SUITES = frozenset({
    "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256",
})
# Java lists this signalling value among suites; OpenSSL always handles secure renegotiation itself.
_SIGNALLING_SUITES = frozenset({"TLS_EMPTY_RENEGOTIATION_INFO_SCSV"})

# IANA (= Java) names of common TLS 1.2 suites -> OpenSSL names (as `openssl ciphers -stdname` pairs them).
IANA_TO_OPENSSL: dict[str, str] = {
    # ECDHE with ECDSA certificates
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    # ECDHE with RSA certificates
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    # finite-field DHE with RSA certificates
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    # static RSA key exchange
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}


class SslConfigError(ValueError):
    """The ``ssl.*`` configuration cannot produce a context; the one-line message names the offending key."""


def build_server_context(cfg: Mapping[str, Any]) -> ssl.SSLContext:
    """Context for an SSL/SASL_SSL listener: key store required, client certificates per ``ssl.client.auth``."""
    client_auth = _text(cfg, "ssl.client.auth") or "none"
    verify_mode = _CLIENT_AUTH.get(client_auth.strip().lower())
    if verify_mode is None:
        raise SslConfigError(f"ssl.client.auth: invalid value {client_auth!r}, expected none, requested or required")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure_common(ctx, cfg)
    material = _key_material(cfg)
    if material is None:
        raise SslConfigError("ssl.keystore.location: an SSL listener needs a key store (or ssl.keystore.key)")
    _load_key_material(ctx, material)
    # Like Java's TrustManagerFactory with no store, an unset trust store means the platform's default CAs.
    _load_trust(ctx, cfg, ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = verify_mode
    return ctx


def build_client_context(cfg: Mapping[str, Any]) -> ssl.SSLContext:
    """Context for the broker's own outgoing (inter-broker) connections.

    The server is always verified against the trust store; its host name only when
    ``ssl.endpoint.identification.algorithm`` is ``https`` (Kafka's default). A key store, if any, is offered as
    the client certificate.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = _hostname_check(cfg)
    ctx.verify_mode = ssl.CERT_REQUIRED
    _configure_common(ctx, cfg)
    material = _key_material(cfg)
    if material is not None:
        _load_key_material(ctx, material)
    _load_trust(ctx, cfg, ssl.Purpose.SERVER_AUTH)
    return ctx


def openssl_cipher_names(suites: list[str]) -> tuple[list[str], list[str]]:
    """Split Kafka's ``ssl.cipher.suites`` into (OpenSSL names of TLS <= 1.2 suites, TLS 1.3 suite names)."""
    legacy: list[str] = []
    tls13: list[str] = []
    for suite in suites:
        name = suite.strip().upper()
        if name in TLS13_SUITES:
            tls13.append(name)
        elif name in _SIGNALLING_SUITES:
            continue
        elif name in IANA_TO_OPENSSL:
            legacy.append(IANA_TO_OPENSSL[name])
        elif name.startswith("SSL_") and "TLS_" + name[4:] in IANA_TO_OPENSSL:  # Java's legacy SSL_ aliases
            legacy.append(IANA_TO_OPENSSL["TLS_" + name[4:]])
        else:
            raise SslConfigError(f"ssl.cipher.suites: unknown or unsupported cipher suite {suite.strip()!r}")
    return legacy, tls13


# --- config reading -----------------------------------------------------------------------------------------------


def _text(cfg: Mapping[str, Any], key: str) -> str | None:
    """A string value; empty means unset, as an empty ``key=`` line in server.properties usually intends."""
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SslConfigError(f"{key}: expected a string, got {type(value).__name__}")
    return value if value.strip() else None


def _list(cfg: Mapping[str, Any], key: str) -> list[str]:
    value = cfg.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)):
        raise SslConfigError(f"{key}: expected a list, got {type(value).__name__}")
    return [str(v).strip() for v in value if str(v).strip()]


def _hostname_check(cfg: Mapping[str, Any]) -> bool:
    key = "ssl.endpoint.identification.algorithm"
    algorithm = cfg.get(key, "https")
    if algorithm is None or not str(algorithm).strip():
        return False
    if str(algorithm).strip().lower() in ("https", "ldaps"):
        return True
    raise SslConfigError(f"{key}: unsupported value {algorithm!r}, expected https or an empty string")


# --- protocols and cipher suites ----------------------------------------------------------------------------------


def _configure_common(ctx: ssl.SSLContext, cfg: Mapping[str, Any]) -> None:
    protocol = _text(cfg, "ssl.protocol") or "TLSv1.3"
    if protocol.upper() not in _CONTEXT_PROTOCOLS:
        raise SslConfigError(f"ssl.protocol: unknown protocol {protocol!r}")
    low, high = _protocol_range(_list(cfg, "ssl.enabled.protocols") or list(DEFAULT_ENABLED_PROTOCOLS))
    ctx.minimum_version, ctx.maximum_version = low, high
    suites = _list(cfg, "ssl.cipher.suites")
    if not suites:
        return  # Kafka: an empty list keeps the provider's defaults
    legacy, _tls13 = openssl_cipher_names(suites)
    if legacy:
        try:
            ctx.set_ciphers(":".join(legacy))
        except ssl.SSLError:
            raise SslConfigError("ssl.cipher.suites: none of the listed suites is available in this OpenSSL") from None
    elif high < ssl.TLSVersion.TLSv1_3:
        raise SslConfigError("ssl.cipher.suites: only TLS 1.3 suites are listed but TLSv1.3 is not enabled")
    else:
        # Only TLS 1.3 suites listed: Java could then negotiate nothing older, so neither may we.
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3


def _protocol_range(names: list[str]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """Map ``ssl.enabled.protocols`` to OpenSSL's min/max; a gap (TLSv1 + TLSv1.2) cannot be expressed: refused."""
    by_lower = {k.lower(): k for k in _PROTOCOL_VERSIONS}
    versions = []
    for name in names:
        canonical = by_lower.get(name.lower())
        if canonical is None:
            raise SslConfigError(f"ssl.enabled.protocols: unsupported protocol {name!r}, expected some of "
                                 f"{', '.join(_PROTOCOL_VERSIONS)}")
        versions.append(_PROTOCOL_VERSIONS[canonical])
    order = list(_PROTOCOL_VERSIONS.values())
    indexes = sorted({order.index(v) for v in versions})
    if indexes[-1] - indexes[0] + 1 != len(indexes):
        raise SslConfigError(f"ssl.enabled.protocols: {', '.join(names)} leaves a gap, which OpenSSL cannot enable")
    return order[indexes[0]], order[indexes[-1]]


# --- key and trust stores -----------------------------------------------------------------------------------------


def _store_kind(cfg: Mapping[str, Any], key: str) -> str:
    kind = (_text(cfg, key) or "JKS").strip().upper()
    if kind not in STORE_TYPES:
        raise SslConfigError(f"{key}: unsupported store type {kind!r}, expected one of {', '.join(STORE_TYPES)}")
    return kind


def _key_material(cfg: Mapping[str, Any]) -> KeyMaterial | None:
    """The key store, after Kafka's consistency checks between its keys."""
    kind = _store_kind(cfg, "ssl.keystore.type")
    location = _text(cfg, "ssl.keystore.location")
    password = cfg.get("ssl.keystore.password")
    key_password = cfg.get("ssl.key.password")
    inline_key = _text(cfg, "ssl.keystore.key")
    inline_chain = _text(cfg, "ssl.keystore.certificate.chain")
    try:
        if inline_key is not None:
            if kind != "PEM":
                raise SslConfigError(f"ssl.keystore.key: only allowed with ssl.keystore.type=PEM, not {kind}")
            if inline_chain is None:
                raise SslConfigError("ssl.keystore.certificate.chain: required with ssl.keystore.key")
            if location is not None:
                raise SslConfigError("ssl.keystore.location: cannot be combined with ssl.keystore.key")
            if password is not None:
                raise SslConfigError("ssl.keystore.password: not allowed for PEM, use ssl.key.password")
            return load_pem_keystore_inline(inline_key, inline_chain, key_password)
        if inline_chain is not None:
            raise SslConfigError("ssl.keystore.key: required with ssl.keystore.certificate.chain")
        if location is None:
            if password is not None:
                raise SslConfigError("ssl.keystore.location: required when ssl.keystore.password is set")
            return None
        if kind == "PEM":
            if password is not None:
                raise SslConfigError("ssl.keystore.password: not allowed for PEM, use ssl.key.password")
        elif password is None:
            raise SslConfigError("ssl.keystore.password: required when ssl.keystore.location is set")
        return load_keystore(location, kind, password, key_password)
    except KeystoreError as e:
        raise SslConfigError(f"ssl.keystore.location: {e}" if location else f"ssl.keystore.key: {e}") from None


def _trusted_certs(cfg: Mapping[str, Any]) -> list[bytes] | None:
    """The trust store's certificates (None when none is configured), after Kafka's consistency checks."""
    kind = _store_kind(cfg, "ssl.truststore.type")
    location = _text(cfg, "ssl.truststore.location")
    password = cfg.get("ssl.truststore.password")
    inline = _text(cfg, "ssl.truststore.certificates")
    try:
        if inline is not None:
            if kind != "PEM":
                raise SslConfigError(f"ssl.truststore.certificates: only allowed with ssl.truststore.type=PEM, "
                                     f"not {kind}")
            if location is not None:
                raise SslConfigError("ssl.truststore.location: cannot be combined with ssl.truststore.certificates")
            if password is not None:
                raise SslConfigError("ssl.truststore.password: not allowed for PEM")
            return load_pem_truststore_inline(inline)
        if location is None:
            if password is not None:
                raise SslConfigError("ssl.truststore.location: required when ssl.truststore.password is set")
            return None
        if kind == "PEM" and password is not None:
            raise SslConfigError("ssl.truststore.password: not allowed for PEM")
        return load_truststore(location, kind, password)
    except KeystoreError as e:
        key = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise SslConfigError(f"{key}: {e}") from None


def _load_trust(ctx: ssl.SSLContext, cfg: Mapping[str, Any], purpose: ssl.Purpose) -> None:
    certs = _trusted_certs(cfg)
    if certs is None:
        ctx.load_default_certs(purpose)
        return
    try:
        ctx.load_verify_locations(cadata=b"".join(certs).decode("ascii"))
    except ssl.SSLError as e:
        raise SslConfigError(f"ssl.truststore.location: OpenSSL rejected a trusted certificate: {e}") from None


def _load_key_material(ctx: ssl.SSLContext, material: KeyMaterial) -> None:
    """Hand key and chain to OpenSSL.

    Python's ``load_cert_chain`` only reads files, so both go to a private (0700) temp directory that is removed
    right after loading; the key is written re-encrypted under a random one-time password, never in clear.
    """
    one_time = secrets.token_urlsafe(32).encode("ascii")
    key = serialization.load_pem_private_key(material.key_pem, None)
    encrypted_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(one_time))
    workdir = tempfile.mkdtemp(prefix="kafka-ssl-")  # mode 0700
    try:
        chain_path = _write_private(workdir, "chain.pem", material.chain_pem)
        key_path = _write_private(workdir, "key.pem", encrypted_key)
        ctx.load_cert_chain(chain_path, key_path, password=one_time)
    except ssl.SSLError as e:
        raise SslConfigError(f"ssl.keystore.location: OpenSSL rejected the key or certificate chain: {e}") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _write_private(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path
