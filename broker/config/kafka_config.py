"""KafkaConfig: the broker's typed, validated configuration (static file + overrides + dynamic AlterConfigs layers).

Precedence for a broker key, as Kafka: dynamic per-broker (/config/brokers/<id>) > dynamic cluster default
(/config/brokers/<default>) > static (server.properties and --override) > ConfigDef default. Instances are
immutable; `with_dynamic()` returns a new one that the server swaps in, so readers on any thread see a consistent
snapshot.
"""
from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import Any, Mapping

from broker.config.defs import BROKER_CONFIGS, IGNORED_KEYS, TOPIC_SYNONYMS, ConfigDef
from broker.config.security_keys import check_listener_protocols, check_sasl_mechanisms, check_security_keys
from broker.config.tiered_storage import check_broker as check_tiered_storage
from broker.config.types import ConfigError, parse_value

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """One listener: name (upper-case listener name), host ('' = all interfaces), port, security protocol."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def _parse_protocol_map(name: str, text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        if ":" not in item:
            raise ConfigError(name, text, "Map entry should be of form <key>:<value>")
        k, v = item.split(":", 1)
        result[k.strip().upper()] = v.strip().upper()
    return result


def parse_listeners(name: str, text: str | None, protocol_map: Mapping[str, str]) -> list[Endpoint]:
    """Parse `NAME://host:port,...`; host may be empty or a [bracketed] IPv6 address."""
    if not text or not text.strip():
        return []
    endpoints: list[Endpoint] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        if "://" not in item:
            raise ConfigError(name, text, f"Unable to parse {item} to a broker endpoint")
        lname, rest = item.split("://", 1)
        hostport = rest.rsplit(":", 1)
        if len(hostport) != 2:
            raise ConfigError(name, text, f"Unable to parse {item} to a broker endpoint")
        host, port_s = hostport
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port = int(port_s)
        except ValueError:
            raise ConfigError(name, text, f"Unable to parse {item} to a broker endpoint") from None
        if not 0 <= port <= 65535:
            raise ConfigError(name, text, f"Invalid port {port} in {item}")
        lname = lname.strip().upper()
        if lname not in protocol_map:
            raise ConfigError(name, text, f"No security protocol defined for listener {lname}")
        endpoints.append(Endpoint(lname, host, port, protocol_map[lname]))
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(name, text, "Each listener must have a different name")
    return endpoints


#: Replication throttles Kafka reads only from the dynamic layers (/config/brokers/...), never from the file.
DYNAMIC_ONLY_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                     "replica.alter.log.dirs.io.max.bytes.per.second")


class KafkaConfig:
    """Typed access to broker configs: `cfg.get("log.segment.bytes")` plus resolved convenience properties."""

    def __init__(self, originals: Mapping[str, str], dynamic_per_broker: Mapping[str, str] | None = None,
                 dynamic_cluster_default: Mapping[str, str] | None = None, *, warn_unknown: bool = True) -> None:
        self.originals: dict[str, str] = dict(originals)
        self.dynamic_per_broker: dict[str, str] = dict(dynamic_per_broker or {})
        self.dynamic_cluster_default: dict[str, str] = dict(dynamic_cluster_default or {})
        self._values: dict[str, Any] = {}
        if warn_unknown:
            for key in self.originals:
                if key not in BROKER_CONFIGS and not key.startswith("listener.name."):
                    log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        for name, d in BROKER_CONFIGS.items():
            self._values[name] = self._resolve(d)
        self._validate()

    def _resolve(self, d: ConfigDef) -> Any:
        for layer in (self.dynamic_per_broker, self.dynamic_cluster_default, self.originals):
            if d.name in layer:
                value = parse_value(d.name, d.type, layer[d.name])
                if d.validator is not None:
                    d.validator(d.name, value)
                return value
        return d.default

    def _validate(self) -> None:
        for key in DYNAMIC_ONLY_KEYS:
            if key in self.originals:
                # Kafka ignores these in server.properties (dynamic only); a throttle the operator believes is on
                # but is not would be a silent surprise, so say so and stop.
                raise ConfigError(key, self.originals[key],
                                  message=f"{key} is a dynamic broker config only: remove it from server.properties "
                                          f"and set it with AlterConfigs (kafka-configs.sh --entity-type brokers)")
        check_security_keys(self.originals)
        check_tiered_storage(self)
        broker_id = self.broker_id
        if self.get("broker.id.generation.enable"):
            if not -1 <= broker_id <= self.get("reserved.broker.max.id"):
                raise ConfigError("broker.id", broker_id, message="broker.id must be greater than or equal to -1 "
                                  "and not greater than reserved.broker.max.id")
        elif broker_id < 0:
            raise ConfigError("broker.id", broker_id, message="broker.id must be greater than or equal to 0")
        if not self.get("zookeeper.connect"):
            raise ConfigError("zookeeper.connect", None, message='Missing required configuration '
                              '"zookeeper.connect" which has no default value.')
        listeners = self.listeners
        for e in self.advertised_listeners_raw:
            if e.host == "0.0.0.0":
                raise ConfigError("advertised.listeners", self.get("advertised.listeners"),
                                  "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                  "Use a routable IP address.")
        if not listeners:
            raise ConfigError("listeners", self.get("listeners"), "At least one listener is required")
        check_listener_protocols([(e.listener_name, e.security_protocol) for e in listeners], "listeners")
        self._validate_security(listeners)
        ports = [e.port for e in listeners if e.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError("listeners", self.get("listeners"), "Each listener must have a different port")
        if not self.log_dirs:
            raise ConfigError("log.dirs", self.get("log.dirs"), "At least one log directory must be defined")
        if self.get("group.min.session.timeout.ms") > self.get("group.max.session.timeout.ms"):
            raise ConfigError("group.min.session.timeout.ms", self.get("group.min.session.timeout.ms"),
                              "must not be greater than group.max.session.timeout.ms")

    def _validate_security(self, listeners: list) -> None:
        """SASL listeners name implemented mechanisms with JAAS configs; the inter-broker listener exists and,
        when it uses SASL, its mechanism is enabled there and has login credentials."""
        from broker.config.listener_security import login_module_for, resolve_listener
        by_name = {e.listener_name: e for e in listeners}
        for e in listeners:
            if e.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                sec = resolve_listener(self, e.listener_name, e.security_protocol)
                check_sasl_mechanisms(e.listener_name, sec.sasl_mechanisms,
                                      {m: login_module_for(sec.jaas.get(m, []), m) is not None
                                       for m in sec.sasl_mechanisms})
        ib = self.inter_broker_listener_name
        if self.is_set("inter.broker.listener.name") and self.is_set("security.inter.broker.protocol"):
            raise ConfigError("inter.broker.listener.name", ib, "Only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol should be set.")
        if ib not in by_name:
            raise ConfigError("inter.broker.listener.name", ib, f"No listener named {ib} in listeners "
                              f"({', '.join(by_name)}): brokers could not reach each other")
        ep = by_name[ib]
        if ep.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mech = str(self.get("sasl.mechanism.inter.broker.protocol"))
            sec = resolve_listener(self, ib, ep.security_protocol)
            if mech not in sec.sasl_mechanisms:
                raise ConfigError("sasl.mechanism.inter.broker.protocol", mech, message=(
                    f"sasl.mechanism.inter.broker.protocol {mech} is not enabled on the inter-broker listener {ib} "
                    f"(sasl.enabled.mechanisms: {', '.join(sec.sasl_mechanisms)}); refusing to start"))
            module = login_module_for(sec.jaas.get(mech, []), mech)
            if module is None or "username" not in module.options or "password" not in module.options:
                raise ConfigError(f"listener.name.{ib.lower()}.{mech.lower()}.sasl.jaas.config", None, message=(
                    f"The JAAS config of {mech} on the inter-broker listener {ib} needs username and password "
                    f"options (the broker's own login to other brokers)"))

    # ------------------------------------------------------------------ generic access
    def get(self, name: str) -> Any:
        """Typed effective value of a broker key (KeyError for keys not in defs)."""
        return self._values[name]

    def is_set(self, name: str) -> bool:
        return any(name in layer for layer in (self.dynamic_per_broker, self.dynamic_cluster_default,
                                               self.originals))

    def values(self) -> dict[str, Any]:
        return dict(self._values)

    def with_dynamic(self, per_broker: Mapping[str, str] | None = None,
                     cluster_default: Mapping[str, str] | None = None) -> "KafkaConfig":
        """A new config with the given dynamic layers (None keeps the current layer)."""
        return KafkaConfig(self.originals,
                           self.dynamic_per_broker if per_broker is None else per_broker,
                           self.dynamic_cluster_default if cluster_default is None else cluster_default,
                           warn_unknown=False)

    @property
    def ignored_keys_set(self) -> list[str]:
        """Keys the file set that this broker accepts but does not act on."""
        return sorted(k for k in self.originals if k in IGNORED_KEYS)

    # ------------------------------------------------------------------ identity and network
    @property
    def broker_id(self) -> int:
        return int(self._values["broker.id"])

    @property
    def broker_rack(self) -> str | None:
        return self._values["broker.rack"]

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        return _parse_protocol_map("listener.security.protocol.map", self._values["listener.security.protocol.map"])

    @property
    def listeners(self) -> list[Endpoint]:
        return parse_listeners("listeners", self._values["listeners"], self.listener_security_protocol_map)

    @property
    def advertised_listeners_raw(self) -> list[Endpoint]:
        text = self._values["advertised.listeners"]
        if text is None:
            return self.listeners
        return parse_listeners("advertised.listeners", text, self.listener_security_protocol_map)

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        """Advertised endpoints (default: listeners); a blank host becomes this machine's canonical name."""
        out = []
        for e in self.advertised_listeners_raw:
            out.append(e if e.host else Endpoint(e.listener_name, socket.getfqdn(), e.port, e.security_protocol))
        return out

    @property
    def inter_broker_listener_name(self) -> str:
        return (self._values["inter.broker.listener.name"] or self._values["security.inter.broker.protocol"]).upper()

    # ------------------------------------------------------------------ ZooKeeper
    @property
    def zk_connect(self) -> str:
        """The full zookeeper.connect string (hosts plus optional chroot)."""
        return str(self._values["zookeeper.connect"])

    @property
    def zk_hosts(self) -> str:
        return self.zk_connect.split("/", 1)[0]

    @property
    def zk_chroot(self) -> str | None:
        """The chroot path ('/kafka') or None."""
        if "/" not in self.zk_connect:
            return None
        chroot = "/" + self.zk_connect.split("/", 1)[1].strip("/")
        return None if chroot == "/" else chroot

    @property
    def zk_session_timeout_ms(self) -> int:
        return int(self._values["zookeeper.session.timeout.ms"])

    @property
    def zk_connection_timeout_ms(self) -> int:
        v = self._values["zookeeper.connection.timeout.ms"]
        return int(v) if v is not None else self.zk_session_timeout_ms

    # ------------------------------------------------------------------ logs
    @property
    def log_dirs(self) -> list[str]:
        text = self._values["log.dirs"] or self._values["log.dir"] or ""
        return [p.strip() for p in text.split(",") if p.strip()]

    def _topic_default(self, topic_key: str) -> Any:
        for broker_key, factor in TOPIC_SYNONYMS[topic_key]:
            v = self._values[broker_key]
            if v is not None:
                return v * factor if factor != 1 else v
        return None

    @property
    def retention_ms(self) -> int:
        """log.retention.ms > log.retention.minutes > log.retention.hours; negative means -1 (unlimited)."""
        v = int(self._topic_default("retention.ms"))
        return -1 if v < 0 else v

    @property
    def segment_ms(self) -> int:
        """log.roll.ms > log.roll.hours."""
        return int(self._topic_default("segment.ms"))

    @property
    def segment_jitter_ms(self) -> int:
        return int(self._topic_default("segment.jitter.ms"))

    @property
    def flush_ms(self) -> int:
        return int(self._topic_default("flush.ms"))

    def log_config_defaults(self) -> dict[str, str]:
        """Topic keys -> string values derived from this broker's keys (input to LogConfig.from_props)."""
        from broker.config.topic_defs import topic_defaults

        return topic_defaults(self)
