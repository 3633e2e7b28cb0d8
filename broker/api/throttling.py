"""Where the API layer meets client quotas: who the client is, what it used, how long it waits.

Kafka's rules, applied here: a produce is charged its request bytes, a consumer fetch its response
bytes (a throttled fetch returns an empty response and is not charged), every request its handler
time (:mod:`broker.util.request_time`); the response carries the largest throttle time, and the
connection stays muted that long after answering (KIP-219), so a client that ignores the field is
slowed just the same. Inter-broker requests and follower fetches are never throttled by client quotas.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from broker.protocol.api import ApiKey

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.quota.client_quota_manager import ControllerMutationQuotaManager, QuotaManagers

#: APIs Kafka marks clusterAction (controller and replication traffic): exempt from request quotas.
EXEMPT_APIS = frozenset(int(k) for k in (
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS) + tuple(
    int(getattr(ApiKey, n)) for n in ("WRITE_TXN_MARKERS", "ENVELOPE", "BROKER_HEARTBEAT", "BROKER_REGISTRATION")
    if hasattr(ApiKey, n)))

THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


def user_of(ctx: "RequestContext") -> str:
    """The quota 'user': the principal's name (ANONYMOUS on an unauthenticated listener)."""
    principal = ctx.connection.principal
    return principal.split(":", 1)[1] if ":" in principal else principal


def client_id_of(ctx: "RequestContext") -> str:
    return ctx.client_id or ""


def throttle(ctx: "RequestContext", throttle_ms: int) -> None:
    """Keep the connection muted at least `throttle_ms` after this response."""
    if throttle_ms > ctx.connection.throttle_time_ms:
        ctx.connection.throttle_time_ms = throttle_ms


class ControllerMutationQuota:
    """One request's view of controller_mutation_rate: strict (refuses when exceeded) or permissive."""

    def __init__(self, manager: "ControllerMutationQuotaManager", ctx: "RequestContext", strict: bool) -> None:
        self._manager = manager
        self._user = user_of(ctx)
        self._client_id = client_id_of(ctx)
        self._strict = strict

    def try_record(self, partitions: int) -> bool:
        """Charge a mutation of `partitions`; False (nothing charged) if a strict quota is already exceeded."""
        if not self._manager.enabled:
            return True
        if self._strict and self._manager.exceeded(self._user, self._client_id):
            return False
        self._manager.record(self._user, self._client_id, partitions)
        return True

    def throttle_time_ms(self) -> int:
        if not self._manager.enabled:
            return 0
        return self._manager.throttle_time_ms(self._user, self._client_id)


class RequestThrottler:
    """Applies the produce and request quotas after a handler answered (the dispatcher calls it)."""

    def __init__(self, quotas: "QuotaManagers") -> None:
        self.quotas = quotas

    @property
    def active(self) -> bool:
        q = self.quotas
        return q.produce.enabled or q.request.enabled

    @property
    def fetch_active(self) -> bool:
        return self.quotas.fetch.enabled or self.quotas.request.enabled

    def after_handler(self, ctx: "RequestContext", frame_bytes: int, handler_ns: int, response: object) -> None:
        """Charge this request; put the throttle time in the response (if it has the field) and mute."""
        api_key = ctx.api_key
        if api_key in EXEMPT_APIS or api_key == ApiKey.FETCH:  # fetch charges itself (empty response if throttled)
            return
        user, client_id = user_of(ctx), client_id_of(ctx)
        throttle_ms = 0
        if api_key == ApiKey.PRODUCE:
            throttle_ms = self.quotas.produce.record(user, client_id, frame_bytes)
            if response is None:  # acks=0: no response, Kafka charges no request time but still mutes
                throttle(ctx, throttle_ms)
                return
        throttle_ms = max(throttle_ms, self.request_throttle_ms(ctx, handler_ns))
        if throttle_ms > 0:
            if isinstance(response, dict) and "throttle_time_ms" in response:
                response["throttle_time_ms"] = max(int(response["throttle_time_ms"] or 0), throttle_ms)
            throttle(ctx, throttle_ms)

    def request_throttle_ms(self, ctx: "RequestContext", handler_ns: int) -> int:
        if not self.quotas.request.enabled:
            return 0
        # Kafka's unit: percent of one thread over a second, i.e. 1% = 10 ms of handler time per second.
        return self.quotas.request.record(user_of(ctx), client_id_of(ctx), handler_ns * 1e-7)

    def fetch_max_bytes(self, ctx: "RequestContext", requested: int) -> int:
        """Kafka caps a consumer fetch at what its quota allows in one window."""
        if not self.quotas.fetch.enabled:
            return requested
        cap: Optional[float] = self.quotas.fetch.max_value_in_window(user_of(ctx), client_id_of(ctx))
        return requested if cap is None else max(1, min(requested, int(cap)))

    def fetch_throttle_ms(self, ctx: "RequestContext", response_bytes: int, handler_ns: int) -> int:
        """Charge a consumer fetch; a positive answer means: send an empty response with this throttle time."""
        user, client_id = user_of(ctx), client_id_of(ctx)
        bandwidth = self.quotas.fetch.record(user, client_id, response_bytes) if self.quotas.fetch.enabled else 0
        request = self.request_throttle_ms(ctx, handler_ns)
        throttle_ms = max(bandwidth, request)
        if throttle_ms > 0:
            if bandwidth > 0 or self.quotas.fetch.enabled:
                self.quotas.fetch.unrecord(user, client_id, response_bytes)
            throttle(ctx, throttle_ms)
        return throttle_ms


__all__ = ["RequestThrottler", "ControllerMutationQuota", "user_of", "client_id_of", "EXEMPT_APIS"]
