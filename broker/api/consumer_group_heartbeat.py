"""ConsumerGroupHeartbeat (KIP-848): advertised, and refused, as a Kafka 3.9 ZooKeeper-mode broker does.

The new consumer group protocol needs the KRaft group coordinator; a ZooKeeper-mode Kafka 3.9 broker
lists the API in ApiVersions but answers UNSUPPORTED_VERSION with no message (checked against a real
3.9.1 broker), so clients that probe it fall back to the classic protocol exactly as they do on Kafka.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext

MIN_VERSION, MAX_VERSION = 0, 0


async def handle(ctx: "RequestContext", request: Any) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(ErrorCode.UNSUPPORTED_VERSION), "error_message": None,
            "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
