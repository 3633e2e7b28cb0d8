"""How the broker's listeners and its own connections to other brokers are secured, from its config.

For each listener: a server TLS context (SSL, SASL_SSL), a SASL authenticator factory (SASL_*),
and the certificate-to-principal mapping (SSL). For the inter-broker listener: the client side
(a client TLS context, the SASL mechanism and the broker's own login from that listener's JAAS
config). Keystore and JAAS problems surface here at start-up as one-line ConfigErrors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from broker.api.sasl_authenticator import SaslListenerConfig, SaslServerAuthenticator, TokenScramLookup
from broker.config.listener_security import login_module_for, resolve_listener
from broker.config.types import ConfigError
from broker.security.credential_cache import ScramCredentialCache
from broker.security.jaas import plain_users
from broker.security.keystore import KeystoreError
from broker.security.principal import SslPrincipalMapper, ssl_principal
from broker.security.ssl_factory import SslConfigError, build_client_context, build_server_context


@dataclass
class ListenerSecurityRuntime:
    """What SocketServer needs for one listener (server.py turns it into a ListenerSpec)."""

    ssl_context: Any = None
    authenticator_factory: Optional[Callable[[], SaslServerAuthenticator]] = None
    certificate_principal: Optional[Callable[[Optional[bytes]], str]] = None


@dataclass
class ClientSecurity:
    """How this broker connects to the others' inter-broker listener."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: Any = None
    sasl_mechanism: Optional[str] = None
    username: Optional[str] = None
    password: Optional[str] = None


def _ssl_error(listener: str, exc: Exception) -> ConfigError:
    return ConfigError(f"listener {listener}", "", message=f"Cannot set up TLS for listener {listener}: {exc}")


def build_listener_security(cfg: Any, credentials: ScramCredentialCache,
                            tokens: Optional[TokenScramLookup] = None) -> Dict[str, ListenerSecurityRuntime]:
    """Per listener name; raises ConfigError with one line on a bad keystore, truststore or rule."""
    out: Dict[str, ListenerSecurityRuntime] = {}
    failed_delay_ms = int(cfg.get("connection.failed.authentication.delay.ms"))
    for e in cfg.listeners:
        sec = resolve_listener(cfg, e.listener_name, e.security_protocol)
        rt = ListenerSecurityRuntime()
        if sec.uses_tls:
            try:
                rt.ssl_context = build_server_context(sec.ssl)
                mapper = SslPrincipalMapper(str(sec.ssl.get("ssl.principal.mapping.rules") or "DEFAULT"))
            except (SslConfigError, KeystoreError, ValueError) as exc:
                raise _ssl_error(e.listener_name, exc) from None
            rt.certificate_principal = lambda der, m=mapper: ssl_principal(der, m)
        if sec.uses_sasl:
            users: Dict[str, str] = {}
            if "PLAIN" in sec.sasl_mechanisms:
                users = plain_users(sec.jaas.get("PLAIN", []))
            conf = SaslListenerConfig(e.listener_name, list(sec.sasl_mechanisms), users, sec.reauth_ms,
                                      failed_delay_ms, sec.max_receive_size)
            rt.authenticator_factory = (lambda conf=conf: SaslServerAuthenticator(conf, credentials, tokens))
        out[e.listener_name] = rt
    return out


def build_inter_broker_client(cfg: Any) -> ClientSecurity:
    """The inter-broker listener's protocol, seen from the connecting side."""
    name = cfg.inter_broker_listener_name
    endpoint = next((e for e in cfg.listeners if e.listener_name == name), None)
    if endpoint is None:
        return ClientSecurity()
    sec = resolve_listener(cfg, name, endpoint.security_protocol)
    out = ClientSecurity(endpoint.security_protocol)
    if sec.uses_tls:
        try:
            out.ssl_context = build_client_context(sec.ssl)
        except (SslConfigError, KeystoreError) as exc:
            raise _ssl_error(name, exc) from None
    if sec.uses_sasl:
        mech = str(cfg.get("sasl.mechanism.inter.broker.protocol"))
        module = login_module_for(sec.jaas.get(mech, []), mech)
        assert module is not None  # KafkaConfig validated it
        out.sasl_mechanism, out.username, out.password = mech, module.options["username"], module.options["password"]
    return out


__all__ = ["build_listener_security", "build_inter_broker_client", "ListenerSecurityRuntime", "ClientSecurity"]
