"""Produce: check acks and topics, hand record buffers to the replica manager, report offsets.

Record bytes stay opaque here except for one check Kafka makes before the log sees them:
v3+ requests carry exactly one magic-2 batch per partition. Magic 0/1 message sets (v0-v2)
are converted to magic 2 first, as a Kafka 3.x broker does.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from broker.api.leader_hint import current_leader
from broker.api.registry import CLOSE_CONNECTION
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

MIN_VERSION, MAX_VERSION = 0, 11
_MAGIC_OFFSET = 16  # baseOffset(8) + batchLength(4) + partitionLeaderEpoch(4)


def _prepare(records: Any, version: int) -> Tuple[int, Any, str]:
    """(error_code, writable buffer, message) for one partition's records."""
    if records is None or len(records) == 0:
        return ErrorCode.INVALID_RECORD, None, "Produce request carries no record batch for this partition"
    if len(records) <= _MAGIC_OFFSET:
        return ErrorCode.CORRUPT_MESSAGE, None, "Record set is too short to hold a batch header"
    magic = records[_MAGIC_OFFSET]
    if magic == 2 and version >= 3:
        # Kafka: v3+ carries exactly one record batch per partition.
        batch_length = int.from_bytes(records[8:12], "big", signed=True)
        if batch_length + 12 != len(records):
            return (ErrorCode.INVALID_RECORD, None,
                    f"Produce requests with version {version} must contain exactly one record batch")
    if magic != 2:
        if version >= 3:
            return ErrorCode.INVALID_RECORD, None, f"Produce v{version} requires magic 2 batches, got magic {magic}"
        from broker.protocol.records.legacy import convert_legacy_message_set
        try:
            return 0, bytearray(convert_legacy_message_set(records)), ""
        except Exception as exc:  # CorruptRecordError and friends
            return ErrorCode.CORRUPT_MESSAGE, None, str(exc)
    # Writable copy only when the frame is read-only: offsets are stamped in place.
    if isinstance(records, memoryview) and not records.readonly:
        return 0, records, ""
    return 0, bytearray(records), ""


async def handle(ctx: "RequestContext", request: Any, *,
                 replica_manager: "ReplicaManager", metadata: "MetadataCache") -> Any:
    version = ctx.api_version
    acks = request.acks
    entries: Dict[Tuple[str, int], Any] = {}
    results: Dict[Tuple[str, int], Tuple[int, str]] = {}
    order: List[Tuple[str, List[int]]] = []
    for topic in request.topic_data:
        idxs = []
        for pd in topic.partition_data:
            tp = (topic.name, pd.index)
            idxs.append(pd.index)
            if acks not in (0, 1, -1):
                results[tp] = (ErrorCode.INVALID_REQUIRED_ACKS, "")
                continue
            if metadata.partition(topic.name, pd.index) is None:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")
                continue
            code, buf, msg = _prepare(pd.records, version)
            if code:
                results[tp] = (code, msg)
                continue
            entries[tp] = buf
        order.append((topic.name, idxs))

    appended = (await replica_manager.append_records(acks, entries, timeout_ms=request.timeout_ms)
                if entries else {})

    any_error = False
    responses = []
    node_endpoints: Dict[int, dict] = {}
    for name, idxs in order:
        parts = []
        for idx in idxs:
            tp = (name, idx)
            r = appended.get(tp)
            if r is not None:
                any_error |= r.error_code != 0
                parts.append({
                    "index": idx, "error_code": r.error_code, "base_offset": r.base_offset,
                    "log_append_time_ms": r.log_append_time_ms, "log_start_offset": r.log_start_offset,
                    "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                                      for i, m in r.record_errors],
                    "error_message": r.error_message if r.error_code else None,
                })
                if version >= 10 and r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    parts[-1]["current_leader"] = current_leader(tp, ctx.listener_name, replica_manager, metadata,
                                                                 node_endpoints)
            else:
                code, msg = results[tp]
                any_error = True
                parts.append({"index": idx, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
                              "log_start_offset": -1, "record_errors": [], "error_message": msg or None})
        responses.append({"name": name, "partition_responses": parts})
    if acks == 0:
        # No response; on error Kafka closes the connection so the client notices.
        return CLOSE_CONNECTION if any_error else None
    out = {"responses": responses, "throttle_time_ms": 0}
    if node_endpoints:
        out["node_endpoints"] = list(node_endpoints.values())
    return out
