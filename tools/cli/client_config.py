"""Client properties in Kafka's Java names (``--command-config``, ``--producer.config``, ``--consumer-property``
...) mapped to confluent-kafka/librdkafka settings and to the raw protocol client's :class:`Security`.

Kafka's tools hand such files to the Java clients; users keep theirs, so the Java names are read here:

- security: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism`` (PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.jaas.config`` (PlainLoginModule/ScramLoginModule ``username`` and
  ``password`` become librdkafka's ``sasl.username``/``sasl.password``);
- TLS: ``ssl.truststore.location``/``type``/``password`` and ``ssl.keystore.location``/``type``/``password``/
  ``ssl.key.password`` in JKS (Java's default), PKCS12 or PEM, and the inline PEM keys ``ssl.truststore.certificates``,
  ``ssl.keystore.key``, ``ssl.keystore.certificate.chain``: each store is read with the broker's own reader
  (``broker.security.keystore``) and handed to librdkafka as PEM text (``ssl.ca.pem``, ``ssl.certificate.pem``,
  ``ssl.key.pem``), so no key is ever written to disk; ``ssl.endpoint.identification.algorithm`` ("" turns host
  name checking off, as in Java);
- the usual client, producer and consumer keys (``client.id``, ``request.timeout.ms``, ``acks``, ``linger.ms``,
  ``batch.size``, ``compression.type``, ``enable.idempotence``, ``group.id``, ``auto.offset.reset``,
  ``isolation.level``, ``fetch.max.wait.ms`` ...), renamed where librdkafka's name differs;
- ``librdkafka.<name>`` passes ``<name>`` to librdkafka unchanged, for tuning librdkafka has and Java has not.

Keys Java knows but librdkafka has no equivalent for (serializer classes, ``ssl.protocol``, ``max.poll.records``
...) are accepted without effect; anything else prints one ``WARNING`` line on stderr and is ignored.
GSSAPI and OAUTHBEARER logins are refused (the broker does not offer them).
"""
from __future__ import annotations

import os
import ssl
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

from broker.config.properties import load_properties
from broker.security.jaas import JaasConfigError, parse_jaas_config
from broker.security.keystore import (KeystoreError, load_keystore, load_pem_keystore_inline,
                                      load_pem_truststore_inline, load_truststore)

from .options import CommandError

__all__ = ["Security", "ClientConfig", "build_client_config", "parse_key_values", "load_properties_file"]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: Java name -> librdkafka name, the same for every role
_COMMON = {
    "client.id": "client.id", "metadata.max.age.ms": "metadata.max.age.ms",
    "connections.max.idle.ms": "connections.max.idle.ms", "reconnect.backoff.ms": "reconnect.backoff.ms",
    "reconnect.backoff.max.ms": "reconnect.backoff.max.ms", "retry.backoff.ms": "retry.backoff.ms",
    "retry.backoff.max.ms": "retry.backoff.max.ms", "client.dns.lookup": "client.dns.lookup",
    "socket.connection.setup.timeout.ms": "socket.connection.setup.timeout.ms",
    "send.buffer.bytes": "socket.send.buffer.bytes", "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "sasl.kerberos.service.name": "sasl.kerberos.service.name",
}
_PRODUCER = {
    "acks": "acks", "linger.ms": "linger.ms", "batch.size": "batch.size", "compression.type": "compression.type",
    "enable.idempotence": "enable.idempotence", "transactional.id": "transactional.id",
    "transaction.timeout.ms": "transaction.timeout.ms", "retries": "retries",
    "max.in.flight.requests.per.connection": "max.in.flight.requests.per.connection",
    "request.timeout.ms": "request.timeout.ms", "delivery.timeout.ms": "message.timeout.ms",
    "max.request.size": "message.max.bytes",
}
_CONSUMER = {
    "group.id": "group.id", "group.instance.id": "group.instance.id", "enable.auto.commit": "enable.auto.commit",
    "auto.commit.interval.ms": "auto.commit.interval.ms", "isolation.level": "isolation.level",
    "fetch.min.bytes": "fetch.min.bytes", "fetch.max.bytes": "fetch.max.bytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms", "max.partition.fetch.bytes": "max.partition.fetch.bytes",
    "session.timeout.ms": "session.timeout.ms", "heartbeat.interval.ms": "heartbeat.interval.ms",
    "max.poll.interval.ms": "max.poll.interval.ms", "check.crcs": "check.crcs", "client.rack": "client.rack",
    "allow.auto.create.topics": "allow.auto.create.topics", "group.protocol": "group.protocol",
}
#: Java keys accepted without effect: librdkafka has no such setting, or the tool already does what they ask
_NO_EFFECT = {
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer", "ssl.protocol",
    "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.truststore.type", "ssl.truststore.password", "ssl.keystore.type",
    "ssl.keystore.password", "ssl.key.password", "max.poll.records", "exclude.internal.topics",
    "max.block.ms", "default.api.timeout.ms", "request.timeout.ms", "metric.reporters", "metrics.num.samples",
    "metrics.sample.window.ms", "metrics.recording.level", "auto.include.jmx.reporter", "enable.metrics.push",
    "bootstrap.controllers", "security.providers", "internal.leave.group.on.close",
}
_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range", "range": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin", "roundrobin": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "cooperative-sticky": "cooperative-sticky",
}


@dataclass
class Security:
    """How the raw protocol client connects: TLS material as PEM, SASL mechanism and login."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "GSSAPI"
    username: Optional[str] = None
    password: Optional[str] = None
    ca_pem: Optional[bytes] = None
    cert_pem: Optional[bytes] = None
    key_pem: Optional[bytes] = None
    check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context trusting ``ca_pem`` (else the system store), with the client key if any."""
        ctx = ssl.create_default_context(cadata=self.ca_pem.decode() if self.ca_pem else None)
        ctx.check_hostname = self.check_hostname
        if self.cert_pem and self.key_pem:
            # ssl can only load a key from a file: a private temporary one, removed at once
            fd, path = tempfile.mkstemp(prefix="kafka-tool-", suffix=".pem")
            try:
                os.write(fd, self.key_pem + b"\n" + self.cert_pem)
                os.close(fd)
                ctx.load_cert_chain(path)
            finally:
                os.unlink(path)
        return ctx


@dataclass
class ClientConfig:
    """One client's settings: ``librdkafka`` for confluent-kafka, ``security``/timeouts for the raw client."""

    java: Dict[str, str]
    librdkafka: Dict[str, Any]
    security: Security
    request_timeout_ms: int = 30000
    default_api_timeout_ms: int = 60000
    warnings: List[str] = field(default_factory=list)

    @property
    def client_id(self) -> Optional[str]:
        return self.java.get("client.id")


def load_properties_file(path: str) -> Dict[str, str]:
    """A Java .properties file; a missing or unreadable file is a one-line error."""
    try:
        return load_properties(path)
    except OSError as e:
        raise CommandError(f"Cannot read properties file {path}: {e.strerror or e}") from None


def parse_key_values(items: Iterable[str], what: str = "property") -> Dict[str, str]:
    """``key=value`` arguments (``--producer-property``, ``--property`` ...); a value may itself hold '='."""
    out: Dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise CommandError(f"Invalid {what} '{item}': expected key=value")
        out[key.strip()] = value.strip()
    return out


def build_client_config(java: Dict[str, str], role: str, bootstrap: Optional[str] = None,
                        warn: Optional[Callable[[str], None]] = None) -> ClientConfig:
    """Translate Java client properties for ``role`` ("admin", "producer" or "consumer").

    ``bootstrap`` (the tool's ``--bootstrap-server``) wins over ``bootstrap.servers`` in the file, as in Kafka's
    tools. Warnings go to ``warn`` (default: stderr)."""
    props = dict(java)
    if bootstrap:
        props["bootstrap.servers"] = bootstrap
    out: Dict[str, Any] = {}
    warnings: List[str] = []
    table = dict(_COMMON)
    if role == "producer":
        table.update(_PRODUCER)
    elif role == "consumer":
        table.update(_CONSUMER)
    security = _security(props)
    out.update(_librdkafka_security(security))
    handled = {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
               "ssl.truststore.location", "ssl.truststore.certificates", "ssl.keystore.location",
               "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.endpoint.identification.algorithm",
               "ssl.cipher.suites"}
    for key, value in props.items():
        if key == "bootstrap.servers":
            out["bootstrap.servers"] = value
        elif key.startswith("librdkafka."):
            out[key[len("librdkafka."):]] = value
        elif key in table:
            out[table[key]] = value
        elif key == "buffer.memory" and role == "producer":
            out["queue.buffering.max.kbytes"] = max(1, int(value) // 1024)
        elif key == "auto.offset.reset" and role == "consumer":
            out["auto.offset.reset"] = "error" if value == "none" else value
        elif key == "partition.assignment.strategy" and role == "consumer":
            names = [_ASSIGNORS.get(v.strip()) for v in value.split(",") if v.strip()]
            if None in names:
                warnings.append(f"WARNING: partition.assignment.strategy '{value}' is not available in this tool's "
                                "client (range, roundrobin, cooperative-sticky are); using the default")
            else:
                out["partition.assignment.strategy"] = ",".join(n for n in names if n)
        elif key in handled or key in _NO_EFFECT or key in _PRODUCER or key in _CONSUMER:
            continue
        else:
            warnings.append(f"WARNING: The configuration '{key}' was supplied but isn't a known config.")
    emit = warn or (lambda line: print(line, file=sys.stderr))
    for w in warnings:
        emit(w)
    return ClientConfig(java=props, librdkafka=out, security=security,
                        request_timeout_ms=_int(props, "request.timeout.ms", 30000),
                        default_api_timeout_ms=_int(props, "default.api.timeout.ms", 60000), warnings=warnings)


def _int(props: Dict[str, str], key: str, default: int) -> int:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise CommandError(f"Invalid value {raw} for configuration {key}: Not a number of type INT") from None


def _security(props: Dict[str, str]) -> Security:
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        raise CommandError(f"Invalid value {props['security.protocol']} for configuration security.protocol: "
                           f"String must be one of: {', '.join(_PROTOCOLS)}")
    sec = Security(protocol=protocol)
    if sec.uses_sasl:
        sec.sasl_mechanism = props.get("sasl.mechanism", "GSSAPI").strip()
        if sec.sasl_mechanism not in _MECHANISMS:
            raise CommandError(f"sasl.mechanism={sec.sasl_mechanism} is not supported by this broker's tools: "
                               f"the broker offers {', '.join(_MECHANISMS)}")
        jaas = props.get("sasl.jaas.config")
        if jaas is None:
            raise CommandError("sasl.jaas.config must be set for a SASL login (this tool reads no JAAS file)")
        try:
            modules = parse_jaas_config(jaas)
        except JaasConfigError as e:
            raise CommandError(f"Invalid sasl.jaas.config: {e}") from None
        opts = modules[0].options
        if "username" not in opts or "password" not in opts:
            raise CommandError("sasl.jaas.config must give username and password")
        sec.username, sec.password = opts["username"], opts["password"]
    if sec.uses_tls:
        try:
            sec.ca_pem = _truststore(props)
            sec.cert_pem, sec.key_pem = _keystore(props)
        except KeystoreError as e:
            raise CommandError(str(e)) from None
        sec.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https").strip() != ""
    return sec


def _truststore(props: Dict[str, str]) -> Optional[bytes]:
    if props.get("ssl.truststore.certificates"):
        return b"".join(load_pem_truststore_inline(props["ssl.truststore.certificates"]))
    if props.get("ssl.truststore.location"):
        return b"".join(load_truststore(props["ssl.truststore.location"], props.get("ssl.truststore.type"),
                                        props.get("ssl.truststore.password")))
    return None


def _keystore(props: Dict[str, str]) -> tuple[Optional[bytes], Optional[bytes]]:
    if props.get("ssl.keystore.key"):
        m = load_pem_keystore_inline(props["ssl.keystore.key"], props.get("ssl.keystore.certificate.chain", ""),
                                     props.get("ssl.key.password"))
        return m.chain_pem, m.key_pem
    if props.get("ssl.keystore.location"):
        m = load_keystore(props["ssl.keystore.location"], props.get("ssl.keystore.type"),
                          props.get("ssl.keystore.password"), props.get("ssl.key.password"))
        return m.chain_pem, m.key_pem
    return None, None


def _librdkafka_security(sec: Security) -> Dict[str, Any]:
    out: Dict[str, Any] = {"security.protocol": sec.protocol}
    if sec.uses_sasl:
        out.update({"sasl.mechanism": sec.sasl_mechanism, "sasl.username": sec.username,
                    "sasl.password": sec.password})
    if sec.uses_tls:
        if sec.ca_pem:
            out["ssl.ca.pem"] = sec.ca_pem.decode()
        if sec.cert_pem and sec.key_pem:
            out["ssl.certificate.pem"] = sec.cert_pem.decode()
            out["ssl.key.pem"] = sec.key_pem.decode()
        out["ssl.endpoint.identification.algorithm"] = "https" if sec.check_hostname else "none"
    return out
