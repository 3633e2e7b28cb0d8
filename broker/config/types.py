"""Config value types, validators and the one-line ConfigError, shared by broker and topic configs.

Parsing follows Kafka's ConfigDef: values arrive as strings (from a .properties file, an --override or an
AlterConfigs request) and are converted once, here, so every error message has Kafka's shape:
"Invalid value <v> for configuration <key>: <reason>".
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Sequence

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT_MAX = 2**15 - 1
SHORT_MIN = -(2**15)
DOUBLE_MAX = 1.7976931348623157e308


class ConfigError(ValueError):
    """A config key has a value Kafka would reject; str() is one line naming the key and value."""

    def __init__(self, name: str, value: Any, reason: str | None = None, *, message: str | None = None) -> None:
        self.name = name
        self.value = value
        self.reason = reason
        if message is None:
            message = f"Invalid value {value} for configuration {name}" + (f": {reason}" if reason else "")
        super().__init__(message)


class InvalidConfigError(Exception):
    """A topic/broker config change a client asked for is invalid; api/ answers INVALID_CONFIG with str(self)."""


class ConfigType(enum.IntEnum):
    """Kafka's ConfigType ids as sent in DescribeConfigs v3+ (config_type)."""

    UNKNOWN = 0  # entries without a ConfigDef type: broker loggers
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs source ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Dynamic(enum.Enum):
    """Whether AlterConfigs may change a broker key, as Kafka's DynamicBrokerConfig classifies it."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(name, value, f"Value must be at least {_num(minimum)}")

    check.__doc__ = f"[{_num(minimum)},...]"
    return check


def between(minimum: float, maximum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        if value < minimum:
            raise ConfigError(name, value, f"Value must be at least {_num(minimum)}")
        if value > maximum:
            raise ConfigError(name, value, f"Value must be no more than {_num(maximum)}")

    check.__doc__ = f"[{_num(minimum)},...,{_num(maximum)}]"
    return check


def one_of(*allowed: str, case_sensitive: bool = True) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        ok = value in allowed if case_sensitive else value.lower() in {a.lower() for a in allowed}
        if not ok:
            raise ConfigError(name, value, f"String must be one of: {', '.join(allowed)}")

    check.__doc__ = "[" + ", ".join(allowed) + "]"
    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        for item in value or ():
            if item not in allowed:
                raise ConfigError(name, item, f"String must be one of: {', '.join(allowed)}")

    check.__doc__ = "[" + ", ".join(allowed) + "]"
    return check


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def parse_value(name: str, ctype: ConfigType, raw: Any) -> Any:
    """Convert a raw (usually string) value to the Python value for ctype, Kafka-style errors."""
    if raw is None:
        return None
    if ctype in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
        return str(raw).strip() if ctype != ConfigType.PASSWORD else str(raw)
    if ctype == ConfigType.LIST:
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw]
        text = str(raw).strip()
        return [p.strip() for p in text.split(",") if p.strip()] if text else []
    if ctype == ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ConfigError(name, raw, "Expected value to be either true or false")
    if ctype == ConfigType.DOUBLE:
        try:
            return float(str(raw).strip())
        except ValueError:
            raise ConfigError(name, raw, "Not a number of type DOUBLE") from None
    bounds = {
        ConfigType.INT: (INT_MIN, INT_MAX),
        ConfigType.LONG: (LONG_MIN, LONG_MAX),
        ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    }[ctype]
    try:
        value = raw if isinstance(raw, int) and not isinstance(raw, bool) else int(str(raw).strip(), 10)
    except ValueError:
        raise ConfigError(name, raw, f"Not a number of type {ctype.name}") from None
    if not bounds[0] <= value <= bounds[1]:
        raise ConfigError(name, raw, f"Not a number of type {ctype.name}")
    return value


def to_string(ctype: ConfigType, value: Any) -> str | None:
    """Render a typed value the way Kafka's ConfigDef.convertToString does (DescribeConfigs values)."""
    if value is None:
        return None
    if ctype == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype == ConfigType.LIST:
        return ",".join(value)
    if ctype == ConfigType.DOUBLE:
        return repr(float(value)) if float(value) != DOUBLE_MAX else "1.7976931348623157E308"
    return str(value)


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry (broker or topic)."""

    name: str
    value: str | None
    source: ConfigSource
    is_sensitive: bool
    read_only: bool
    config_type: ConfigType
    synonyms: Sequence["ConfigSynonym"]
    documentation: str | None


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource
