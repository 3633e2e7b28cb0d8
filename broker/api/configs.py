"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topic and broker resources.

Topic overrides live in ``/config/topics/<t>``; dynamic broker configs in
``/config/brokers/<id>`` (per broker) and ``/config/brokers/<default>`` (cluster-wide).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from broker.api.authz import Authz
from broker.config import dynamic_rules
from broker.config.topic_defs import TOPIC_CONFIGS, describe_broker_config, describe_broker_default_config, \
    describe_topic_config, validate_topic_configs
from broker.config.types import ConfigError, ConfigSource, ConfigType, InvalidConfigError
from broker.errors import KAFKA_INVALID_REQUEST_MESSAGE, ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.metadata_cache import MetadataCache
    from broker.config.dynamic import DynamicBrokerConfig

log = logging.getLogger(__name__)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS = 2, 4, 8, 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DESCRIBE_MIN, DESCRIBE_MAX = 0, 4
ALTER_MIN, ALTER_MAX = 0, 2
INCREMENTAL_MIN, INCREMENTAL_MAX = 0, 1
DEFAULT_ENTITY = "<default>"
_ALLOW_ALL = Authz()
#: Kafka's Errors messages, which DescribeConfigs puts in refused results
_DENIED_MESSAGES: dict[int, str] = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed."}


def _refusal(authz: Authz, ctx: "RequestContext", operation: AclOperation, resource_type: int, name: str,
             broker_logger: bool = True) -> int:
    """Kafka's config authorization: a topic's configs need `operation` on the topic, broker (and broker logger)
    configs on the cluster; 0 when allowed or when the resource type is not one of those (answered elsewhere)."""
    if resource_type == TOPIC:
        if not authz.allowed(ctx, operation, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type == BROKER or (broker_logger and resource_type == BROKER_LOGGER):
        if not authz.allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return 0


def _entry_dict(e: Any, version: int, include_synonyms: bool, include_docs: bool) -> dict:
    return {
        "name": e.name, "value": None if e.is_sensitive else e.value, "read_only": e.read_only,
        # Kafka 3.9 never sets v0's is_default (its ConfigHelper leaves the generated default, false)
        "is_default": False, "config_source": int(e.source),
        "is_sensitive": e.is_sensitive,
        "synonyms": [{"name": s.name, "value": None if e.is_sensitive else s.value, "source": int(s.source)}
                     for s in e.synonyms] if include_synonyms else [],
        "config_type": int(e.config_type), "documentation": e.documentation if include_docs else None,
    }


def _is_java_int(text: str) -> bool:
    """Whether Java's Integer.parseInt accepts ``text`` (an optional sign, then ASCII digits, in int32 range)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isascii() and digits.isdigit() and -2**31 <= int(text) < 2**31


def _broker_entity(broker_id: int, name: str, altering: bool = False) -> Tuple[int, Optional[str], Optional[str]]:
    """(error, message, zk entity name) for a BROKER resource name (Kafka words the refusal differently for
    DescribeConfigs and for the alter requests)."""
    if name == "":
        return 0, None, DEFAULT_ENTITY
    if name == str(broker_id):
        return 0, None, name
    if not _is_java_int(name):  # the alter requests' check is ConfigAdminManager's, worded "Node id"
        kind = "Node" if altering else "Broker"
        return ErrorCode.INVALID_REQUEST, f"{kind} id must be an integer, but it is: {name}", None
    if altering:
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker_id}, but received {name}", None
    return (ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker_id} or empty string, but received {name}", None)


async def describe(ctx: "RequestContext", request: Any, *, config: "DynamicBrokerConfig", metadata: "MetadataCache",
                   admin: "AdminManager", authz: Authz = _ALLOW_ALL) -> dict:
    version = ctx.api_version
    include_syn = bool(getattr(request, "include_synonyms", False)) or version == 0
    include_docs = bool(getattr(request, "include_documentation", False))
    results = []
    for r in request.resources:
        # Kafka's successful results carry an empty message, not null
        res = {"error_code": 0, "error_message": "", "resource_type": r.resource_type,
               "resource_name": r.resource_name, "configs": []}
        if authz.enabled and (denied := _refusal(authz, ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type,
                                                 r.resource_name)):
            res.update(error_code=denied, error_message=_DENIED_MESSAGES[denied])
            results.append(res)
            continue
        entries: List[Any] = []
        if r.resource_type == TOPIC:
            if metadata.topic(r.resource_name) is None:  # Kafka 3.9.1 sends an empty message here
                res.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="")
            else:
                overrides = await admin.topic_overrides(r.resource_name)
                entries = describe_topic_config(config.current, overrides)
        elif r.resource_type == BROKER:
            err, msg, entity = _broker_entity(config.broker_id, r.resource_name)
            if err:
                res.update(error_code=err, error_message=msg)
            else:
                entries = describe_broker_default_config(config.current) if entity == DEFAULT_ENTITY else \
                    describe_broker_config(config.current)
        elif r.resource_type == BROKER_LOGGER:
            err, msg, _ = _broker_entity(config.broker_id, r.resource_name)
            if err or r.resource_name == "":
                res.update(error_code=ErrorCode.INVALID_REQUEST, error_message=msg or "Broker id must be given")
            else:
                entries = _logger_entries()
        else:
            res.update(error_code=ErrorCode.INVALID_REQUEST, error_message=KAFKA_INVALID_REQUEST_MESSAGE)
        keys = r.configuration_keys
        if keys is not None and len(keys) > 0:
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        res["configs"] = [_entry_dict(e, version, include_syn and version >= 1, include_docs) for e in entries]
        results.append(res)
    return {"throttle_time_ms": 0, "results": results}


def _logger_entries() -> list:
    from broker.config.types import ConfigEntry
    names = ["root"] + sorted(n for n in logging.root.manager.loggerDict if n.startswith(("broker", "kafka.")))
    out = []
    for n in names:
        lg = logging.getLogger() if n == "root" else logging.getLogger(n)
        level = logging.getLevelName(lg.getEffectiveLevel())
        # as Kafka's log4j entries: log4j level names, type UNKNOWN, an empty documentation string
        out.append(ConfigEntry(n, _LOG4J_LEVELS.get(level, level), ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False,
                               False, ConfigType.UNKNOWN, [], ""))
    return out


_LOG4J_LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL", "NOTSET": "OFF"}


# --- altering ---------------------------------------------------------------------------
def _apply_ops(current: Dict[str, str], ops: List[Any], list_keys: set) -> Dict[str, str]:
    new = dict(current)
    for op in ops:
        kind = op.config_operation
        if kind == SET:
            if op.value is None:
                raise InvalidConfigError(f"Null value not supported for : {op.name}")
            new[op.name] = op.value
        elif kind == DELETE:
            new.pop(op.name, None)
        elif kind in (APPEND, SUBTRACT):
            if op.name not in list_keys:
                verb = "append" if kind == APPEND else "subtract"
                raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {op.name}")
            items = [x for x in new.get(op.name, "").split(",") if x]
            vals = [x.strip() for x in (op.value or "").split(",") if x.strip()]
            if kind == APPEND:
                items += [v for v in vals if v not in items]
            else:
                items = [x for x in items if x not in vals]
            new[op.name] = ",".join(items)
        else:
            raise InvalidConfigError(f"Unknown config operation {kind}")
    return new


def invalid_value_message(name: str, exc: Exception) -> str:
    """Kafka's ZkAdminManager wording for a topic value LogConfig refuses (not for unknown names)."""
    return f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): {exc}"


async def _alter_topic(metadata: "MetadataCache", admin: "AdminManager", name: str, new: Dict[str, str],
                       validate_only: bool) -> Tuple[int, Optional[str]]:
    if metadata.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    try:
        broker_config = getattr(admin, "broker_config", None)
        validate_topic_configs(new, broker_config() if broker_config is not None else None)
    except InvalidConfigError as exc:
        if isinstance(exc.__cause__, ConfigError):
            return ErrorCode.INVALID_CONFIG, invalid_value_message(name, exc)
        return ErrorCode.INVALID_CONFIG, str(exc)
    if not validate_only:
        await admin.set_topic_overrides(name, new)
    return 0, None


async def _alter_broker(config: "DynamicBrokerConfig", admin: "AdminManager", name: str, validate_only: bool, *,
                        legacy: Optional[Dict[str, str]] = None, ops: Optional[List[Any]] = None
                        ) -> Tuple[int, Optional[str]]:
    """A BROKER resource, as Kafka 3.9 answers it (broker/config/dynamic_rules.py): legacy AlterConfigs replaces the
    resource's whole dynamic set with ``legacy``, IncrementalAlterConfigs applies ``ops`` to the stored set."""
    err, msg, entity = _broker_entity(config.broker_id, name, altering=True)
    if err or entity is None:
        return err, msg
    per_broker = entity != DEFAULT_ENTITY
    stored = await admin.broker_overrides(entity)
    try:
        if legacy is not None:
            props = legacy
        else:
            for op in ops or ():
                if op.config_operation not in (SET, DELETE, APPEND, SUBTRACT):
                    raise dynamic_rules.Refused(ErrorCode.INVALID_REQUEST,
                                                f"Unknown operations type {op.config_operation}")
            current, dropped = dynamic_rules.from_persistent(stored, per_broker)
            for line in dropped:
                log.error("%s", line)
            props = dynamic_rules.apply_incremental(current, ops or ())
        dynamic_rules.validate(props, per_broker, config.current)
        applied = dynamic_rules.applicable(props)
        try:
            candidate = config.current.with_dynamic(per_broker=applied) if per_broker else \
                config.current.with_dynamic(cluster_default=applied)
        except ConfigError as exc:  # Kafka's DynamicBrokerConfig refuses a bad value as an invalid request
            raise dynamic_rules.Refused(ErrorCode.INVALID_REQUEST, str(exc)) from None
        if not validate_only:
            dynamic_rules.check_persistable(props, per_broker, name)
        dynamic_rules.check_applied_here(props, stored)
    except dynamic_rules.Refused as refused:
        return refused.code, refused.message
    if not validate_only:
        await admin.set_broker_overrides(entity, dict(props))
        config.update(candidate)
    return 0, None


def _unsupported_type(resource_type: int) -> str:
    """Kafka's words: ConfigAdminManager.preprocess refuses unknown types; CLIENT_METRICS passes it and is refused
    by ZkAdminManager (no client metrics subscriptions in ZooKeeper mode)."""
    if resource_type == CLIENT_METRICS:
        return "AlterConfigs is only supported for topics and brokers, but resource type is CLIENT_METRICS"
    return f"Unknown resource type {resource_type}"


def _preprocess(resources: List[Any], legacy: bool) -> Dict[int, Tuple[int, str]]:
    """ConfigAdminManager.preprocess's checks of any resource: a resource named twice, a key named twice, a null
    value (legacy) or a null value of an operation other than DELETE. id(resource) -> (error, message)."""
    out: Dict[int, Tuple[int, str]] = {}
    seen: Dict[Tuple[int, str], Any] = {}
    for r in resources:
        first = seen.setdefault((r.resource_type, r.resource_name), r)
        if first is not r:
            for x in (first, r):
                out[id(x)] = (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
    for r in resources:
        if id(r) in out:
            continue
        names = [c.name for c in r.configs]
        nulls = [c.name for c in r.configs if c.value is None and (legacy or c.config_operation != DELETE)]
        if len(set(names)) != len(names):
            out[id(r)] = (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        elif nulls:
            out[id(r)] = (ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    return out


async def alter(ctx: "RequestContext", request: Any, *, config: "DynamicBrokerConfig", metadata: "MetadataCache",
                admin: "AdminManager", authz: Authz = _ALLOW_ALL) -> dict:
    out = []
    refused = _preprocess(list(request.resources), legacy=True)
    for r in request.resources:
        denied = (_refusal(authz, ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name,
                           broker_logger=False) if authz.enabled else 0)
        if id(r) in refused:
            code, msg = refused[id(r)]
        elif denied:
            code, msg = denied, None
        elif r.resource_type == TOPIC:
            new = {c.name: c.value for c in r.configs}
            code, msg = await _alter_topic(metadata, admin, r.resource_name, new, request.validate_only)
        elif r.resource_type == BROKER:
            code, msg = await _alter_broker(config, admin, r.resource_name, request.validate_only,
                                            legacy={c.name: c.value for c in r.configs})
        else:  # BROKER_LOGGER included: legacy AlterConfigs does not take it
            code, msg = ErrorCode.INVALID_REQUEST, _unsupported_type(r.resource_type)
        out.append({"error_code": code, "error_message": msg, "resource_type": r.resource_type,
                    "resource_name": r.resource_name})
    return {"throttle_time_ms": 0, "responses": out}


async def incremental_alter(ctx: "RequestContext", request: Any, *, config: "DynamicBrokerConfig",
                            metadata: "MetadataCache", admin: "AdminManager", authz: Authz = _ALLOW_ALL) -> dict:
    out = []
    refused = _preprocess(list(request.resources), legacy=False)
    for r in request.resources:
        try:
            denied = (_refusal(authz, ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
                      if authz.enabled else 0)
            if id(r) in refused:
                code, msg = refused[id(r)]
            elif denied:
                code, msg = denied, None
            elif r.resource_type == TOPIC:
                if metadata.topic(r.resource_name) is None:
                    code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{r.resource_name}' does not exist."
                else:
                    current = await admin.topic_overrides(r.resource_name)
                    lists = {k for k, d in TOPIC_CONFIGS.items() if d.type == ConfigType.LIST}
                    new = _apply_ops(current, list(r.configs), lists)
                    code, msg = await _alter_topic(metadata, admin, r.resource_name, new, request.validate_only)
            elif r.resource_type == BROKER:
                code, msg = await _alter_broker(config, admin, r.resource_name, request.validate_only,
                                                ops=list(r.configs))
            elif r.resource_type == BROKER_LOGGER:
                code, msg = _alter_loggers(config.broker_id, r, request.validate_only)
            else:
                code, msg = ErrorCode.INVALID_REQUEST, _unsupported_type(r.resource_type)
        except InvalidConfigError as exc:
            code, msg = ErrorCode.INVALID_CONFIG, str(exc)
        out.append({"error_code": code, "error_message": msg, "resource_type": r.resource_type,
                    "resource_name": r.resource_name})
    return {"throttle_time_ms": 0, "responses": out}


def _alter_loggers(broker_id: int, r: Any, validate_only: bool) -> Tuple[int, Optional[str]]:
    err, msg, _ = _broker_entity(broker_id, r.resource_name)
    if err:
        return err, msg
    levels = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
    for c in r.configs:
        if c.config_operation == SET:
            if (c.value or "").upper() not in levels:
                return ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {c.name} to {c.value}"
        elif c.config_operation != DELETE:
            return ErrorCode.INVALID_REQUEST, f"{c.name}: only SET and DELETE apply to loggers"
    if not validate_only:
        for c in r.configs:
            lg = logging.getLogger() if c.name == "root" else logging.getLogger(c.name)
            lg.setLevel(levels[c.value.upper()] if c.config_operation == SET else logging.NOTSET)
    return 0, None
