"""DescribeClientQuotas / AlterClientQuotas against ZooKeeper, as a Kafka 3.9 ZooKeeper broker answers them.

Any broker answers both: Alter writes ``/config/users/...`` or ``/config/clients/...`` and a
``/config/changes`` notification (every broker, this one included, then applies the change
through :class:`~broker.cluster.dynamic_config.DynamicConfigManager`); Describe reads the
znodes. Entity names on the wire are raw (null = the default entity); in znode paths they are
sanitized. IP entities carry ``connection_creation_rate`` (KIP-612) and cannot be combined with
user or client-id.
"""
from __future__ import annotations

import asyncio
import decimal
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from broker.errors import ErrorCode
from broker.quota.connection_quotas import valid_ip_entity
from broker.quota.entity import CLIENT_QUOTA_KEYS, DEFAULT, IP_QUOTA_KEYS, QuotaEntity, desanitize, sanitize

if TYPE_CHECKING:
    from broker.util.executor import NamedExecutor
    from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

#: One entity on the wire: [(entity type, name or None for the default)].
WireEntity = List[Tuple[str, Optional[str]]]


class QuotaRequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: Optional[str]


@dataclass(frozen=True)
class QuotaOp:
    key: str
    value: float
    remove: bool


def java_double(v: float) -> str:
    """Double.toString: how Kafka writes a double quota into its znode (50.0, 1.0E7, 1.0E-4)."""
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        r = repr(float(v))
        return r if ("." in r or "e" in r or "n" in r) else r + ".0"
    sign, digits, exp = decimal.Decimal(repr(float(v))).normalize().as_tuple()
    ds = "".join(map(str, digits))
    e10 = len(ds) - 1 + int(exp)
    mant = ds[0] + "." + (ds[1:] or "0")
    return ("-" if sign else "") + f"{mant}E{e10}"


def _to_quota_entity(entity: WireEntity) -> "QuotaEntity | IpEntity":
    if not entity:
        raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: Dict[str, Optional[str]] = {}
    for etype, name in entity:
        if etype in seen:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Duplicate {etype} entity type")
        if etype not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}")
        if name is not None and name == "":
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Empty {etype} not supported")
        seen[etype] = DEFAULT if name is None else name
    if IP in seen:
        if len(seen) > 1:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should "
                                    "not be used with user/client ID entity.")
        ip = seen[IP] or DEFAULT
        if ip != DEFAULT and not valid_ip_entity(ip):
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
        return IpEntity(ip)
    return QuotaEntity(user=seen.get(USER), client_id=seen.get(CLIENT_ID))


class IpEntity:
    """/config/ips/<ip>: connection_creation_rate only."""

    def __init__(self, ip: str) -> None:
        self.ip = ip

    def config_path(self) -> Tuple[str, str]:
        return "ips", self.ip if self.ip == DEFAULT else sanitize(self.ip)

    def describe(self) -> str:
        return f"ip={'default' if self.ip == DEFAULT else self.ip}"


def _wire_entity(entity: QuotaEntity) -> WireEntity:
    out: WireEntity = []
    if entity.user is not None:
        out.append((USER, None if entity.user == DEFAULT else entity.user))
    if entity.client_id is not None:
        out.append((CLIENT_ID, None if entity.client_id == DEFAULT else entity.client_id))
    return out


def apply_ops(props: Dict[str, str], ops: Sequence[QuotaOp], keys: Dict[str, str] = CLIENT_QUOTA_KEYS
              ) -> Dict[str, str]:
    """The entity's new config after `ops` (Kafka's checks: known key, whole number for long/int keys)."""
    out = dict(props)
    for op in ops:
        if op.remove:
            out.pop(op.key, None)
            continue
        kind = keys.get(op.key)
        if kind is None:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op.key}")
        if kind in ("long", "int"):
            whole = int(op.value + 1e-6)
            if abs(whole - op.value) > 1e-6:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        f"Configuration {op.key} must be a {kind.upper()} value")
            out[op.key] = str(whole)
        else:
            out[op.key] = java_double(op.value)
    return out


class ClientQuotaAdmin:
    """Reads and writes quota entities in ZooKeeper for the two admin APIs."""

    def __init__(self, zk: "KafkaZkClient", zk_calls: "NamedExecutor") -> None:
        self.zk = zk
        self.zk_calls = zk_calls

    # ------------------------------------------------------------------ alter
    async def alter(self, entries: Sequence[Tuple[WireEntity, Sequence[QuotaOp]]], validate_only: bool
                    ) -> List[Tuple[int, Optional[str]]]:
        results: List[Tuple[int, Optional[str]]] = []
        for entity, ops in entries:
            try:
                # an ip entity may name a host: resolving it must not block the event loop
                qe = await asyncio.to_thread(_to_quota_entity, entity) if any(t == IP for t, _ in entity) \
                    else _to_quota_entity(entity)
                etype, ename = qe.config_path()
                props = await self.zk_calls.run(self.zk.get_entity_config, etype, ename)
                new = apply_ops(props, ops, IP_QUOTA_KEYS if isinstance(qe, IpEntity) else CLIENT_QUOTA_KEYS)
                if not validate_only:
                    await self.zk_calls.run(self.zk.set_entity_config, etype, ename, new)
                    log.info("Client quotas of %s set to %s", qe.describe(),
                             {k: v for k, v in new.items() if k in CLIENT_QUOTA_KEYS or k in IP_QUOTA_KEYS})
                results.append((0, None))
            except QuotaRequestError as exc:
                results.append((exc.code, str(exc)))
        return results

    # ------------------------------------------------------------------ describe
    def _all_entities(self) -> Dict[QuotaEntity, Dict[str, str]]:
        """zk-call thread: every user, user/client and client entity with its config."""
        out: Dict[QuotaEntity, Dict[str, str]] = {}
        for user in self.zk.get_children("/config/users"):
            u = user if user == DEFAULT else desanitize(user)
            out[QuotaEntity(user=u)] = self.zk.get_entity_config("users", user)
            for client in self.zk.get_children(f"/config/users/{user}/clients"):
                c = client if client == DEFAULT else desanitize(client)
                out[QuotaEntity(user=u, client_id=c)] = self.zk.get_entity_config("users", f"{user}/clients/{client}")
        for client in self.zk.get_children("/config/clients"):
            c = client if client == DEFAULT else desanitize(client)
            out[QuotaEntity(client_id=c)] = self.zk.get_entity_config("clients", client)
        return out

    async def describe(self, components: Sequence[FilterComponent], strict: bool
                       ) -> List[Tuple[WireEntity, Dict[str, float]]]:
        """Matching entities and their quota values; raises QuotaRequestError for a bad filter."""
        by_type: Dict[str, FilterComponent] = {}
        for c in components:
            if c.entity_type == "":
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
            if c.entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION,
                                        f"Custom entity type '{c.entity_type}' not supported")
            if c.entity_type in by_type:
                label = {USER: "user", CLIENT_ID: "client", IP: "ip"}[c.entity_type]
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Duplicate {label} filter component entity type")
            if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Unexpected match type {c.match_type}")
            if c.match_type == MATCH_EXACT and c.match is None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Exact match requires a name")
            by_type[c.entity_type] = c
        if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP "
                                    "filter component should not be used with user or clientId filter component.")
        if IP in by_type or (not by_type and not strict):
            ip_out = await self._describe_ips(by_type.get(IP), strict)
            if IP in by_type:
                return ip_out
        else:
            ip_out = []
        entities = await self.zk_calls.run(self._all_entities)

        def matches(component: Optional[FilterComponent], name: Optional[str]) -> bool:
            if component is None:
                return name is None or not strict
            if component.match_type == MATCH_SPECIFIED:
                return name is not None
            want = DEFAULT if component.match_type == MATCH_DEFAULT else component.match
            return name == want

        out: List[Tuple[WireEntity, Dict[str, float]]] = []
        for qe, props in sorted(entities.items(), key=lambda kv: (kv[0].user or "", kv[0].client_id or "")):
            values = {}
            for k, v in props.items():
                if k in CLIENT_QUOTA_KEYS:
                    try:
                        values[k] = float(v)
                    except ValueError:
                        continue
            if values and matches(by_type.get(USER), qe.user) and matches(by_type.get(CLIENT_ID), qe.client_id):
                out.append((_wire_entity(qe), values))
        return out + ip_out

    async def _describe_ips(self, component: Optional[FilterComponent], strict: bool
                            ) -> List[Tuple[WireEntity, Dict[str, float]]]:
        def read() -> Dict[str, Dict[str, str]]:
            return {ip: self.zk.get_entity_config("ips", ip) for ip in self.zk.get_children("/config/ips")}
        out: List[Tuple[WireEntity, Dict[str, float]]] = []
        for stored, props in sorted((await self.zk_calls.run(read)).items()):
            ip = stored if stored == DEFAULT else desanitize(stored)
            if component is not None and component.match_type != MATCH_SPECIFIED:
                want = DEFAULT if component.match_type == MATCH_DEFAULT else component.match
                if ip != want:
                    continue
            values = {k: float(v) for k, v in props.items() if k in IP_QUOTA_KEYS}
            if values:
                out.append(([(IP, None if ip == DEFAULT else ip)], values))
        return out


__all__ = ["ClientQuotaAdmin", "FilterComponent", "QuotaOp", "QuotaRequestError", "java_double", "apply_ops"]
