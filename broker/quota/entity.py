"""Quota entities, their ZooKeeper names and Kafka's 8-level precedence (most specific wins).

Configs live at ``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>`` and
``/config/clients/<client-id>``, where ``<default>`` is the default entity and real names are
*sanitized* (URL-encoded as Java's URLEncoder does, with ``*`` → ``%2A`` and space → ``%20``).
For each quota key separately, a connection of (user, client-id) gets the first level below
that sets the key; the level also decides who *shares* the measured rate (the "metric tags"):
an explicit or default *user* level without a client shares across all client-ids of that user,
and so on, exactly as Kafka's DefaultQuotaCallback groups them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, Mapping, Optional, Tuple
from urllib.parse import unquote

DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: quota key -> Kafka's type of its value ("long" keys must be whole numbers)
CLIENT_QUOTA_KEYS: Dict[str, str] = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long",
                                     REQUEST_PERCENTAGE: "double", CONTROLLER_MUTATION_RATE: "double"}
IP_QUOTA_KEYS: Dict[str, str] = {CONNECTION_CREATION_RATE: "int"}

_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: the znode-safe form of a user or client id."""
    out = []
    for ch in name:
        if ch in _UNRESERVED:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def desanitize(name: str) -> str:
    return unquote(name, encoding="utf-8")


@dataclass(frozen=True)
class QuotaEntity:
    """A quota entity as stored: user and client-id are raw names, DEFAULT, or None (level absent)."""

    user: Optional[str] = None
    client_id: Optional[str] = None

    def config_path(self) -> Tuple[str, str]:
        """(entity type, entity name) of its /config znode, names sanitized."""
        def s(n: str) -> str:
            return n if n == DEFAULT else sanitize(n)
        if self.user is not None and self.client_id is not None:
            return "users", f"{s(self.user)}/clients/{s(self.client_id)}"
        if self.user is not None:
            return "users", s(self.user)
        if self.client_id is not None:
            return "clients", s(self.client_id)
        raise ValueError("a quota entity needs a user or a client-id")

    @staticmethod
    def from_config_path(entity_path: str) -> Optional["QuotaEntity"]:
        """'users/a%40b/clients/app' -> QuotaEntity('a@b', 'app'); None for non-quota paths."""
        parts = entity_path.split("/")

        def d(n: str) -> str:
            return n if n == DEFAULT else desanitize(n)
        if len(parts) == 2 and parts[0] == "users":
            return QuotaEntity(user=d(parts[1]))
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
            return QuotaEntity(user=d(parts[1]), client_id=d(parts[3]))
        if len(parts) == 2 and parts[0] == "clients":
            return QuotaEntity(client_id=d(parts[1]))
        return None

    def describe(self) -> str:
        bits = []
        if self.user is not None:
            bits.append(f"user={'default' if self.user == DEFAULT else self.user}")
        if self.client_id is not None:
            bits.append(f"client-id={'default' if self.client_id == DEFAULT else self.client_id}")
        return ", ".join(bits)


#: What shares one measured rate: (user tag, client-id tag); "" means "all of them".
MetricTags = Tuple[str, str]


class QuotaOverrides:
    """Every entity's quota values (one key, e.g. producer_byte_rate), resolved with Kafka's precedence."""

    def __init__(self) -> None:
        self._values: Dict[QuotaEntity, float] = {}

    def __len__(self) -> int:
        return len(self._values)

    def set(self, entity: QuotaEntity, value: Optional[float]) -> None:
        if value is None:
            self._values.pop(entity, None)
        else:
            self._values[entity] = value

    def items(self) -> Iterator[Tuple[QuotaEntity, float]]:
        return iter(self._values.items())

    def metric_tags(self, user: str, client_id: str) -> Optional[MetricTags]:
        """Who shares the rate of this connection, or None if no level sets this key (unthrottled)."""
        v = self._values
        if not v:
            return None
        if QuotaEntity(user, client_id) in v or QuotaEntity(user, DEFAULT) in v:
            return user, client_id
        if QuotaEntity(user) in v:
            return user, ""
        if QuotaEntity(DEFAULT, client_id) in v or QuotaEntity(DEFAULT, DEFAULT) in v:
            return user, client_id
        if QuotaEntity(DEFAULT) in v:
            return user, ""
        if QuotaEntity(client_id=client_id) in v or QuotaEntity(client_id=DEFAULT) in v:
            return "", client_id
        return None

    def limit(self, tags: MetricTags) -> Optional[float]:
        """The bound of a group of connections (Kafka's DefaultQuotaCallback.quotaLimit)."""
        user, client_id = tags
        v = self._values
        if user and client_id:
            for e in (QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT), QuotaEntity(DEFAULT, client_id),
                      QuotaEntity(DEFAULT, DEFAULT)):
                if e in v:
                    return v[e]
            return None
        if user:
            for e in (QuotaEntity(user), QuotaEntity(DEFAULT)):
                if e in v:
                    return v[e]
            return None
        if client_id:
            for e in (QuotaEntity(client_id=client_id), QuotaEntity(client_id=DEFAULT)):
                if e in v:
                    return v[e]
        return None


def parse_quota_values(config: Mapping[str, str], keys: Mapping[str, str] = CLIENT_QUOTA_KEYS) -> Dict[str, float]:
    """The quota keys of an entity's config znode as floats (other keys, e.g. SCRAM credentials, skipped)."""
    out: Dict[str, float] = {}
    for key in keys:
        if key in config:
            try:
                out[key] = float(config[key])
            except (TypeError, ValueError):
                continue
    return out


__all__ = ["DEFAULT", "QuotaEntity", "QuotaOverrides", "sanitize", "desanitize", "parse_quota_values",
           "CLIENT_QUOTA_KEYS", "IP_QUOTA_KEYS"]
