"""DescribeClientQuotas (48) and AlterClientQuotas (49): quota entities by user and client-id (KIP-546)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.cluster.client_quota_admin import FilterComponent, QuotaOp, QuotaRequestError

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.client_quota_admin import ClientQuotaAdmin

DESCRIBE_MIN, DESCRIBE_MAX = 0, 1
ALTER_MIN, ALTER_MAX = 0, 1


def _entity(pairs: Any) -> list:
    return [{"entity_type": t, "entity_name": n} for t, n in pairs]


async def describe(ctx: "RequestContext", request: Any, *, admin: "ClientQuotaAdmin") -> dict:
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = await admin.describe(components, bool(request.strict))
    except QuotaRequestError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": str(exc), "entries": None}
    # Kafka 3.9.1 answers a successful describe with an empty message, not null
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "entries": [
        {"entity": _entity(entity), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in found]}


async def alter(ctx: "RequestContext", request: Any, *, admin: "ClientQuotaAdmin") -> dict:
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                [QuotaOp(op.key, op.value, bool(op.remove)) for op in entry.ops]) for entry in request.entries]
    results = await admin.alter(entries, bool(request.validate_only))
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": msg, "entity": _entity(entity)}
        for (entity, _), (code, msg) in zip(entries, results)]}
