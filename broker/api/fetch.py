"""Fetch: consumer reads with long polling, fetch sessions, and zero-copy record slices.

Records come back from storage as ``FileSlice`` parts; the encoder passes them through so
the network layer can ``sendfile`` them. A read_committed fetch (isolation_level 1) reads up to the
LSO and carries the aborted transactions overlapping its records; other fetches carry null there.
"""
from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Set, Tuple, cast

from broker.api.authz import Authz
from broker.api.fetch_session import CachedPartition
from broker.api.leader_hint import current_leader
from broker.replica.manager import ClientMetadata, FetchPartitionInfo, fetch_request_replica
from broker.errors import ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from broker.util import request_time

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.api.throttling import RequestThrottler
    from broker.api.fetch_session import FetchSession, FetchSessionCache
    from broker.cluster.metadata_cache import MetadataCache
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 17
#: how often a follower's incremental session looks at every partition it holds (catching a change nothing noted,
#: such as a log start offset moved by retention); between sweeps it looks only at what changed
SESSION_SWEEP_MS = 1000
_LEADER_MOVED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
ZERO_UUID = uuid.UUID(int=0)
TopicPartition = Tuple[str, int]
_ALLOW_ALL = Authz()


def _authorize(ctx: "RequestContext", request: Any, authz: Authz, to_read: List[Tuple[TopicPartition, Any]],
               errors: Dict[TopicPartition, int]) -> None:
    """Kafka's fetch authorization over every partition the fetch (or its session) covers: a follower needs
    CLUSTER_ACTION on the cluster, a consumer READ on each topic; refused partitions get TOPIC_AUTHORIZATION_FAILED
    in `errors` and are not read."""
    denied = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if fetch_request_replica(request, ctx.api_version)[0] >= 0:
        if not authz.allowed(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            errors.update((tp, denied) for tp, _ in to_read)
        return
    allowed = authz.filter_allowed(ctx, AclOperation.READ, ResourceType.TOPIC, [tp[0] for tp, _ in to_read])
    errors.update((tp, denied) for tp, _ in to_read if tp[0] not in allowed)


def _down_convert(results: Dict[TopicPartition, Any], fetch_offsets: Dict[TopicPartition, int], magic: int) -> None:
    """Fetch v0-v3 clients read only magic 0/1 message sets: convert what was read, as Kafka does."""
    from broker.accel import record_batch
    from broker.protocol.records.legacy import build_legacy_message_set
    from broker.storage.cleaner_batch import iter_stored_records  # compacted batches have offset gaps
    for tp, res in results.items():
        recs = res.records
        if recs is None:
            continue
        data = recs.read() if hasattr(recs, "read") else bytes(recs)
        infos, _ = record_batch.scan_batches(data)
        out = []
        for info in infos:
            if info.is_control:
                continue
            batch = data[info.position:info.position + info.size]
            if info.magic < 2:
                from broker.protocol.records.legacy import convert_legacy_message_set
                batch = convert_legacy_message_set(batch)
            for r in iter_stored_records(batch):
                offset = r.offset if info.magic == 2 else info.base_offset
                if offset >= fetch_offsets[tp]:
                    out.append(r._replace(offset=offset))
        converted = build_legacy_message_set(out, magic)
        res.records = converted
        res.size = len(converted)


class _SessionReads:
    """A follower's incremental session as the ReplicaManager reads it (broker.replica.manager.SessionReads)."""

    def __init__(self, session: "FetchSession", resent: Set[TopicPartition], id_of: Dict[str, uuid.UUID]) -> None:
        self.session = session
        self.resent = resent
        self.id_of = id_of

    @property
    def changes_seen(self) -> int:
        return self.session.changes_seen

    @changes_seen.setter
    def changes_seen(self, seq: int) -> None:
        self.session.changes_seen = seq

    def reads_for(self, tps: Optional[Iterable[TopicPartition]]) -> List[Tuple[TopicPartition, FetchPartitionInfo]]:
        parts = self.session.partitions
        items: Iterable[Tuple[TopicPartition, Optional[CachedPartition]]] = (
            parts.items() if tps is None else ((tp, parts.get(tp)) for tp in tps))
        resent, id_of = self.resent, self.id_of
        return [(tp, _read_of(tp, cp, id_of, None if tp in resent else cp)) for tp, cp in items if cp is not None]


def _read_of(tp: TopicPartition, cp: CachedPartition, id_of: Dict[str, uuid.UUID],
             known: Optional[CachedPartition]) -> FetchPartitionInfo:
    """A session partition as a read; ``known``: the partition was not resent, so what the fetcher was last told
    goes along (the replica manager leaves it out without a read when nothing is new)."""
    return FetchPartitionInfo(cp.fetch_offset, cp.max_bytes, cp.current_leader_epoch, cp.last_fetched_epoch,
                              cp.fetcher_log_start_offset, id_of.get(tp[0]), None if known is None else (
                                  known.high_watermark, known.last_stable_offset, known.log_start_offset))


def _partition_entry(index: int, error: int, res: Any = None) -> dict:
    if res is None or (res.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not error):
        # Kafka's FetchResponse.partitionResponse(error) for partitions its metadata does not know: the
        # generated defaults, an empty (not null) aborted transaction list among them
        return {"partition_index": index, "error_code": error or res.error_code, "high_watermark": -1,
                "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": [],
                "preferred_read_replica": -1, "records": b""}
    entry = {"partition_index": index, "error_code": error or res.error_code, "high_watermark": res.high_watermark,
             "last_stable_offset": res.last_stable_offset, "log_start_offset": res.log_start_offset,
             # read_committed: the aborted transactions overlapping the records (maybe none); otherwise null
             "aborted_transactions": None if res.aborted_transactions is None else [
                 {"producer_id": pid, "first_offset": first} for pid, first in res.aborted_transactions],
             "preferred_read_replica": res.preferred_read_replica,
             "records": res.records if res.records is not None else b""}
    if res.diverging_epoch is not None:
        entry["diverging_epoch"] = {"epoch": res.diverging_epoch[0], "end_offset": res.diverging_epoch[1]}
    return entry


def _records_size(records: Any) -> int:
    if records is None:
        return 0
    length = getattr(records, "length", None)
    return int(length) if length is not None else len(records)


async def handle(ctx: "RequestContext", request: Any, *,
                 replica_manager: "ReplicaManager", metadata: "MetadataCache",
                 fetch_sessions: "FetchSessionCache", throttler: Optional["RequestThrottler"] = None,
                 authz: Authz = _ALLOW_ALL) -> dict:
    started_ns = time.monotonic_ns()
    version = ctx.api_version
    uses_ids = version >= 13
    meta = metadata
    # 1. Requested partitions, in request order; unknown topic ids are answered directly.
    requested: List[Tuple[TopicPartition, CachedPartition]] = []
    id_of: Dict[str, uuid.UUID] = {}
    unknown: List[Tuple[Any, int, int]] = []  # (topic key, partition, error)
    for t in request.topics:
        if uses_ids:
            name = meta.topic_name(t.topic_id)
            if name is None:
                for p in t.partitions:
                    unknown.append((t.topic_id, p.partition, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            id_of[name] = t.topic_id
        else:
            name = t.topic
        for p in t.partitions:
            requested.append(((name, p.partition), CachedPartition(
                p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1),
                last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
                fetcher_log_start_offset=getattr(p, "log_start_offset", -1))))
    forgotten: List[TopicPartition] = []
    for f in getattr(request, "forgotten_topics_data", None) or []:
        name = meta.topic_name(f.topic_id) if uses_ids else f.topic
        if name is not None:
            forgotten.extend((name, p) for p in f.partitions)

    # 2. Session resolution.
    # the replica layer's clock (monotonic: a wall-clock jump evicts nothing), for the session's idle time and sweeps
    now_ms = replica_manager.time.mono_ms()
    session_id = getattr(request, "session_id", 0)
    epoch = getattr(request, "session_epoch", -1)
    err, session, to_read = fetch_sessions.begin(session_id, epoch, uses_ids, requested, forgotten, now_ms)
    if err:
        return {"throttle_time_ms": 0, "error_code": err, "session_id": 0, "responses": []}
    incremental = session is not None and epoch > 0
    pre_errors: Dict[TopicPartition, int] = {}
    readable = to_read
    if authz.enabled:
        _authorize(ctx, request, authz, to_read, pre_errors)
        if pre_errors:
            readable = [x for x in to_read if x[0] not in pre_errors]

    # 3. The read (long-polled). A follower's fetch (replica id >= 0) reads up to the LEO and records its
    #    position on the leader; a consumer's reads up to the HW or LSO, from a follower too if it sent rack
    #    metadata (v11+, KIP-392). Leader-epoch checks happen in the replica manager.
    rm = replica_manager
    replica_id, replica_epoch = fetch_request_replica(request, version)
    is_follower = replica_id >= 0
    # An incremental session's partitions the fetcher did not resend carry what it was last told: the replica
    # manager leaves out those with nothing new without reading them (their entries are omitted below anyway).
    # A follower's session goes further: only the partitions resent, changed since its last fetch (the replica
    # manager's PartitionChanges) or considered by the last answer are looked at, and every one once a second.
    scope: Optional[_SessionReads] = None
    if session is not None and not incremental:
        session.changes_seen = rm.changes.seq  # the full read below covers every change before this
    if incremental:
        assert session is not None
        resent = {tp for tp, _ in requested}
        if is_follower and not pre_errors:
            scope = _SessionReads(session, resent, id_of)
            later = rm.changes.since(session.changes_seen)
            session.changes_seen = rm.changes.seq
            if later is None or now_ms - session.swept_ms >= SESSION_SWEEP_MS:
                session.swept_ms = now_ms
                reads = scope.reads_for(None)
            else:
                look: Set[TopicPartition] = set(cast("List[TopicPartition]", later))  # changes note partitions
                look.update(resent)
                look.update(session.carry)
                reads = scope.reads_for(look)
        else:
            reads = [(tp, _read_of(tp, cp, id_of, None if tp in resent else cp)) for tp, cp in readable]
    else:
        reads = [(tp, _read_of(tp, cp, id_of, None)) for tp, cp in readable]
    client = (ClientMetadata(getattr(request, "rack_id", "") or "", ctx.client_id or "")
              if version >= 11 and not is_follower else None)
    quota_bound = throttler is not None and not is_follower and throttler.fetch_active
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)
    min_bytes = request.min_bytes
    if quota_bound:  # never more than the consumer's quota allows in one window
        max_bytes = throttler.fetch_max_bytes(ctx, max_bytes)  # type: ignore[union-attr]
        min_bytes = min(min_bytes, max_bytes)
    results = await rm.fetch_messages(
        reads, max_bytes, min_bytes, request.max_wait_ms,
        getattr(request, "isolation_level", 0), replica_id=replica_id, replica_epoch=replica_epoch,
        client_metadata=client, request_version=version, session=scope) if reads or scope is not None else {}
    if scope is not None:
        session.carry = set(results)  # type: ignore[union-attr]

    if quota_bound:
        size = sum(_records_size(r.records) for r in results.values())
        handler_ns = time.monotonic_ns() - started_ns - request_time.parked_ns()
        throttle_ms = throttler.fetch_throttle_ms(ctx, size, handler_ns)  # type: ignore[union-attr]
        if throttle_ms > 0:  # Kafka answers a throttled fetch with no data; the session keeps its positions
            return {"throttle_time_ms": throttle_ms, "error_code": 0,
                    "session_id": session.session_id if session is not None and incremental else 0,
                    "responses": []}

    if version < 4 and results and not is_follower:
        await rm.run_io(_down_convert, results, {tp: cp.fetch_offset for tp, cp in to_read}, 0 if version < 2 else 1)

    # 4. Response, grouped by topic in read order; incremental sessions report only changes.
    by_topic: Dict[str, List[dict]] = {}
    cached = session.partitions if session is not None else {}
    node_endpoints: Dict[int, dict] = {}
    if scope is not None:  # only what was considered can have news
        to_read = [(tp, cached[tp]) for tp in results if tp in cached]
    for tp, cp in to_read:
        if tp in pre_errors:
            entry = _partition_entry(tp[1], pre_errors[tp])
        else:
            res = results.get(tp)
            if res is None:  # unchanged (see FetchPartitionInfo.known): nothing to say in an incremental answer
                continue
            entry = _partition_entry(tp[1], 0, res)
            if version >= 16 and res.error_code in _LEADER_MOVED:
                entry["current_leader"] = current_leader(tp, ctx.listener_name, rm, meta, node_endpoints)
            c = cached.get(tp)
            if c is not None:
                changed = (res.records is not None or res.error_code != 0 or c.high_watermark != res.high_watermark
                           or c.log_start_offset != res.log_start_offset
                           or c.last_stable_offset != res.last_stable_offset)
                c.high_watermark = res.high_watermark
                c.log_start_offset = res.log_start_offset
                c.last_stable_offset = res.last_stable_offset
                if incremental and not changed:
                    continue
        by_topic.setdefault(tp[0], []).append(entry)
    responses = [{"topic": name, "topic_id": id_of.get(name) or meta.topic_id(name) or ZERO_UUID,
                  "partitions": parts} for name, parts in by_topic.items()]
    for key, part, e in unknown:
        responses.append({"topic": "", "topic_id": key, "partitions": [_partition_entry(part, e)]})
    out = {"throttle_time_ms": 0, "error_code": 0, "session_id": session.session_id if session else 0,
           "responses": responses}
    if node_endpoints:
        out["node_endpoints"] = list(node_endpoints.values())
    return out
