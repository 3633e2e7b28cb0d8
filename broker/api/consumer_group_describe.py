"""ConsumerGroupDescribe (KIP-848): advertised, and refused per group, as a Kafka 3.9 ZooKeeper-mode broker does.

Without the KRaft group coordinator every named group gets UNSUPPORTED_VERSION (no message, empty fields),
the answer a real 3.9.1 ZooKeeper-mode broker gives; classic groups are described by DescribeGroups.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext

MIN_VERSION, MAX_VERSION = 0, 0
_NO_OPERATIONS = -2147483648


async def handle(ctx: "RequestContext", request: Any) -> dict:
    return {"throttle_time_ms": 0, "groups": [
        {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "error_message": None, "group_id": g, "group_state": "",
         "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
         "authorized_operations": _NO_OPERATIONS} for g in request.group_ids]}
