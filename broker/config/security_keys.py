"""Security settings this broker does not honour yet stop start-up, one line naming the key.

A Kafka ``server.properties`` that asks for TLS, SASL, ACLs or ZooKeeper ACLs expects them to
protect data and access; silently ignoring any of them would leave a broker more open than its
operator believes. So every key of those families is refused unless its value is the harmless
"off" value, and listeners may use only the security protocols implemented here. As each part
lands (issue 8), its keys leave :data:`UNSUPPORTED_PREFIXES` / :data:`UNSUPPORTED_KEYS`.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Tuple

from broker.config.types import ConfigError

#: Key families that configure security (Kafka's ssl.*, sasl.*, per-listener overrides, ZooKeeper TLS, tokens).
UNSUPPORTED_PREFIXES: Tuple[str, ...] = ("ssl.", "sasl.", "listener.name.", "zookeeper.ssl.", "delegation.token.")
#: Single keys that configure access control.
UNSUPPORTED_KEYS: Tuple[str, ...] = ("authorizer.class.name", "principal.builder.class", "super.users",
                                     "zookeeper.set.acl", "zookeeper.sasl.client", "zookeeper.clientCnxnSocket")
#: Values that switch the feature off, so setting them protects nothing and may be accepted.
HARMLESS_VALUES: Mapping[str, Tuple[str, ...]] = {
    "zookeeper.set.acl": ("false",),
    "zookeeper.ssl.client.enable": ("false",),
    "zookeeper.sasl.client": ("false",),
    "authorizer.class.name": ("",),
    "super.users": ("",),
}
#: Security protocols a listener may use today.
SUPPORTED_PROTOCOLS: Tuple[str, ...] = ("PLAINTEXT",)


def _is_security_key(key: str) -> bool:
    return key in UNSUPPORTED_KEYS or key.startswith(UNSUPPORTED_PREFIXES)


def unsupported_security_key(props: Mapping[str, str]) -> Optional[str]:
    """The first (sorted) key in `props` that asks for a security feature this broker does not honour."""
    for key in sorted(props):
        if not _is_security_key(key):
            continue
        value = str(props[key]).strip()
        if value.lower() in HARMLESS_VALUES.get(key, ()):
            continue
        return key
    return None


def check_security_keys(props: Mapping[str, str]) -> None:
    """Raise ConfigError (one line) if the static config sets a security key this broker does not honour."""
    key = unsupported_security_key(props)
    if key is not None:
        raise ConfigError(key, props[key], message=(
            f"{key} is a security setting this broker does not honour yet (TLS, SASL, ACLs and ZooKeeper "
            f"security are not implemented); refusing to start rather than run less protected than configured: "
            f"remove {key}"))


def check_listener_protocols(listeners: Iterable[Tuple[str, str]], config_name: str) -> None:
    """Refuse listeners whose security protocol is not implemented (before anything binds)."""
    for listener_name, protocol in listeners:
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(config_name, listener_name, message=(
                f"Listener {listener_name} uses security protocol {protocol}, which this broker does not "
                f"support yet (only {', '.join(SUPPORTED_PROTOCOLS)}); refusing to start"))


__all__ = ["check_security_keys", "check_listener_protocols", "unsupported_security_key"]
