"""Produce: check acks and topics, hand record buffers to the replica manager, report offsets.

Record bytes stay opaque here except for one check Kafka makes before the log sees them:
v3+ requests carry exactly one magic-2 batch per partition. Magic 0/1 message sets (v0-v2)
are converted to magic 2 first, as a Kafka 3.x broker does.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

from broker.api.authz import Authz
from broker.api.leader_hint import current_leader
from broker.api.registry import CLOSE_CONNECTION
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.produce_verification import ProduceVerification
    from broker.cluster.metadata_cache import MetadataCache
    from broker.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

MIN_VERSION, MAX_VERSION = 0, 11
_MAGIC_OFFSET = 16  # baseOffset(8) + batchLength(4) + partitionLeaderEpoch(4)
_ATTRIBUTES_OFFSET = 21  # ... magic(1) + crc(4)
_TRANSACTIONAL_FLAG = 0x10
_ALLOW_ALL = Authz()
_SILENT = object()  # acks=0 request refused without an answer


def _has_transactional_records(request: Any) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: the first batch of some partition is transactional."""
    for topic in request.topic_data:
        for pd in topic.partition_data:
            r = pd.records
            if r is not None and len(r) > _ATTRIBUTES_OFFSET + 1 and r[_MAGIC_OFFSET] == 2 \
                    and r[_ATTRIBUTES_OFFSET + 1] & _TRANSACTIONAL_FLAG:
                return True
    return False


def _authorize(ctx: "RequestContext", request: Any, authz: Authz) -> Tuple[Set[str], Any]:
    """(topics refused WRITE, a whole-request refusal or None), as Kafka's handleProduceRequest: transactional
    records need WRITE on the request's transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    and no answer at all for acks=0), then each topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED)."""
    if _has_transactional_records(request):
        tid = getattr(request, "transactional_id", None)
        if tid is None or not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            if request.acks == 0:
                return set(), _SILENT
            code = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            return set(), {"throttle_time_ms": 0, "responses": [
                {"name": t.name, "partition_responses": [
                    {"index": pd.index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
                     "log_start_offset": -1, "record_errors": [], "error_message": None}
                    for pd in t.partition_data]} for t in request.topic_data]}
    names = [t.name for t in request.topic_data]
    return set(names) - authz.filter_allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, names), None


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


#: append errors Kafka's ReplicaManager answers with LogAppendInfo.UNKNOWN_LOG_APPEND_INFO (log start offset -1)
_UNKNOWN_APPEND_INFO = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                  ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                                  ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})


def partition_answer(idx: int, r: Any) -> dict:
    """One partition's ProduceResponse entry from an append result, with Kafka's rules for the error cases."""
    unknown = r.error_code in _UNKNOWN_APPEND_INFO
    return {"index": idx, "error_code": r.error_code, "base_offset": r.base_offset,
            "log_append_time_ms": r.log_append_time_ms, "log_start_offset": -1 if unknown else r.log_start_offset,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in r.record_errors],
            # Kafka sends the message only where hasCustomErrorMessage: a RecordValidationException (the errors
            # that name records) and a failed KIP-890 verification
            "error_message": r.error_message if r.error_code and (r.record_errors or r.custom_message) else None}


async def handle(ctx: "RequestContext", request: Any, *,
                 replica_manager: "ReplicaManager", metadata: "MetadataCache", authz: Authz = _ALLOW_ALL,
                 verification: Optional["ProduceVerification"] = None) -> Any:
    version = ctx.api_version
    acks = request.acks
    denied: Optional[Set[str]] = None
    if authz.enabled:
        denied, refusal = _authorize(ctx, request, authz)
        if refusal is not None:
            return None if refusal is _SILENT else refusal
    entries: Dict[Tuple[str, int], Any] = {}
    results: Dict[Tuple[str, int], Tuple[int, str]] = {}
    order: List[Tuple[str, List[int]]] = []
    for topic in request.topic_data:
        idxs = []
        refused = denied is not None and topic.name in denied
        for pd in topic.partition_data:
            tp = (topic.name, pd.index)
            idxs.append(pd.index)
            if refused:
                results[tp] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "")
                continue
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

    if not entries:
        appended = {}
    elif verification is not None:  # transactional batches are verified with the coordinator first (KIP-890)
        appended = await verification.append(acks, entries, request.timeout_ms, request.transactional_id, version)
    else:
        appended = await replica_manager.append_records(acks, entries, timeout_ms=request.timeout_ms)

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
                parts.append(partition_answer(idx, r))
                if version >= 10 and r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    parts[-1]["current_leader"] = current_leader(tp, ctx.listener_name, replica_manager, metadata,
                                                                 node_endpoints)
            else:
                code, msg = results[tp]
                any_error = True
                # Kafka answers partitions refused before the append (authorization, unknown partition,
                # ProduceRequest.validateRecords) with the error alone: no message
                parts.append({"index": idx, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
                              "log_start_offset": -1, "record_errors": [], "error_message": None})
        responses.append({"name": name, "partition_responses": parts})
    if acks == 0:
        # No response; on error Kafka closes the connection so the client notices.
        return CLOSE_CONNECTION if any_error else None
    out = {"responses": responses, "throttle_time_ms": 0}
    if node_endpoints:
        out["node_endpoints"] = list(node_endpoints.values())
    return out
