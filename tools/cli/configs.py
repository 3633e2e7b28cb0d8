"""kafka-configs.sh: describe and alter topic, broker, broker-logger, user, client and IP configs, as Kafka 3.9's
ConfigCommand with ``--bootstrap-server``.

    kafka-configs.sh --bootstrap-server localhost:9092 --describe --entity-type topics --entity-name t [--all]
    kafka-configs.sh --bootstrap-server localhost:9092 --alter --entity-type topics --entity-name t \\
        --add-config retention.ms=1000,cleanup.policy=[compact,delete] --delete-config segment.ms
    kafka-configs.sh --bootstrap-server localhost:9092 --alter --entity-type brokers --entity-default \\
        --add-config log.cleaner.threads=2
    kafka-configs.sh --bootstrap-server localhost:9092 --alter --entity-type users --entity-name alice \\
        [--entity-type clients --entity-name c1] --add-config producer_byte_rate=1048576
    kafka-configs.sh --bootstrap-server localhost:9092 --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'

Kafka's lines: ``Dynamic configs for topic t are:`` (``All configs`` with ``--all``, ``Default configs for brokers in
the cluster are:``) then ``  name=value sensitive=false synonyms={SOURCE:name=value, ...}`` sorted by name;
``Quota configs for user-principal 'alice', client-id 'c1' are producer_byte_rate=1048576.0``; ``SCRAM credential
configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192``; ``Completed updating config for topic t.``.
Bad arguments print one line on stderr and exit 1, as Kafka does; other failures print Kafka's ``Error while
executing config command with args '...'`` and the Java exception line.

Requests: DescribeConfigs, IncrementalAlterConfigs (topics, broker loggers), AlterConfigs (brokers: Kafka's tool
sends the whole dynamic set), DescribeClientQuotas and AlterClientQuotas go through the protocol client, since
confluent-kafka keeps one synonym per name and has no client-quota or broker-logger calls; SCRAM credentials
(which need the salted password computed client-side) and the topic and broker lists use confluent-kafka's
AdminClient. ``--zookeeper`` is refused: this broker's tools work through the brokers only.
"""
from __future__ import annotations

import re
import socket
import sys
from decimal import Decimal
from typing import Any, Dict, List, Optional, Sequence, Tuple

from broker.config.defs import BROKER_CONFIGS
from broker.config.topic_defs import TOPIC_CONFIGS
from broker.config.types import Dynamic
from broker.protocol.api import ApiKey

from .client_config import load_properties_file
from .command import admin_client, client_config, kafka_error_code, kafka_error_text, protocol_client, tool_main
from .java_format import exception_line, hashmap_order, java_string_hash
from .options import CommandError, OptionParser, Options
from .protocol_client import NodeAssignmentTimeout, ProtocolClient, ProtocolClientError

SUMMARY = "This tool helps to manipulate and describe entity config for a topic, client, user, broker or ip"
TOPICS, CLIENTS, USERS, BROKERS, IPS, LOGGERS, CLIENT_METRICS = ("topics", "clients", "users", "brokers", "ips",
                                                                 "broker-loggers", "client-metrics")
SUPPORTED_TYPES = (TOPICS, CLIENTS, USERS, BROKERS, IPS, CLIENT_METRICS, LOGGERS)
QUOTA_KEYS = ("consumer_byte_rate", "controller_mutation_rate", "producer_byte_rate", "request_percentage")
IP_KEYS = ("connection_creation_rate",)
SCRAM = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
DEFAULT_SCRAM_ITERATIONS = 4096
_RESOURCE = {TOPICS: 2, BROKERS: 4, LOGGERS: 8}
_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
            7: "DYNAMIC_CLIENT_METRICS_CONFIG"}
_QUOTA_TYPE = {USERS: "user", CLIENTS: "client-id", IPS: "ip"}


class ConfigArgError(Exception):
    """Kafka's IllegalArgumentException/InvalidConfigurationException: the message alone on stderr, exit 1."""


class ConfigFailure(Exception):
    """Any other failure: Kafka's ``Error while executing config command with args`` and the exception."""


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.refuse("zookeeper", "this broker's tools talk to the brokers only (--bootstrap-server); Kafka deprecates "
             "--zookeeper too", "DEPRECATED. The connection string for the zookeeper connection.", described_as="urls")
    p.arg("bootstrap-server", "The Kafka servers to connect to.", "server to connect to")
    p.refuse("bootstrap-controller", "there are no KRaft controllers in a ZooKeeper-mode cluster",
             "The Kafka controllers to connect to.", described_as="controller to connect to")
    p.arg("command-config", "Property file containing configs to be passed to Admin Client. This is used only with "
                            "--bootstrap-server option for describing and altering broker configs.",
          "command config property file")
    p.flag("alter", "Alter the configuration for the entity.")
    p.flag("describe", "List configs for the given entity.")
    p.flag("all", "List all configs for the given topic, broker, or broker-logger entity (includes static "
                  "configuration when the entity type is brokers)")
    p.arg("entity-type", "Type of entity (topics/clients/users/brokers/broker-loggers/ips)")
    p.arg("entity-name", "Name of entity (topic name/client id/user principal name/broker id/ip)")
    p.flag("entity-default", "Default entity name for clients/users/brokers/ips (applies to corresponding entity "
                             "type in command line)")
    nl = "\n"
    broker_dynamic = sorted(k for k, d in BROKER_CONFIGS.items() if d.dynamic != Dynamic.READ_ONLY)
    p.arg("add-config", "Key Value pairs of configs to add. Square brackets can be used to group values which "
                        "contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'. The following is a list of valid "
                        "configurations: For entity-type 'topics': " + nl
                        + nl.join("\t" + k for k in sorted(TOPIC_CONFIGS)) + nl
                        + "For entity-type 'brokers': " + nl + nl.join("\t" + k for k in broker_dynamic) + nl
                        + "For entity-type 'users': " + nl
                        + nl.join("\t" + k for k in sorted(list(SCRAM) + list(QUOTA_KEYS))) + nl
                        + "For entity-type 'clients': " + nl + nl.join("\t" + k for k in QUOTA_KEYS) + nl
                        + "For entity-type 'ips': " + nl + "\tconnection_creation_rate" + nl
                        + "Entity types 'users' and 'clients' may be specified together to update config for "
                          "clients of a specific user.")
    p.arg("add-config-file", "Path to a properties file with configs to add. See add-config for a list of valid "
                             "configurations.")
    p.arg("delete-config", "config keys to remove 'k1,k2'")
    p.flag("force", "Suppress console prompts")
    p.arg("topic", "The topic's name.")
    p.arg("client", "The client's ID.")
    p.flag("client-defaults", "The config defaults for all clients.")
    p.arg("user", "The user's principal name.")
    p.flag("user-defaults", "The config defaults for all users.")
    p.arg("broker", "The broker's ID.")
    p.flag("broker-defaults", "The config defaults for all brokers.")
    p.arg("broker-logger", "The broker's ID for its logger config.")
    p.flag("ip-defaults", "The config defaults for all IPs.")
    p.arg("ip", "The IP address.")
    p.refuse("zk-tls-config-file", "it only applies to --zookeeper, which this broker's tools do not use",
             "Identifies the file where ZooKeeper client TLS connectivity properties are defined.",
             described_as="ZooKeeper TLS configuration")
    return p


_ENTITY_FLAGS = (("topic", TOPICS), ("client", CLIENTS), ("user", USERS), ("broker", BROKERS),
                 ("broker-logger", LOGGERS), ("ip", IPS))
_DEFAULT_FLAGS = (("client-defaults", CLIENTS), ("user-defaults", USERS), ("broker-defaults", BROKERS),
                  ("ip-defaults", IPS))


def entity_types(o: Options) -> List[str]:
    return list(o.values("entity-type")) + [t for f, t in _ENTITY_FLAGS + _DEFAULT_FLAGS if o.has(f)]


def entity_names(o: Options) -> List[str]:
    """Kafka's entityNames: --entity-name / --entity-default in command-line order ("" = default), then the
    specific entity flags."""
    names = [v if name == "entity-name" else "" for name, v in o.sequence if name in ("entity-name", "entity-default")]
    names += [o.value(f) for f, _ in _ENTITY_FLAGS if o.has(f)]
    names += ["" for f, _ in _DEFAULT_FLAGS if o.has(f)]
    return names


def check_args(o: Options) -> None:
    """ConfigCommandOptions.checkArgs for --bootstrap-server."""
    from .options import UsageError

    if sum(o.has(a) for a in ("alter", "describe")) != 1:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    for other in ("add-config", "delete-config"):
        if o.has("describe") and o.has(other):
            raise UsageError(f'Option "[describe]" can\'t be used with option "[{other}]"')
    types = entity_types(o)
    dups = [t for i, t in enumerate(types) if t in types[:i]]
    if dups:
        raise ConfigArgError(f"Duplicate entity type(s) specified: {','.join(dups)}")
    for t in types:
        if t not in SUPPORTED_TYPES:
            raise ConfigArgError(f"Invalid entity type {t}, the entity type must be one of "
                                 f"{', '.join(SUPPORTED_TYPES)} with a --bootstrap-server or --bootstrap-controller "
                                 "argument")
    if not types:
        raise ConfigArgError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise ConfigArgError("Only 'users' and 'clients' entity types may be specified together")
    if CLIENT_METRICS in types:
        raise CommandError("--entity-type client-metrics is not supported by this broker's tools: the broker has no "
                           "client metrics subscriptions (KIP-714)")
    if (o.has("entity-name") or o.has("entity-type") or o.has("entity-default")) and \
            any(o.has(f) for f, _ in _ENTITY_FLAGS + _DEFAULT_FLAGS):
        raise ConfigArgError("--entity-{type,name,default} should not be used in conjunction with specific entity "
                             "flags")
    names = entity_names(o)
    has_name = any(n for n in names)
    has_default = any(n == "" for n in names)
    if not o.has("bootstrap-server"):
        raise ConfigArgError("One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments "
                             "must be specified")
    if has_name and (BROKERS in types or LOGGERS in types):
        for flag in ("entity-name", "broker", "broker-logger"):
            if o.has(flag):
                try:
                    int(o.value(flag))
                except ValueError:
                    raise ConfigArgError(f"The entity name for {types[0]} must be a valid integer broker id, but it "
                                         f"is: {o.value(flag)}") from None
    if has_name and IPS in types:
        for flag in ("entity-name", "ip"):
            if o.has(flag) and not _valid_ip_entity(o.value(flag)):
                raise ConfigArgError(f"The entity name for {types[0]} must be a valid IP or resolvable host, but it "
                                     f"is: {o.value(flag)}")
    if o.has("describe") and LOGGERS in types and not has_name:
        raise ConfigArgError(f"an entity name must be specified with --describe of {','.join(types)}")
    if o.has("alter"):
        if set(types) & {USERS, CLIENTS, BROKERS, IPS}:
            if not has_name and not has_default:
                raise ConfigArgError("an entity-name or default entity must be specified with --alter of users, "
                                     "clients, brokers or ips")
        elif not has_name:
            raise ConfigArgError(f"an entity name must be specified with --alter of {','.join(types)}")
        if o.has("add-config") and o.has("add-config-file"):
            raise ConfigArgError("Only one of --add-config or --add-config-file must be specified")
        if not any(o.has(x) for x in ("add-config", "add-config-file", "delete-config")):
            raise ConfigArgError("At least one of --add-config, --add-config-file, or --delete-config must be "
                                 "specified with --alter")
        if len(types) != len(names):
            raise ConfigArgError("An entity name must be specified for every entity type")


def _valid_ip_entity(name: str) -> bool:
    try:
        socket.getaddrinfo(name, None)
        return True
    except OSError:
        return False


_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_configs_to_add(o: Options) -> Dict[str, str]:
    """--add-config-file, then --add-config split at commas outside [] (brackets removed from values)."""
    props: Dict[str, str] = {}
    if o.has("add-config-file"):
        props.update(load_properties_file(o.value("add-config-file")))
    if o.has("add-config"):
        items = re.split("," + _OUTSIDE_BRACKETS, o.value("add-config"))
        while len(items) > 1 and items[-1] == "":
            items.pop()
        for item in items:
            kv = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
            if len(kv) != 2:
                raise ConfigArgError('requirement failed: Invalid entity config: all configs to be added must be in '
                                     'the format "key=val".')
            props[kv[0].strip()] = re.sub(r"\[?\]?", "", kv[1]).strip()
    if "message.format.version" in props:
        print(f"WARNING: The configuration message.format.version={props['message.format.version']} is specified. "
              "This configuration will be ignored if the version is newer than the inter.broker.protocol.version "
              "specified in the broker or if the inter.broker.protocol.version is 3.0 or newer. This configuration "
              "is deprecated and it will be removed in Apache Kafka 4.0.")
    for key in props:
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise ConfigArgError(f"Invalid character found for config key: {key}")
    return props


def parse_configs_to_delete(o: Options) -> List[str]:
    return [k.strip() for v in o.values("delete-config") for k in v.split(",")]


def java_double(v: float) -> str:
    """java.lang.Double.toString: plain between 10^-3 and 10^7, else ``d.dddE<n>`` (shortest round-trip digits)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(float(v))
    _, digits, exp = Decimal(repr(abs(v))).normalize().as_tuple()
    text = "".join(map(str, digits))
    exponent = len(text) - 1 + int(exp)
    return f"{'-' if v < 0 else ''}{text[0]}.{text[1:] or '0'}E{exponent}"


def _quota_entity_hash(entity: Dict[str, Optional[str]]) -> int:
    """ClientQuotaEntity.hashCode: the entity map's hash (sum of key ^ value string hashes)."""
    h = 0
    for k, v in entity.items():
        h += java_string_hash(k) ^ (java_string_hash(v) if v is not None else 0)
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


class ConfigService:
    """One kafka-configs command against one cluster."""

    def __init__(self, o: Options) -> None:
        self.opts = o
        self.cfg = client_config(o)
        self.pc: ProtocolClient = protocol_client(self.cfg)
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        if self._admin is None:
            self._admin = admin_client(self.cfg)
        return self._admin

    def close(self) -> None:
        self.pc.close()

    # ---------------------------------------------------------------------------------------------- configs
    def resource_config(self, entity_type: str, name: str, synonyms: bool, describe_all: bool) -> List[Any]:
        """Kafka's getResourceConfig: the (filtered) DescribeConfigs entries of one resource, sorted by name."""
        if entity_type == TOPICS:
            dynamic_source = 1
            _validate_topic(name)
        elif entity_type == BROKERS:
            dynamic_source = 3 if name == "" else 2
            if name != "":
                _broker_id(entity_type, name)
        else:  # broker loggers
            dynamic_source = None
            if name:
                _broker_id(entity_type, name)
        body = {"resources": [{"resource_type": _RESOURCE[entity_type], "resource_name": name,
                               "configuration_keys": None}],
                "include_synonyms": synonyms, "include_documentation": False}
        if entity_type in (BROKERS, LOGGERS) and name != "":
            r = self.pc.send_to(int(name), ApiKey.DESCRIBE_CONFIGS, body)
        else:
            r = self.pc.send_any(ApiKey.DESCRIBE_CONFIGS, body)
        result = r.results[0]
        if result.error_code:
            raise ConfigFailure("java.util.concurrent.ExecutionException: "
                                + exception_line(result.error_code, result.error_message))
        entries = [c for c in result.configs
                   if describe_all or dynamic_source is None or c.config_source == dynamic_source]
        return sorted(entries, key=lambda c: c.name)

    def describe(self) -> None:
        o = self.opts
        types, names = entity_types(o), entity_names(o)
        head = types[0]
        if head in (TOPICS, BROKERS, LOGGERS):
            self._describe_resources(head, names[0] if names else None, o.has("all"))
        elif head in (USERS, CLIENTS):
            self._describe_quotas(types, names)
            if CLIENTS not in types and "" not in names:
                self._describe_scram(names)
        else:
            self._describe_quotas(types, names)

    def _describe_resources(self, entity_type: str, name: Optional[str], describe_all: bool) -> None:
        if name is not None:
            entities = [name]
        elif entity_type == TOPICS:
            md = self.pc.refresh_metadata(None, call="listTopics")
            entities = hashmap_order([t.name for t in md.topics])
        else:
            entities = [str(n.node_id) for n in self.pc.nodes()] + [""]
        for entity in entities:
            if entity == "":
                print(f"Default configs for {entity_type} in the cluster are:")
            else:
                print(f"{'All' if describe_all else 'Dynamic'} configs for {entity_type[:-1]} {entity} are:")
            for c in self.resource_config(entity_type, entity, True, describe_all):
                syn = ", ".join(f"{_SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={_null(s.value)}" for s in c.synonyms)
                print(f"  {c.name}={_null(c.value)} sensitive={str(bool(c.is_sensitive)).lower()} synonyms={{{syn}}}")

    # ---------------------------------------------------------------------------------------------- quotas
    def _quota_components(self, types: List[str], names: List[str]) -> List[Dict[str, Any]]:
        comps = []
        for i, t in enumerate(types):
            name = names[i] if i < len(names) else None
            if name is None:
                comps.append({"entity_type": _QUOTA_TYPE[t], "match_type": 2, "match": None})
            elif name == "":
                comps.append({"entity_type": _QUOTA_TYPE[t], "match_type": 1, "match": None})
            else:
                comps.append({"entity_type": _QUOTA_TYPE[t], "match_type": 0, "match": name})
        if len(names) > len(types):
            raise ConfigArgError("More entity names specified than entity types")
        return comps

    def quotas(self, types: List[str], names: List[str]) -> List[Tuple[Dict[str, Optional[str]], Dict[str, float]]]:
        r = self.pc.send_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": self._quota_components(types, names),
                                                             "strict": True})
        if r.error_code:
            raise ConfigFailure("java.util.concurrent.ExecutionException: "
                                + exception_line(r.error_code, r.error_message))
        out = [({e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values})
               for entry in (r.entries or [])]
        return hashmap_order(out, key=lambda x: x[0], hash_fn=_quota_entity_hash, initial_capacity=max(1, len(out)))

    def _describe_quotas(self, types: List[str], names: List[str]) -> None:
        for entity, values in self.quotas(types, names):
            parts = []
            for key, label in (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip")):
                if key in entity:
                    parts.append(f"{label} '{entity[key]}'" if entity[key] is not None else f"the default {label}")
            text = ", ".join(f"{k}={java_double(values[k])}"
                             for k in hashmap_order(list(values), initial_capacity=max(1, len(values))))
            print(f"Quota configs for {', '.join(parts)} are {text}")

    def _describe_scram(self, names: List[str]) -> None:
        from broker.protocol.api import ApiKey as K

        body = {"users": [{"name": n} for n in names] if names else None}
        r = self.pc.send_any(K.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
        if r.error_code:
            raise ConfigFailure("java.util.concurrent.ExecutionException: "
                                + exception_line(r.error_code, r.error_message))
        names_by_type = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
        for res in r.results:
            if res.error_code == 91:  # RESOURCE_NOT_FOUND: a user without credentials is left out, as in Kafka
                continue
            if res.error_code:
                print(f"Error retrieving SCRAM credential configs for user-principal '{res.user}': "
                      f"{exception_line(res.error_code, res.error_message, qualified=False)}")
                continue
            text = ", ".join(f"{names_by_type.get(c.mechanism, 'UNKNOWN')}=iterations={c.iterations}"
                             for c in res.credential_infos)
            print(f"SCRAM credential configs for user-principal '{res.user}' are {text}")

    # ---------------------------------------------------------------------------------------------- alter
    def alter(self) -> None:
        o = self.opts
        types, names = entity_types(o), entity_names(o)
        head, name = types[0], names[0]
        to_add = parse_configs_to_add(o)
        to_delete = parse_configs_to_delete(o)
        if head == TOPICS:
            old = {c.name for c in self.resource_config(TOPICS, name, False, False)}
            _check_deletable(to_delete, old)
            self._incremental(TOPICS, name, to_add, to_delete)
        elif head == BROKERS:
            old_entries = {c.name: c.value for c in self.resource_config(BROKERS, name, False, False)}
            _check_deletable(to_delete, set(old_entries))
            new = dict(old_entries)
            new.update(to_add)
            for k in to_delete:
                new.pop(k, None)
            missing = [k for k, v in new.items() if v is None]
            if missing:
                raise ConfigArgError("All sensitive broker config entries must be specified for --alter, missing "
                                     f"entries: Set({', '.join(missing)})")
            body = {"resources": [{"resource_type": 4, "resource_name": name,
                                   "configs": [{"name": k, "value": v} for k, v in new.items()]}],
                    "validate_only": False}
            r = self.pc.send_to(int(name), ApiKey.ALTER_CONFIGS, body) if name else \
                self.pc.send_any(ApiKey.ALTER_CONFIGS, body)
            _check_alter(r.responses[0])
        elif head == LOGGERS:
            valid = {c.name for c in self.resource_config(LOGGERS, name, True, False)}
            invalid = [k for k in to_delete if k not in valid] + [k for k in to_add if k not in valid]
            if invalid:
                raise ConfigArgError(f"Invalid broker logger(s): {','.join(invalid)}")
            self._incremental(LOGGERS, name, to_add, to_delete)
        elif head in (USERS, CLIENTS):
            self._alter_users_clients(types, names, to_add, to_delete)
        else:  # ips
            unknown = [k for k in list(to_add) + to_delete if k not in IP_KEYS]
            if unknown:
                raise ConfigArgError("Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                                     f"Unexpected config names: {','.join(unknown)}")
            self._alter_quotas(types, names, to_add, to_delete)
        if name:
            print(f"Completed updating config for {head[:-1]} {name}.")
        else:
            print(f"Completed updating default config for {head} in the cluster.")

    def _incremental(self, entity_type: str, name: str, to_add: Dict[str, str], to_delete: List[str]) -> None:
        ops = [{"name": k, "config_operation": 0, "value": v} for k, v in to_add.items()]
        ops += [{"name": k, "config_operation": 1, "value": ""} for k in to_delete]
        body = {"resources": [{"resource_type": _RESOURCE[entity_type], "resource_name": name, "configs": ops}],
                "validate_only": False}
        if entity_type == LOGGERS:
            r = self.pc.send_to(int(name), ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        else:
            r = self.pc.send_any(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        _check_alter(r.responses[0])

    def _alter_users_clients(self, types: List[str], names: List[str], to_add: Dict[str, str],
                             to_delete: List[str]) -> None:
        quota_add = [k for k in to_add if k in QUOTA_KEYS]
        scram_add = {k: v for k, v in to_add.items() if k in SCRAM}
        unknown_add = [k for k in to_add if k not in QUOTA_KEYS and k not in SCRAM]
        quota_del = [k for k in to_delete if k in QUOTA_KEYS]
        scram_del = [k for k in to_delete if k in SCRAM]
        unknown_del = [k for k in to_delete if k not in QUOTA_KEYS and k not in SCRAM]
        if types[0] == CLIENTS or len(types) == 2:
            if unknown_add or scram_add:
                raise ConfigArgError("Only quota configs can be added for 'clients' using --bootstrap-server. "
                                     f"Unexpected config names: {_scala_list(unknown_add + list(scram_add))}")
            if unknown_del or scram_del:
                raise ConfigArgError("Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                                     f"Unexpected config names: {_scala_list(unknown_del + scram_del)}")
        else:
            if unknown_add:
                raise ConfigArgError("Only quota and SCRAM credential configs can be added for 'users' using "
                                     f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_add)}")
            if unknown_del:
                raise ConfigArgError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                                     f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_del)}")
            if scram_add or scram_del:
                if any(n == "" for n in names):
                    raise ConfigArgError("The use of --entity-default or --user-defaults is not allowed with User "
                                         "SCRAM Credentials using --bootstrap-server.")
                if quota_add or quota_del:
                    raise ConfigArgError("Cannot alter both quota and SCRAM credential configs simultaneously for "
                                         "'users' using --bootstrap-server.")
        if quota_add or quota_del:
            self._alter_quotas(types, names, to_add, to_delete)
        else:
            self._alter_scram(names[0], scram_add, scram_del)

    def _alter_quotas(self, types: List[str], names: List[str], to_add: Dict[str, str], to_delete: List[str]) -> None:
        existing = self.quotas(types, names)
        old = existing[0][1] if existing else {}
        _check_deletable(to_delete, set(old))
        ops = []
        for k, v in to_add.items():
            try:
                value = float(v)
            except ValueError:
                raise ConfigArgError(f"Cannot parse quota configuration value for {k}: {v}") from None
            ops.append({"key": k, "value": value, "remove": False})
        ops += [{"key": k, "value": 0.0, "remove": True} for k in to_delete]
        entity = [{"entity_type": _QUOTA_TYPE[t], "entity_name": n or None} for t, n in zip(types, names)]
        r = self.pc.send_any(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{"entity": entity, "ops": ops}],
                                                           "validate_only": False})
        for e in r.entries:
            if e.error_code:
                raise ConfigFailure("java.util.concurrent.ExecutionException: "
                                    + exception_line(e.error_code, e.error_message))

    def _alter_scram(self, user: str, to_add: Dict[str, str], to_delete: List[str]) -> None:
        from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                           UserScramCredentialUpsertion)

        mechanisms = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
        alterations: List[Any] = [UserScramCredentialDeletion(user, mechanisms[m]) for m in to_delete]
        for mech, text in to_add.items():
            m = re.fullmatch(r"(?:iterations=(-?[0-9]*),)?password=(.*)", text, re.DOTALL)
            if not m:
                raise ConfigArgError(f"Invalid credential property {mech}={text}")
            iterations = int(m.group(1)) if m.group(1) and m.group(1) != "-1" else DEFAULT_SCRAM_ITERATIONS
            if iterations < 4096:
                raise ConfigArgError(f"Iterations {iterations} is less than the minimum 4096 required for {mech}")
            alterations.append(UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanisms[mech], iterations),
                                                            m.group(2).encode("utf-8")))
        futures = self.admin.alter_user_scram_credentials(alterations)
        for f in futures.values():
            try:
                f.result(timeout=60)
            except Exception as e:
                code = kafka_error_code(e)
                raise ConfigFailure("java.util.concurrent.ExecutionException: "
                                    + (exception_line(code, kafka_error_text(e)) if code and code > 0
                                       else kafka_error_text(e))) from None


def _null(v: Optional[str]) -> str:
    return "null" if v is None else v


def _scala_list(items: List[str]) -> str:
    return f"List({', '.join(items)})"


def _check_deletable(to_delete: List[str], existing: set) -> None:
    invalid = [k for k in to_delete if k not in existing]
    if invalid:
        raise ConfigArgError(f"Invalid config(s): {','.join(invalid)}")


def _check_alter(resp: Any) -> None:
    if resp.error_code:
        raise ConfigFailure("java.util.concurrent.ExecutionException: "
                            + exception_line(resp.error_code, resp.error_message))


def _broker_id(entity_type: str, name: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise ConfigArgError(f"The entity name for {entity_type} must be a valid integer broker id, found: "
                             f"{name}") from None


def _validate_topic(name: str) -> None:
    if not name:
        return
    if name in (".", ".."):
        raise ConfigFailure("org.apache.kafka.common.errors.InvalidTopicException: Topic name cannot be \".\" or "
                            "\"..\"")
    if len(name) > 249:
        raise ConfigFailure(f"org.apache.kafka.common.errors.InvalidTopicException: Topic name is illegal, it can't "
                            f"be longer than 249 characters, topic name: {name}")
    if not re.fullmatch(r"[a-zA-Z0-9._-]+", name):
        raise ConfigFailure(f"org.apache.kafka.common.errors.InvalidTopicException: Topic name \"{name}\" is illegal, "
                            "it contains a character other than ASCII alphanumerics, '.', '_' and '-'")


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    try:
        check_args(o)
        service = ConfigService(o)
        try:
            if o.has("alter"):
                service.alter()
            else:
                service.describe()
        finally:
            service.close()
    except ConfigArgError as e:
        print(str(e), file=sys.stderr)
        return 1
    except (ConfigFailure, ProtocolClientError) as e:
        sys.stdout.flush()
        cause = f"java.util.concurrent.ExecutionException: {e}" if isinstance(e, NodeAssignmentTimeout) else e
        print(f"Error while executing config command with args '{' '.join(argv)}'\n{cause}", file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
