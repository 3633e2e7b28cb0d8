"""Per-listener security settings, resolved as Kafka resolves them.

A key ``k`` of listener ``L`` is ``listener.name.<l>.<k>`` if set (``l`` = the listener name in
lower case), else the broker-wide ``k``. A SASL mechanism's JAAS config is
``listener.name.<l>.<mechanism in lower case>.sasl.jaas.config``; without it, the ``KafkaServer``
section (or ``<l>.KafkaServer``) of the JAAS file named by ``-Djava.security.auth.login.config``
in ``KAFKA_OPTS``, as Kafka's JaasContext falls back to it.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from broker.config.types import ConfigError
from broker.security.jaas import JaasConfigError, JaasLoginModule, parse_jaas_config, parse_jaas_file

#: Keys that may be overridden per listener (Kafka's listener-prefixed security configs).
SSL_KEYS = ("ssl.protocol", "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
            "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
            "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
            "ssl.truststore.certificates", "ssl.client.auth", "ssl.cipher.suites",
            "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules", "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm")
SASL_KEYS = ("sasl.enabled.mechanisms", "connections.max.reauth.ms", "sasl.server.max.receive.size")

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass
class ListenerSecurity:
    """What one listener needs to secure its connections."""

    name: str
    protocol: str
    ssl: Dict[str, Any] = field(default_factory=dict)
    sasl_mechanisms: List[str] = field(default_factory=list)
    #: mechanism -> login modules of that mechanism's JAAS config
    jaas: Dict[str, List[JaasLoginModule]] = field(default_factory=dict)
    reauth_ms: int = 0
    max_receive_size: int = 524288

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def _prefixed(originals: Mapping[str, str], listener: str, key: str) -> Optional[str]:
    return originals.get(f"listener.name.{listener.lower()}.{key}")


def _jaas_file_sections() -> Dict[str, List[JaasLoginModule]]:
    """Sections of the JAAS file named in KAFKA_OPTS (-Djava.security.auth.login.config=...), if any."""
    opts = os.environ.get("KAFKA_OPTS", "")
    path = None
    for token in shlex.split(opts):
        m = re.match(r"-Djava\.security\.auth\.login\.config=(.+)", token)
        if m:
            path = m.group(1)
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return parse_jaas_file(f.read())
    except OSError as exc:
        raise ConfigError("java.security.auth.login.config", path,
                          message=f"Cannot read the JAAS file {path}: {exc.strerror or exc}") from None
    except JaasConfigError as exc:
        raise ConfigError("java.security.auth.login.config", path,
                          message=f"Invalid JAAS file {path}: {exc}") from None


def resolve_listener(cfg: Any, listener: str, protocol: str) -> ListenerSecurity:
    """The effective security settings of `listener` (cfg: KafkaConfig). Raises ConfigError (one line)."""
    originals: Mapping[str, str] = cfg.originals
    out = ListenerSecurity(listener, protocol)
    if out.uses_tls:
        from broker.config.types import parse_value
        from broker.config.defs import BROKER_CONFIGS
        for key in SSL_KEYS:
            raw = _prefixed(originals, listener, key)
            out.ssl[key] = parse_value(key, BROKER_CONFIGS[key].type, raw) if raw is not None else cfg.get(key)
    if out.uses_sasl:
        from broker.config.types import parse_value
        from broker.config.defs import BROKER_CONFIGS
        vals = {}
        for key in SASL_KEYS:
            raw = _prefixed(originals, listener, key)
            vals[key] = parse_value(key, BROKER_CONFIGS[key].type, raw) if raw is not None else cfg.get(key)
        out.sasl_mechanisms = [m.strip() for m in vals["sasl.enabled.mechanisms"] if m.strip()]
        out.reauth_ms = int(vals["connections.max.reauth.ms"] or 0)
        out.max_receive_size = int(vals["sasl.server.max.receive.size"])
        file_sections: Optional[Dict[str, List[JaasLoginModule]]] = None
        for mech in out.sasl_mechanisms:
            key = f"listener.name.{listener.lower()}.{mech.lower()}.sasl.jaas.config"
            text = originals.get(key)
            if text is not None:
                try:
                    out.jaas[mech] = parse_jaas_config(text)
                except JaasConfigError as exc:
                    raise ConfigError(key, "[hidden]", message=f"Invalid {key}: {exc}") from None
                continue
            if file_sections is None:
                file_sections = _jaas_file_sections()
            section = file_sections.get(f"{listener.lower()}.KafkaServer") or file_sections.get("KafkaServer")
            if section is not None:
                out.jaas[mech] = section
    return out


def login_module_for(modules: List[JaasLoginModule], mechanism: str) -> Optional[JaasLoginModule]:
    """The login module a mechanism's config must contain (PLAIN: PlainLoginModule, SCRAM: ScramLoginModule)."""
    wanted = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    for m in modules:
        if m.class_name == wanted:
            return m
    return None


__all__ = ["ListenerSecurity", "resolve_listener", "login_module_for", "SSL_KEYS", "SASL_KEYS"]
