"""Security settings this broker does not honour stop start-up, one line naming the key.

A Kafka ``server.properties`` that asks for a security feature expects it to protect data and
access; silently ignoring it would leave a broker more open than its operator believes. This
broker honours TLS (``ssl.*`` below), SASL PLAIN and SCRAM (``sasl.enabled.mechanisms``, JAAS
configs per listener and mechanism, re-authentication), the ACL authorizer and delegation
tokens. Everything else of the security families (Kerberos, OAUTHBEARER, custom callback handlers
or engine factories, ZooKeeper TLS/SASL/ACLs, ...) is refused unless set to its harmless "off"
value; so is any key of those families this table does not know.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Tuple

from broker.config.types import ConfigError

#: Key families that configure security.
SECURITY_PREFIXES: Tuple[str, ...] = ("ssl.", "sasl.", "listener.name.", "zookeeper.ssl.", "delegation.token.")
#: Keys of those families (and single security keys) this broker honours.
HONOURED_KEYS: frozenset = frozenset({
    "ssl.protocol", "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth",
    "ssl.cipher.suites", "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.server.max.receive.size",
    "delegation.token.secret.key", "delegation.token.master.key", "delegation.token.max.lifetime.ms",
    "delegation.token.expiry.time.ms", "delegation.token.expiry.check.interval.ms",
})
#: Listener-prefixed keys honoured: listener.name.<l>.<one of these>, or listener.name.<l>.<mechanism>.sasl.jaas.config
LISTENER_KEYS: frozenset = frozenset(k for k in HONOURED_KEYS if k != "sasl.mechanism.inter.broker.protocol"
                                     and not k.startswith("delegation.token.")) | {
    "connections.max.reauth.ms"}
#: Single keys that configure access control and are not honoured (yet). The authorizer keys are honoured
#: (authorizer.class.name, super.users, allow.everyone.if.no.acl.found): see check_authorizer.
UNSUPPORTED_KEYS: Tuple[str, ...] = ("zookeeper.set.acl", "zookeeper.sasl.client", "zookeeper.clientCnxnSocket")
#: authorizer.class.name values this broker implements: Kafka's ZooKeeper-mode ACL authorizer, and its project alias
ACL_AUTHORIZER_CLASS_NAMES: Tuple[str, ...] = ("kafka.security.authorizer.AclAuthorizer",
                                               "broker.security.AclAuthorizer")
#: Prefixes within the security families that stay refused even when the family is honoured.
UNSUPPORTED_PREFIXES: Tuple[str, ...] = ()
#: Values that switch the feature off, so setting them protects nothing and may be accepted.
HARMLESS_VALUES: Mapping[str, Tuple[str, ...]] = {
    "zookeeper.set.acl": ("false",),
    "zookeeper.ssl.client.enable": ("false",),
    "zookeeper.sasl.client": ("false",),
    "principal.builder.class": ("org.apache.kafka.common.security.authenticator.defaultkafkaprincipalbuilder",),
    "ssl.allow.dn.changes": ("false",),
    "ssl.allow.san.changes": ("false",),
}
SUPPORTED_PROTOCOLS: Tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS: Tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _listener_key_honoured(key: str) -> bool:
    parts = key.split(".", 3)  # listener, name, <l>, rest
    if len(parts) < 4:
        return False
    rest = parts[3]
    if rest in LISTENER_KEYS:
        return True
    mech, _, tail = rest.partition(".")
    return tail == "sasl.jaas.config" and mech.upper() in SUPPORTED_MECHANISMS


def unsupported_security_key(props: Mapping[str, str]) -> Optional[str]:
    """The first (sorted) key in `props` that asks for a security feature this broker does not honour."""
    for key in sorted(props):
        value = str(props[key]).strip()
        if value.lower() in HARMLESS_VALUES.get(key, ()):
            continue
        if key in UNSUPPORTED_KEYS or key.startswith(UNSUPPORTED_PREFIXES) or key == "principal.builder.class":
            return key
        if key.startswith("listener.name."):
            if not _listener_key_honoured(key):
                return key
            continue
        if key.startswith(SECURITY_PREFIXES) and key not in HONOURED_KEYS:
            return key
    return None


def check_authorizer(props: Mapping[str, str]) -> None:
    """authorizer.class.name must be empty (no authorizer) or the ACL authorizer, and each super.users entry a
    principal ("Type:name", Kafka's SecurityUtils.parseKafkaPrincipal); ConfigError (one line) otherwise."""
    name = str(props.get("authorizer.class.name", "") or "").strip()
    if name and name not in ACL_AUTHORIZER_CLASS_NAMES:
        raise ConfigError("authorizer.class.name", name, message=(
            f"authorizer.class.name={name} is not an authorizer this broker implements (only "
            f"{ACL_AUTHORIZER_CLASS_NAMES[0]}, ZooKeeper ACLs); refusing to start rather than run without the "
            f"access control it would enforce"))
    for principal in str(props.get("super.users", "") or "").split(";"):
        principal = principal.strip()
        if principal and ":" not in principal:
            raise ConfigError("super.users", props["super.users"], message=(
                f"super.users: expected a string in format principalType:principalName but got {principal}"))


def check_security_keys(props: Mapping[str, str]) -> None:
    """Raise ConfigError (one line) if the static config sets a security key this broker does not honour."""
    check_authorizer(props)
    key = unsupported_security_key(props)
    if key is not None:
        raise ConfigError(key, props[key], message=(
            f"{key} is a security setting this broker does not honour; refusing to start rather than run less "
            f"protected than configured: remove {key}"))


def check_listener_protocols(listeners: Iterable[Tuple[str, str]], config_name: str) -> None:
    """Refuse listeners whose security protocol is not implemented (before anything binds)."""
    for listener_name, protocol in listeners:
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(config_name, listener_name, message=(
                f"Listener {listener_name} of {config_name} uses security protocol {protocol}, which this broker "
                f"does not support (only {', '.join(SUPPORTED_PROTOCOLS)}); refusing to start"))


def check_sasl_mechanisms(listener: str, mechanisms: Iterable[str], has_jaas: Mapping[str, bool]) -> None:
    """A SASL listener's mechanisms must all be implemented and each must have a JAAS config (as Kafka requires)."""
    mechs = list(mechanisms)
    if not mechs:
        raise ConfigError("sasl.enabled.mechanisms", "", message=(
            f"Listener {listener} uses SASL but sasl.enabled.mechanisms is empty; refusing to start"))
    for mech in mechs:
        if mech not in SUPPORTED_MECHANISMS:
            raise ConfigError("sasl.enabled.mechanisms", mech, message=(
                f"sasl.enabled.mechanisms of listener {listener} includes {mech}, which this broker does not "
                f"support (only {', '.join(SUPPORTED_MECHANISMS)}; Kafka's default is GSSAPI): refusing to start"))
        if not has_jaas.get(mech):
            raise ConfigError(f"listener.name.{listener.lower()}.{mech.lower()}.sasl.jaas.config", None, message=(
                f"Could not find a JAAS configuration for {mech} on listener {listener}: set "
                f"listener.name.{listener.lower()}.{mech.lower()}.sasl.jaas.config (or a KafkaServer section in "
                f"the file named by -Djava.security.auth.login.config)"))


__all__ = ["check_security_keys", "check_listener_protocols", "check_sasl_mechanisms", "unsupported_security_key",
           "SUPPORTED_MECHANISMS", "check_authorizer", "ACL_AUTHORIZER_CLASS_NAMES"]
