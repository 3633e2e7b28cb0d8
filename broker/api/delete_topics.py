"""DeleteTopics: by name (v0-v5) or by name/topic id (v6)."""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.metadata_cache import MetadataCache

MIN_VERSION, MAX_VERSION = 0, 6
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: "RequestContext", request: Any, *, admin: "AdminManager", metadata: "MetadataCache") -> dict:
    wanted: List[Tuple[Optional[str], Optional[uuid.UUID]]] = []
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(n, None) for n in request.topic_names]
    responses = []
    for name, tid in wanted:
        if name is None and tid is not None and tid != ZERO_UUID:
            name = metadata.topic_name(tid)
            if name is None:
                responses.append({"name": None, "topic_id": tid, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                                  "error_message": "This server does not host this topic ID."})
                continue
        if name is None:
            responses.append({"name": None, "topic_id": tid or ZERO_UUID, "error_code": ErrorCode.INVALID_REQUEST,
                              "error_message": "Neither topic name nor id was given."})
            continue
        topic_id = metadata.topic_id(name) or ZERO_UUID
        code, msg = await admin.delete_topic(name, request.timeout_ms)
        responses.append({"name": name, "topic_id": topic_id, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": 0, "responses": responses}
