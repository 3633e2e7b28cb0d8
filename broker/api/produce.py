"""Produce: check acks and topics, hand record buffers to the replica manager, report offsets.

Record bytes stay opaque here except for one check Kafka makes before the log sees them:
v3+ requests carry exactly one magic-2 batch per partition. Magic 0/1 message sets (v0-v2)
are converted to magic 2 first, as a Kafka 3.x broker does.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Set, Tuple

from broker.api.authz import Authz
from broker.api.leader_hint import current_leader
from broker.api.registry import CLOSE_CONNECTION
from broker.accel import record_batch
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey, response_schema
from broker.protocol.codec import ElementLayout, PreEncoded, element_layout
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.produce_verification import ProduceVerification
    from broker.cluster.metadata_cache import MetadataCache
    from broker.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]

MIN_VERSION, MAX_VERSION = 0, 11
#: an answer's empty record_errors: one shared immutable value (a Produce answers thousands of partitions)
_NO_RECORD_ERRORS: Tuple[Any, ...] = ()
_ALLOW_ALL = Authz()
_SILENT = object()  # acks=0 request refused without an answer


def _has_transactional_records(request: Any) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: the first batch of some partition is transactional."""
    for topic in request.topic_data:
        for pd in topic.partition_data:
            r = pd.records
            if r is not None and record_batch.is_transactional(r):
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


class _Refused(NamedTuple):
    """A partition answered without an append: the error and, where Kafka sends one, its message."""

    error_code: int
    message: str


def _prepare(records: Any, version: int) -> Any:
    """The writable buffer of one partition's records, or the ``_Refused`` answer when they cannot be appended."""
    if records is None or len(records) == 0:
        return _Refused(ErrorCode.INVALID_RECORD, "Produce request carries no record batch for this partition")
    magic = record_batch.batch_magic(records)
    if magic < 0:
        return _Refused(ErrorCode.CORRUPT_MESSAGE, "Record set is too short to hold a batch header")
    if magic != 2:
        if version >= 3:
            return _Refused(ErrorCode.INVALID_RECORD, f"Produce v{version} requires magic 2 batches, got magic {magic}")
        from broker.protocol.records.legacy import convert_legacy_message_set
        try:
            return bytearray(convert_legacy_message_set(records))
        except Exception as exc:  # CorruptRecordError and friends
            return _Refused(ErrorCode.CORRUPT_MESSAGE, str(exc))
    if version >= 3 and record_batch.batch_size(records) != len(records):
        # Kafka: v3+ carries exactly one record batch per partition.
        return _Refused(ErrorCode.INVALID_RECORD, f"Produce requests with version {version} must contain exactly "
                                                  "one record batch")
    # Writable copy only when the frame is read-only: offsets are stamped in place.
    if records.__class__ is memoryview and not records.readonly:
        return records
    return bytearray(records)


#: append errors Kafka's ReplicaManager answers with LogAppendInfo.UNKNOWN_LOG_APPEND_INFO (log start offset -1)
_UNKNOWN_APPEND_INFO = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                  ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                                  ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})


def partition_answer(idx: int, r: Any) -> dict:
    """One partition's ProduceResponse entry from an append result, with Kafka's rules for the error cases."""
    code = r.error_code
    if not code:  # the common case, without the error rules
        return {"index": idx, "error_code": 0, "base_offset": r.base_offset, "log_append_time_ms": r.log_append_time_ms,
                "log_start_offset": r.log_start_offset, "record_errors": _NO_RECORD_ERRORS, "error_message": None}
    unknown = code in _UNKNOWN_APPEND_INFO
    return {"index": idx, "error_code": code, "base_offset": r.base_offset,
            "log_append_time_ms": r.log_append_time_ms, "log_start_offset": -1 if unknown else r.log_start_offset,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in r.record_errors],
            # Kafka sends the message only where hasCustomErrorMessage: a RecordValidationException (the errors
            # that name records) and a failed KIP-890 verification
            "error_message": r.error_message if r.record_errors or r.custom_message else None}


def _success_layout(version: int) -> Optional[ElementLayout]:
    """How a successful partition answer encodes at ``version`` (v5+: every field after log_start_offset holds its
    default), so that a Produce of thousands of partitions answers each with one pack; None before v5."""
    if version < 5:
        return None
    layout = _SUCCESS_LAYOUTS.get(version)
    if layout is None:
        layout = _SUCCESS_LAYOUTS[version] = element_layout(
            response_schema(ApiKey.PRODUCE, version), ("responses", "partition_responses"), version,
            ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset"))
    return layout


_SUCCESS_LAYOUTS: Dict[int, ElementLayout] = {}


def _refused_answer(idx: int, code: int) -> dict:
    """A partition refused before the append (authorization, unknown partition, ProduceRequest.validateRecords):
    Kafka answers the error alone, without a message."""
    return {"index": idx, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": _NO_RECORD_ERRORS, "error_message": None}


def _partition_entries(request: Any, version: int, metadata: "MetadataCache", denied: Optional[Set[str]]
                       ) -> Tuple[Dict[TopicPartition, Any], Dict[TopicPartition, _Refused]]:
    """({partition: records to append}, {partition: its answer} for those answered without an append), checked in
    Kafka's order: WRITE on the topic, acks, the partition exists, the records (``_prepare``)."""
    entries: Dict[TopicPartition, Any] = {}
    refused: Dict[TopicPartition, _Refused] = {}
    acks_valid = request.acks in (0, 1, -1)
    for topic in request.topic_data:
        name = topic.name
        if denied is not None and name in denied:
            for pd in topic.partition_data:
                refused[(name, pd.index)] = _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "")
            continue
        topic_meta = metadata.topic(name)
        known = topic_meta.partitions if topic_meta is not None else {}
        for pd in topic.partition_data:
            idx = pd.index
            tp = (name, idx)
            if not acks_valid:
                refused[tp] = _Refused(ErrorCode.INVALID_REQUIRED_ACKS, "")
            elif idx not in known:
                refused[tp] = _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")
            else:
                buf = _prepare(pd.records, version)
                if buf.__class__ is _Refused:
                    refused[tp] = buf
                else:
                    entries[tp] = buf
    return entries, refused


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
    entries, refused = _partition_entries(request, version, metadata, denied)

    if not entries:
        appended = {}
    elif verification is not None:  # transactional batches are verified with the coordinator first (KIP-890)
        appended = await verification.append(acks, entries, request.timeout_ms, request.transactional_id, version)
    else:
        appended = await replica_manager.append_records(acks, entries, timeout_ms=request.timeout_ms)

    if acks == 0:
        # No response; on error Kafka closes the connection so the client notices.
        failed = any(r.error_code for r in appended.values()) or any(tp not in appended for tp in refused)
        return CLOSE_CONNECTION if failed else None
    node_endpoints: Dict[int, dict] = {}
    responses = []
    layout = _success_layout(version)
    for topic in request.topic_data:
        name = topic.name
        parts: List[Any] = []
        for pd in topic.partition_data:
            idx = pd.index
            tp = (name, idx)
            r = appended.get(tp)
            if r is None:
                parts.append(_refused_answer(idx, refused[tp].error_code))
                continue
            if layout is not None and not r.error_code:  # partition_answer's success case, already encoded
                parts.append(PreEncoded(layout.prefix.pack(idx, 0, r.base_offset, r.log_append_time_ms,
                                                           r.log_start_offset) + layout.suffix))
                continue
            part = partition_answer(idx, r)
            if version >= 10 and r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                part["current_leader"] = current_leader(tp, ctx.listener_name, replica_manager, metadata,
                                                        node_endpoints)
            parts.append(part)
        responses.append({"name": name, "partition_responses": parts})
    out = {"responses": responses, "throttle_time_ms": 0}
    if node_endpoints:
        out["node_endpoints"] = list(node_endpoints.values())
    return out
