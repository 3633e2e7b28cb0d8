"""The classic group protocol as a pure state machine: one instance per ``__consumer_offsets`` partition.

No asyncio, sockets or files: every call takes ``now`` (milliseconds) and returns an
:class:`Outcome` naming the records to append to the partition, the timers to (re)arm, the
immediate reply (``None`` while the request is parked) and replies for requests parked earlier
(by the opaque token the caller passed). Behaviour follows Kafka 3.9's classic GroupCoordinator.

Two write paths, as Kafka's runtime has for classic groups (``CoordinatorResult.replayRecords``):

- offset commits (plain and transactional), OffsetDelete, DeleteGroups and offset expiry (with the removal of a
  group it leaves Empty without offsets) go through replay only: the operation answers with the records and the
  reply to give once they are durable (``replay=True``); the runtime appends them and then applies the same
  records through :meth:`GroupCoordinatorState.replay_written`, which is :meth:`replay` at their offsets, as a load
  applies them (a group its tombstones leave with nothing in the log is removed there). A failed append applies
  nothing; ``on_write_failed`` only settles the in-memory marks of the write in flight (``pending_commits``, a
  group's ``deleting``) and maps the error.
- a classic group's metadata (join, sync, leave) lives in memory between records (members,
  waiters, timers, the generation being formed), so those operations change the state themselves and the
  record only persists it (``replay=False``, as Kafka's ``replayRecords = false`` for classic groups); where
  the reply waits for the write (sync from the leader, a static member's re-join) ``on_written`` /
  ``on_write_failed`` complete it. ``replay(key, value)`` rebuilds the same state from those records on load.

Transactional offset commits (TxnOffsetCommit) are written as a transactional batch of the
producer and stay *pending* per producer id until the transaction's marker reaches the partition:
``complete_txn`` applies them on COMMIT (unless a later plain commit overtook them in the log) and
drops them on ABORT. Loading sees the same records and markers through ``replay_txn_record`` and
``replay_txn_marker``, so a transaction still open when the partition moves stays pending.

Timers are keys: ``("heartbeat", group, member)``, ``("join", group)``, ``("sync", group)``; a
timer firing early or for something that no longer exists is ignored, so a stale one is harmless.

Two clocks, as in Kafka: ``now`` times the deadlines (session, join, sync: Kafka's DelayedHeartbeat,
DelayedJoin and DelayedSync run on its monotonic timer), so the coordinator passes a monotonic clock and
a wall-clock jump neither expires a member early nor keeps it late. What is stored or compared with
stored timestamps is wall-clock (Kafka's ``time.milliseconds()``): a group's ``current_state_timestamp``
comes from the ``wall_clock`` given to the state, and :meth:`GroupCoordinatorState.expire_offsets` takes
wall-clock ``now``, compared with commit timestamps. Without a ``wall_clock`` (tests driving one manual
clock) ``now`` serves for both.
"""
from __future__ import annotations

import logging
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Final, Iterable, List, Optional, Sequence, Set, Tuple

from broker.coordinator.group import records as rec
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.protocol.records.batch_info import Record as StoredRecord

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]
Record = Tuple[bytes, Optional[bytes]]
TimerKey = Tuple[str, ...]

EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = (
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER_PROTOCOL_TYPE = "consumer"
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
#: distinct keys noted while loading before they are applied (bounds the memory of a load; see begin_loading)
LOAD_BUFFER_KEYS = 100_000


@dataclass
class GroupConfig:
    """The broker settings the coordinator obeys (group.*, offsets.*)."""
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    #: the least a new group's first rebalance waits (ms), even with group.initial.rebalance.delay.ms=0: Kafka's
    #: InitialDelayedJoin of 0 ms completes through its purgatory's timer wheel and executor thread, 3-5 ms after
    #: the join that armed it, so consumers started together (their JoinGroups 2-5 ms apart) reach it before its
    #: first member is Stable; completing at once let the first member(s) reach Stable alone and the others
    #: waited for its next heartbeat (issue 19: 3 consumers 1.0 s against Kafka's 0.1 s). Members arriving meanwhile extend it as
    #: the configured delay does (up to the rebalance timeout). The service sets it; 0 here (the bare rule).
    initial_join_min_ms: int = 0
    max_size: int = 2147483647
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


@dataclass(slots=True)
class OffsetAndMetadata:
    """An offset as a commit request (or a pending transactional commit) carries it."""
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: Optional[int] = None


#: A committed offset as a group keeps it: an exact tuple of atomic values, which CPython's cyclic GC stops
#: tracking after one pass, so a coordinator holding a million offsets adds nothing to every collection:
#: (offset, leader_epoch, metadata, commit_timestamp, expire_timestamp or None, record_offset or None).
#: record_offset is Kafka's CommitRecordMetadataAndOffset.appendedBatchOffset: where in the partition the commit
#: was written (None while not known), which tells a transactional commit from an older plain one.
CommittedOffset = Tuple[int, int, str, int, Optional[int], Optional[int]]
# the fields of a CommittedOffset (Final literals, so a type checker knows each field's type)
C_OFFSET: Final = 0
C_LEADER_EPOCH: Final = 1
C_METADATA: Final = 2
C_COMMIT_TIMESTAMP: Final = 3
C_EXPIRE_TIMESTAMP: Final = 4
C_RECORD_OFFSET: Final = 5


def committed_offset(om: OffsetAndMetadata, record_offset: Optional[int]) -> CommittedOffset:
    return (om.offset, om.leader_epoch, om.metadata or "", om.commit_timestamp, om.expire_timestamp, record_offset)


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: List[Tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: Any = None
    sync_waiter: Any = None
    is_new: bool = False
    heartbeat_deadline: int = 0

    def metadata(self, protocol: Optional[str]) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: List[Tuple[str, bytes]]) -> bool:
        return [(n, bytes(d)) for n, d in protocols] == [(n, bytes(d)) for n, d in self.protocols]

    def vote(self, candidates: Set[str]) -> str:
        return next(n for n, _ in self.protocols if n in candidates)


@dataclass(eq=False)
class Group:
    group_id: str
    state: str = EMPTY
    generation_id: int = 0
    protocol_type: Optional[str] = None
    protocol_name: Optional[str] = None
    leader_id: Optional[str] = None
    members: Dict[str, Member] = field(default_factory=dict)
    static_members: Dict[str, str] = field(default_factory=dict)
    pending_members: Dict[str, int] = field(default_factory=dict)   # member id -> session deadline
    pending_sync: Set[str] = field(default_factory=set)
    offsets: Dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    pending_commits: Dict[TopicPartition, int] = field(default_factory=dict)
    #: producer id -> {tp: (offset of its batch, None while the append is in flight; the offset)}
    pending_txn_commits: Dict[int, Dict[TopicPartition, Tuple[Optional[int], OffsetAndMetadata]]] = field(
        default_factory=dict)
    current_state_timestamp: Optional[int] = None
    new_member_added: bool = False
    join_deadline: Optional[int] = None
    initial_delay_remaining_ms: Optional[int] = None   # set while an initial delayed join runs
    sync_deadline: Optional[int] = None
    subscribed_topics: Optional[Set[str]] = None
    #: the group's removal (DeleteGroups, expiry) is being written: Dead to every operation that would change it
    #: (Kafka's Dead group between its removal and its tombstones), while readers (OffsetFetch, DescribeGroups)
    #: still see what the log holds until the tombstones are written and replayed; cleared if the write fails
    deleting: bool = False

    # --- queries -----------------------------------------------------------------------
    @property
    def dead(self) -> bool:
        """Dead, or its removal is being written (see ``deleting``)."""
        return self.state == DEAD or self.deleting

    def has_pending_commit(self, tp: TopicPartition) -> bool:
        """A plain or transactional commit of ``tp`` is not settled yet (OffsetFetch require_stable)."""
        return tp in self.pending_commits or any(tp in p for p in self.pending_txn_commits.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.join_waiter is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def can_rebalance(self) -> bool:
        return self.state in (STABLE, COMPLETING_REBALANCE, EMPTY)

    def validate_current_member(self, member_id: str, instance_id: Optional[str]) -> int:
        """Kafka's validateCurrentMember: a given instance id must map to ``member_id``; the member must exist."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return 0 if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = list(names)
        if self.state == EMPTY and not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        counts = self._protocol_counts()
        return any(counts.get(n, 0) == len(self.members) for n in names)

    def _protocol_counts(self) -> Dict[str, int]:
        counts: Dict[str, int] = {}
        for m in self.members.values():
            for n, _ in m.protocols:
                counts[n] = counts.get(n, 0) + 1
        return counts

    def select_protocol(self) -> str:
        counts = self._protocol_counts()
        candidates = {n for n, c in counts.items() if c == len(self.members)}
        votes: Dict[str, int] = {}
        for m in self.members.values():
            v = m.vote(candidates)
            votes[v] = votes.get(v, 0) + 1
        return max(votes, key=lambda n: votes[n])  # first most-voted in member order

    def member_metadata(self) -> List[dict]:
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]

    # --- updates -----------------------------------------------------------------------
    def transition(self, state: str, now: int) -> None:
        self.state = state
        self.current_state_timestamp = now

    def add(self, member: Member, waiter: Any) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)
        member.join_waiter = waiter

    def remove(self, member_id: str) -> None:
        m = self.members.pop(member_id, None)
        if m is not None and m.group_instance_id is not None \
                and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            joined = [mid for mid, x in self.members.items() if x.join_waiter is not None]
            self.leader_id = joined[0] if joined else next(iter(self.members), None)

    def update_subscribed_topics(self) -> None:
        """Topics the consumer-protocol members subscribe to (None: not a consumer group or unparsable)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            self.subscribed_topics = None
            return
        topics: Set[str] = set()
        for m in self.members.values():
            parsed = rec.parse_subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                self.subscribed_topics = None
                return
            topics.update(parsed)
        self.subscribed_topics = topics


@dataclass(slots=True)
class Outcome:
    """What one call produced; see the module docstring."""
    response: Any = None
    completions: List[Tuple[Any, Any]] = field(default_factory=list)
    records: List[Record] = field(default_factory=list)
    timers: List[Tuple[TimerKey, int]] = field(default_factory=list)
    on_written: Optional[Callable[[int, int], "Outcome"]] = None   # (now, offset of the appended batch)
    on_write_failed: Optional[Callable[[int, int], "Outcome"]] = None   # (now, error code)
    #: (producer id, producer epoch) when the records are a transactional batch (TxnOffsetCommit)
    producer: Optional[Tuple[int, int]] = None
    #: the KIP-890 verification guard its transactional append presents (set by the service)
    guard: Optional[object] = None
    #: the batch's base sequence: Kafka writes offset commits at 0 (GroupMetadataManager.storeOffsets), the rest at -1
    base_sequence: int = -1
    #: the records are applied through replay once written (offset commits); False: the call changed the state
    replay: bool = False

    def merge(self, other: "Outcome") -> "Outcome":
        self.completions.extend(other.completions)
        self.records.extend(other.records)
        self.timers.extend(other.timers)
        return self


def join_result(member_id: str, error: int, group: Optional[Group] = None, members: Optional[List[dict]] = None,
                leader: Optional[str] = None, skip_assignment: bool = False) -> dict:
    """A JoinGroup answer (newest version's field names)."""
    if group is None or error:
        return {"error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
                "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}
    return {"error_code": 0, "generation_id": group.generation_id, "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name, "leader": leader if leader is not None else (group.leader_id or ""),
            "skip_assignment": skip_assignment, "member_id": member_id, "members": members or []}


def sync_result(error: int, group: Optional[Group] = None, assignment: bytes = b"") -> dict:
    return {"error_code": error, "protocol_type": group.protocol_type if group and not error else None,
            "protocol_name": group.protocol_name if group and not error else None, "assignment": assignment}


def _offset_value(value: bytes, record_offset: Optional[int] = None) -> CommittedOffset:
    return rec.decode_offset_commit_value(value) + (record_offset,)


def _expired_offsets(group: Group, now: int, retention_ms: int) -> List[TopicPartition]:
    """Kafka's GroupMetadata.removeExpiredOffsets: which committed offsets of ``group`` have expired.

    - a group with a protocol type, Empty: retention counts from when it became Empty (the current state
      timestamp; from each commit when the metadata had none, an old schema);
    - a Stable consumer group that knows its members' subscriptions: offsets of topics no member subscribes
      to, retention counting from each commit;
    - a group without a protocol type (offset storage only): retention counts from each commit;
    - any other group keeps its offsets.
    An offset with a commit in flight is kept, and so is one with a transactional commit pending (Kafka's
    replay-based coordinator, OffsetMetadataManager.cleanupExpiredOffsets: its tombstone would drop the pending
    commit, see ``replay``); one committed with an explicit expire timestamp (OffsetCommit v2-v4
    retention_time_ms) expires at that timestamp instead.
    """
    keep: Set[str] = set()
    since: Optional[int] = None
    if group.protocol_type is not None and group.state == EMPTY:
        since = group.current_state_timestamp
    elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None \
            and group.state == STABLE:
        keep = group.subscribed_topics
    elif group.protocol_type is not None:
        return []
    in_flight = group.pending_commits
    pending_txn = group.pending_txn_commits.values()
    expired = []
    for tp, c in group.offsets.items():
        if tp in in_flight or tp[0] in keep or any(tp in p for p in pending_txn):
            continue
        expire_at = c[C_EXPIRE_TIMESTAMP]
        if expire_at is not None:
            if now >= expire_at:
                expired.append(tp)
        elif now - (c[C_COMMIT_TIMESTAMP] if since is None else since) >= retention_ms:
            expired.append(tp)
    return expired


def write_error_for_group(code: int) -> int:
    """Kafka's mapping of a failed group-metadata append to the error the members see."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.UNKNOWN_SERVER_ERROR


def write_error_for_delete_groups(code: int) -> int:
    """Kafka 3.9's mapping of a failed DeleteGroups write (GroupCoordinatorService.handleOperationException, the
    coordinator that writes through its runtime), answered for every group of the failed write's partition."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if code == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return code


def write_error_for_commit(code: int) -> int:
    """Kafka's mapping of a failed offset-commit append to the per-partition error."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code


class GroupCoordinatorState:
    """Groups and committed offsets of one ``__consumer_offsets`` partition."""

    def __init__(self, config: GroupConfig, new_member_id: Optional[Callable[[str], str]] = None,
                 wall_clock: Optional[Callable[[], int]] = None) -> None:
        """``wall_clock``: wall-clock ms for the timestamps written to the log (None: use the ``now`` passed)."""
        self.config = config
        self._wall_clock = wall_clock
        self.groups: Dict[str, Group] = {}
        #: while loading: the latest (record offset, value) of each plain record's key, not applied yet
        self._load_buffer: Optional[Dict[bytes, Tuple[int, Optional[bytes]]]] = None
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")

    def _wall(self, now: int) -> int:
        """The wall-clock ms to store (current_state_timestamp) at deadline-clock ``now``."""
        return now if self._wall_clock is None else self._wall_clock()

    # ================================================================== JoinGroup
    def join_group(self, now: int, token: Any, group_id: str, member_id: str, group_instance_id: Optional[str],
                   client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                   protocol_type: str, protocols: List[Tuple[str, bytes]], require_known_member_id: bool,
                   support_skip_assignment: bool = False) -> Outcome:
        """Outcome.response is the answer, or None when parked until the rebalance completes."""
        out = Outcome()
        protocols = [(n, bytes(d)) for n, d in protocols]
        if not group_id:
            out.response = join_result(member_id, ErrorCode.INVALID_GROUP_ID)
            return out
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            out.response = join_result(member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
            return out
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                out.response = join_result(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
                return out
            group = self.groups[group_id] = Group(group_id, current_state_timestamp=self._wall(now))
        if not self._accept_joining_member(group, member_id):
            out.response = join_result("", ErrorCode.GROUP_MAX_SIZE_REACHED)
            return out
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        args = (now, out, token, group, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols)
        if unknown:
            self._new_member_join(*args, require_known_member_id, support_skip_assignment)
        else:
            self._current_member_join(*args, member_id)
        if group.state == PREPARING_REBALANCE:
            self._try_complete_join(now, group, out)
        self._maybe_drop(group)
        return out

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.state == PREPARING_REBALANCE:
            m = group.members.get(member_id)
            return (m is not None and m.join_waiter is not None) or group.awaiting_join_count() < max_size
        return member_id in group.members or len(group.members) < max_size

    def _new_member_join(self, now: int, out: Outcome, token: Any, group: Group, instance_id: Optional[str],
                         client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: List[Tuple[str, bytes]], require_known: bool,
                         support_skip: bool) -> None:
        if group.dead:
            out.response = join_result("", ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            out.response = join_result("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            return
        new_id = self._new_member_id(instance_id if instance_id is not None else client_id)
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is None:
                self._add_member_and_rebalance(now, out, token, group, new_id, instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
            else:
                self._static_member_rejoin(now, out, token, group, old_id, new_id, rebalance_timeout_ms,
                                           session_timeout_ms, protocols, support_skip)
        elif require_known:
            deadline = now + session_timeout_ms
            group.pending_members[new_id] = deadline
            out.timers.append((("heartbeat", group.group_id, new_id), deadline))
            log.info("[GroupCoordinator] Dynamic member with unknown member id joins group %s in %s state. Created a "
                     "new member id %s and request the member to rejoin with this id.", group.group_id, group.state,
                     new_id)
            out.response = join_result(new_id, ErrorCode.MEMBER_ID_REQUIRED)
        else:
            self._add_member_and_rebalance(now, out, token, group, new_id, None, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)

    def _static_member_rejoin(self, now: int, out: Outcome, token: Any, group: Group, old_id: str, new_id: str,
                              rebalance_timeout_ms: int, session_timeout_ms: int,
                              protocols: List[Tuple[str, bytes]], support_skip: bool) -> None:
        old_leader = group.leader_id
        member = self._replace_static_member(group, old_id, new_id, out)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = (
            protocols, rebalance_timeout_ms, session_timeout_ms)
        self._schedule_heartbeat(now, group, member, out)
        if group.state != STABLE:
            # PreparingRebalance / CompletingRebalance: treated as a rejoin that (re)starts a rebalance.
            self._update_member_and_rebalance(now, out, token, group, member, protocols)
            return
        if group.select_protocol() != group.protocol_name:
            self._update_member_and_rebalance(now, out, token, group, member, protocols)
            return
        gen = group.generation_id
        out.records.append(self._group_record(group, {m.member_id: m.assignment for m in group.members.values()}))

        def written(t: int, _batch_offset: int) -> Outcome:
            if support_skip and old_leader == old_id:
                res = join_result(new_id, 0, group, group.member_metadata(), leader=new_id, skip_assignment=True)
            else:
                res = join_result(new_id, 0, group, [], leader=old_leader or "")
            return Outcome(completions=[(token, res)])

        def failed(t: int, code: int) -> Outcome:
            o = Outcome()
            if group.generation_id == gen and new_id in group.members:
                self._replace_static_member(group, new_id, old_id, o)
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
            o.completions.append((token, join_result("", write_error_for_group(code))))
            return o

        out.on_written, out.on_write_failed = written, failed

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, out: Outcome) -> Member:
        member = group.members.pop(old_id)
        if member.join_waiter is not None:
            out.completions.append((member.join_waiter, join_result(old_id, ErrorCode.FENCED_INSTANCE_ID)))
            member.join_waiter = None
        if member.sync_waiter is not None:
            out.completions.append((member.sync_waiter, sync_result(ErrorCode.FENCED_INSTANCE_ID)))
            member.sync_waiter = None
        member.member_id = new_id
        group.members[new_id] = member
        if group.leader_id == old_id:
            group.leader_id = new_id
        assert member.group_instance_id is not None
        group.static_members[member.group_instance_id] = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        return member

    def _current_member_join(self, now: int, out: Outcome, token: Any, group: Group, instance_id: Optional[str],
                             client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                             protocol_type: str, protocols: List[Tuple[str, bytes]], member_id: str) -> None:
        if group.dead:
            out.response = join_result(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            out.response = join_result(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(now, out, token, group, member_id, instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
            return
        error = group.validate_current_member(member_id, instance_id)
        if error:
            out.response = join_result(member_id, error)
            return
        member = group.members[member_id]
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        if group.state == PREPARING_REBALANCE:
            self._update_member_and_rebalance(now, out, token, group, member, protocols)
        elif group.state == COMPLETING_REBALANCE:
            if member.matches(protocols):
                members = group.member_metadata() if group.leader_id == member_id else []
                out.response = join_result(member_id, 0, group, members)
            else:
                self._update_member_and_rebalance(now, out, token, group, member, protocols)
        elif group.state == STABLE:
            if group.leader_id == member_id or not member.matches(protocols):
                self._update_member_and_rebalance(now, out, token, group, member, protocols)
            else:
                out.response = join_result(member_id, 0, group, [])
        else:
            out.response = join_result(member_id, ErrorCode.UNKNOWN_MEMBER_ID)

    def _add_member_and_rebalance(self, now: int, out: Outcome, token: Any, group: Group, member_id: str,
                                  instance_id: Optional[str], client_id: str, client_host: str,
                                  rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                                  protocols: List[Tuple[str, bytes]]) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                        protocol_type, protocols, is_new=True)
        if group.state == PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, token)
        self._schedule_heartbeat(now, group, member, out, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(now, group, out)

    def _update_member_and_rebalance(self, now: int, out: Outcome, token: Any, group: Group, member: Member,
                                     protocols: List[Tuple[str, bytes]]) -> None:
        member.protocols = protocols
        if member.join_waiter is not None and member.join_waiter is not token:
            # A second JoinGroup from the same member replaces the parked one, as in Kafka.
            out.completions.append((member.join_waiter, join_result(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID)))
        member.join_waiter = token
        self._maybe_prepare_rebalance(now, group, out)

    # ================================================================== rebalance machinery
    def _maybe_prepare_rebalance(self, now: int, group: Group, out: Outcome) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(now, group, out)

    def _prepare_rebalance(self, now: int, group: Group, out: Outcome) -> None:
        if group.state == COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS, out)
        group.pending_sync.clear()
        group.sync_deadline = None
        if group.state == EMPTY:
            delay = self._initial_delay_ms()
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = now + delay
        else:
            group.initial_delay_remaining_ms = None
            group.join_deadline = now + group.rebalance_timeout_ms()
        log.info("[GroupCoordinator] Preparing to rebalance group %s in state %s with old generation %d",
                 group.group_id, group.state, group.generation_id)
        group.transition(PREPARING_REBALANCE, self._wall(now))
        out.timers.append((("join", group.group_id), group.join_deadline))

    def _initial_delay_ms(self) -> int:
        return max(self.config.initial_rebalance_delay_ms, self.config.initial_join_min_ms)

    def _reset_and_propagate_assignment_error(self, group: Group, error: int, out: Outcome) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_waiter is not None:
                out.completions.append((m.sync_waiter, sync_result(error)))
                m.sync_waiter = None

    def _try_complete_join(self, now: int, group: Group, out: Outcome) -> None:
        if group.state == PREPARING_REBALANCE and group.initial_delay_remaining_ms is None \
                and group.has_all_members_joined():
            self._complete_join(now, group, out)

    def _complete_join(self, now: int, group: Group, out: Outcome) -> None:
        group.join_deadline = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        for mid, m in list(group.members.items()):
            if m.join_waiter is None and m.group_instance_id is None:
                group.remove(mid)
        if group.leader_id is not None and group.members[group.leader_id].join_waiter is None:
            joined = [mid for mid, m in group.members.items() if m.join_waiter is not None]
            if joined:
                group.leader_id = joined[0]
        if group.members and not any(m.join_waiter is not None for m in group.members.values()):
            # Only static members that have not rejoined: wait another rebalance timeout.
            group.join_deadline = now + group.rebalance_timeout_ms()
            out.timers.append((("join", group.group_id), group.join_deadline))
            return
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(EMPTY, self._wall(now))
            group.update_subscribed_topics()
            out.records.append(self._group_record(group, {}))
            return
        group.protocol_name = group.select_protocol()
        group.update_subscribed_topics()
        group.transition(COMPLETING_REBALANCE, self._wall(now))
        log.info("[GroupCoordinator] Stabilized group %s generation %d (protocol %s) with %d members",
                 group.group_id, group.generation_id, group.protocol_name, len(group.members))
        for m in group.members.values():
            if m.join_waiter is not None:
                members = group.member_metadata() if group.leader_id == m.member_id else []
                out.completions.append((m.join_waiter, join_result(m.member_id, 0, group, members)))
                m.join_waiter = None
            m.is_new = False
            self._schedule_heartbeat(now, group, m, out)
        group.pending_sync = set(group.members)
        group.sync_deadline = now + group.rebalance_timeout_ms()
        out.timers.append((("sync", group.group_id), group.sync_deadline))

    def _schedule_heartbeat(self, now: int, group: Group, member: Member, out: Outcome,
                            timeout_ms: Optional[int] = None) -> None:
        member.heartbeat_deadline = now + (timeout_ms if timeout_ms is not None else member.session_timeout_ms)
        out.timers.append((("heartbeat", group.group_id, member.member_id), member.heartbeat_deadline))

    def _remove_member_and_update_group(self, now: int, group: Group, member: Member, out: Outcome) -> None:
        log.info("[GroupCoordinator] Removing member %s from group %s", member.member_id, group.group_id)
        if member.join_waiter is not None:
            out.completions.append((member.join_waiter, join_result(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID)))
            member.join_waiter = None
        if member.sync_waiter is not None:
            out.completions.append((member.sync_waiter, sync_result(ErrorCode.UNKNOWN_MEMBER_ID)))
            member.sync_waiter = None
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(now, group, out)
        # Kafka's prepareRebalance tries to complete the join at once (tryCompleteElseWatch): the last member leaving
        # leaves the group Empty, next generation, before the LeaveGroup is answered, not a loop turn later.
        if group.state == PREPARING_REBALANCE:
            self._try_complete_join(now, group, out)

    def _group_record(self, group: Group, assignment: Dict[str, bytes]) -> Record:
        value = {
            "protocol_type": group.protocol_type or "", "generation": group.generation_id,
            "protocol": group.protocol_name, "leader": group.leader_id,
            "current_state_timestamp": group.current_state_timestamp if group.current_state_timestamp is not None
            else -1,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                         "subscription": m.metadata(group.protocol_name),
                         "assignment": assignment.get(m.member_id, b"")} for m in group.members.values()],
        }
        return rec.group_metadata_key(group.group_id), rec.group_metadata_value(value)

    # ================================================================== timers
    def on_timer(self, now: int, key: TimerKey) -> Outcome:
        """A timer armed by an earlier outcome fired."""
        out = Outcome()
        group = self.groups.get(key[1])
        if group is None:
            return out
        kind = key[0]
        if kind == "heartbeat":
            mid = key[2]
            if mid in group.pending_members:
                if now >= group.pending_members[mid]:
                    del group.pending_members[mid]
                    if group.state == PREPARING_REBALANCE:
                        self._try_complete_join(now, group, out)
                return out
            m = group.members.get(mid)
            if m is None or now < m.heartbeat_deadline:
                return out
            if not m.is_new and (m.join_waiter is not None or m.sync_waiter is not None):
                return out  # awaiting join/sync: the rebalance timeout governs it
            self._remove_member_and_update_group(now, group, m, out)
        elif kind == "join":
            if group.state != PREPARING_REBALANCE or group.join_deadline is None or now < group.join_deadline:
                return out
            remaining = group.initial_delay_remaining_ms
            if remaining is not None and group.new_member_added and remaining != 0:
                group.new_member_added = False
                delay = min(self._initial_delay_ms(), remaining)
                group.initial_delay_remaining_ms = max(remaining - self._initial_delay_ms(), 0)
                group.join_deadline = now + delay
                out.timers.append((("join", group.group_id), group.join_deadline))
                return out
            self._complete_join(now, group, out)
        elif kind == "sync":
            if group.sync_deadline is None or now < group.sync_deadline:
                return out
            group.sync_deadline = None
            if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync:
                for mid in list(group.pending_sync):
                    m = group.members.get(mid)
                    if m is not None:
                        if m.sync_waiter is not None:
                            out.completions.append((m.sync_waiter, sync_result(ErrorCode.UNKNOWN_MEMBER_ID)))
                            m.sync_waiter = None
                        group.remove(mid)
                group.pending_sync.clear()
                self._maybe_prepare_rebalance(now, group, out)
                if group.state == PREPARING_REBALANCE:  # every member gone: Empty now, as Kafka's tryCompleteElseWatch
                    self._try_complete_join(now, group, out)
        self._maybe_drop(group)
        return out

    def _maybe_drop(self, group: Group) -> None:
        if group.state == EMPTY and not group.members and not group.pending_members and not group.offsets \
                and group.generation_id == 0 and not group.pending_commits and not group.pending_txn_commits:
            self.groups.pop(group.group_id, None)

    # ================================================================== SyncGroup
    def sync_group(self, now: int, token: Any, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: Optional[str], protocol_type: Optional[str], protocol_name: Optional[str],
                   assignments: Dict[str, bytes]) -> Outcome:
        out = Outcome()
        group = self.groups.get(group_id)
        if not group_id:
            out.response = sync_result(ErrorCode.INVALID_GROUP_ID)
        elif group is None:
            out.response = sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
        elif group.dead:
            out.response = sync_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif group.validate_current_member(member_id, group_instance_id):
            out.response = sync_result(group.validate_current_member(member_id, group_instance_id))
        elif generation_id != group.generation_id:
            out.response = sync_result(ErrorCode.ILLEGAL_GENERATION)
        elif (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            out.response = sync_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        elif group.state == EMPTY:
            out.response = sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
        elif group.state == PREPARING_REBALANCE:
            out.response = sync_result(ErrorCode.REBALANCE_IN_PROGRESS)
        elif group.state == COMPLETING_REBALANCE:
            member = group.members[member_id]
            member.sync_waiter = token
            self._remove_pending_sync(group, member_id)
            self._schedule_heartbeat(now, group, member, out)
            if group.leader_id == member_id:
                log.info("[GroupCoordinator] Assignment received from leader %s for group %s for generation %d. The "
                         "group has %d members, %d of which are static.", member_id, group_id, group.generation_id,
                         len(group.members), len(group.static_members))
                assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
                gen = group.generation_id
                out.records.append(self._group_record(group, assignment))

                def written(t: int, _batch_offset: int) -> Outcome:
                    o = Outcome()
                    if group.state == COMPLETING_REBALANCE and group.generation_id == gen:
                        for m in group.members.values():
                            m.assignment = assignment.get(m.member_id, b"")
                            if m.sync_waiter is not None:
                                o.completions.append((m.sync_waiter, sync_result(0, group, m.assignment)))
                                m.sync_waiter = None
                                self._schedule_heartbeat(t, group, m, o)
                        group.transition(STABLE, self._wall(t))
                    return o

                def failed(t: int, code: int) -> Outcome:
                    o = Outcome()
                    if group.state == COMPLETING_REBALANCE and group.generation_id == gen:
                        self._reset_and_propagate_assignment_error(group, write_error_for_group(code), o)
                        self._maybe_prepare_rebalance(t, group, o)
                    return o

                out.on_written, out.on_write_failed = written, failed
        else:  # Stable
            member = group.members[member_id]
            self._remove_pending_sync(group, member_id)
            out.response = sync_result(0, group, member.assignment)
            self._schedule_heartbeat(now, group, member, out)
        return out

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None

    # ================================================================== Heartbeat
    def heartbeat(self, now: int, group_id: str, member_id: str, group_instance_id: Optional[str],
                  generation_id: int) -> Outcome:
        """Outcome.response is the error code."""
        out = Outcome()
        group = self.groups.get(group_id)
        if not group_id:
            out.response = ErrorCode.INVALID_GROUP_ID
        elif group is None:
            out.response = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.dead:
            out.response = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif group.validate_current_member(member_id, group_instance_id):
            out.response = group.validate_current_member(member_id, group_instance_id)
        elif generation_id != group.generation_id:
            out.response = ErrorCode.ILLEGAL_GENERATION
        elif group.state == EMPTY:
            out.response = ErrorCode.UNKNOWN_MEMBER_ID
        else:
            self._schedule_heartbeat(now, group, group.members[member_id], out)
            out.response = ErrorCode.REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else 0
        return out

    # ================================================================== LeaveGroup
    def leave_group(self, now: int, group_id: str, members: List[Tuple[str, Optional[str]]]) -> Outcome:
        """Outcome.response is (top-level error, [(member_id, group_instance_id, error)])."""
        out = Outcome()
        group = self.groups.get(group_id)
        if not group_id:
            out.response = (ErrorCode.INVALID_GROUP_ID, [])
            return out
        if group is None:
            out.response = (0, [(mid, iid, ErrorCode.UNKNOWN_MEMBER_ID) for mid, iid in members])
            return out
        if group.dead:
            out.response = (ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
            return out
        results: List[Tuple[str, Optional[str], int]] = []
        for mid, iid in members:
            if mid == "":
                # Administrative removal by group.instance.id.
                target = group.static_members.get(iid) if iid is not None else None
                if target is None:
                    results.append((mid, iid, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
            elif mid in group.pending_members:
                del group.pending_members[mid]
                if group.state == PREPARING_REBALANCE:
                    self._try_complete_join(now, group, out)
                results.append((mid, iid, 0))
                continue
            else:
                error = group.validate_current_member(mid, iid)
                if error:
                    results.append((mid, iid, error))
                    continue
                target = mid
            log.info("[GroupCoordinator] Member %s has left group %s through LeaveGroup", target, group_id)
            self._remove_member_and_update_group(now, group, group.members[target], out)
            results.append((mid, iid, 0))
        out.response = (0, results)
        self._maybe_drop(group)
        return out

    # ================================================================== OffsetCommit
    def commit_offsets(self, now: int, group_id: str, member_id: str, group_instance_id: Optional[str],
                       generation_id: int, offsets: Dict[TopicPartition, OffsetAndMetadata]) -> Outcome:
        """Outcome.response (or the on_written/on_write_failed outcome's response) maps tp -> error."""
        out = Outcome()
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                out.response = {tp: ErrorCode.ILLEGAL_GENERATION for tp in offsets}
                return out
            group = self.groups[group_id] = Group(group_id, current_state_timestamp=self._wall(now))
        error = self._validate_commit(group, member_id, group_instance_id, generation_id)
        if error:
            out.response = {tp: error for tp in offsets}
            self._maybe_drop(group)
            return out
        if member_id in group.members and group.state in (STABLE, PREPARING_REBALANCE):
            self._schedule_heartbeat(now, group, group.members[member_id], out)
        result, accepted = self._offset_records(group, offsets, out)
        if not accepted:
            return out
        for tp in accepted:
            group.pending_commits[tp] = group.pending_commits.get(tp, 0) + 1
        # written: replay_written applies the records and settles pending_commits; the reply is ``result``
        out.response, out.replay = result, True

        def failed(t: int, code: int) -> Outcome:
            for tp in accepted:
                self._settle_pending_commit(group, tp)
            err = write_error_for_commit(code)
            self._maybe_drop(group)
            return Outcome(response={tp: (err if tp in accepted else e) for tp, e in result.items()})

        out.on_write_failed = failed
        return out

    @staticmethod
    def _settle_pending_commit(group: Group, tp: TopicPartition) -> None:
        """One commit of ``tp`` in flight ended (written or not)."""
        n = group.pending_commits.get(tp, 0) - 1
        if n > 0:
            group.pending_commits[tp] = n
        else:
            group.pending_commits.pop(tp, None)

    def _offset_records(self, group: Group, offsets: Dict[TopicPartition, OffsetAndMetadata], out: Outcome
                        ) -> Tuple[Dict[TopicPartition, int], Dict[TopicPartition, OffsetAndMetadata]]:
        """(result per partition, the accepted offsets), their records added to ``out``; metadata over
        offset.metadata.max.bytes is refused per partition. Nothing accepted: ``out.response`` is the result."""
        result: Dict[TopicPartition, int] = {}
        accepted: Dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if om.metadata is not None and len(om.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = om
                result[tp] = 0
        if not accepted:
            out.response = result
            self._maybe_drop(group)
        if accepted:
            out.base_sequence = 0
        for tp, om in accepted.items():
            out.records.append((rec.offset_commit_key(group.group_id, tp[0], tp[1]),
                                rec.offset_commit_value(om.offset, om.leader_epoch, om.metadata or "",
                                                        om.commit_timestamp, om.expire_timestamp)))
        return result, accepted

    def _validate_commit(self, group: Group, member_id: str, instance_id: Optional[str], generation_id: int) -> int:
        if group.dead:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state == EMPTY:
            return 0  # admin client or a consumer without group management
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = group.validate_current_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            if group.state == COMPLETING_REBALANCE:
                return ErrorCode.REBALANCE_IN_PROGRESS
            return 0
        if group.state != EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return 0

    # ================================================================== TxnOffsetCommit
    def txn_commit_offsets(self, now: int, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           group_instance_id: Optional[str], generation_id: int,
                           offsets: Dict[TopicPartition, OffsetAndMetadata]) -> Outcome:
        """Write ``offsets`` as part of the producer's transaction; they apply when its COMMIT marker lands.

        Kafka's doTxnCommitOffsets: the group is created if unknown (older clients send no member or
        generation); a request naming a member or generation (v3+, KIP-447) is checked against the group
        so a zombie of an older generation is fenced. Outcome.response maps tp -> error.
        """
        out = Outcome(producer=(producer_id, producer_epoch))
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, current_state_timestamp=self._wall(now))
        error = 0
        if group.dead:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif generation_id < 0 and group.state == EMPTY:
            pass  # as Kafka's validateOffsetCommit: no generation to an empty group commits whatever the member id
        elif generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = group.validate_current_member(member_id, group_instance_id)
            if not error and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
        if error:
            out.response = {tp: error for tp in offsets}
            self._maybe_drop(group)
            return out
        result, accepted = self._offset_records(group, offsets, out)
        if not accepted:
            return out
        pending = group.pending_txn_commits.setdefault(producer_id, {})
        for tp, om in accepted.items():
            pending[tp] = (None, om)
        # written: replay_written records the batch's offset in the pending commits; the reply is ``result``
        out.response, out.replay = result, True

        def failed(t: int, code: int) -> Outcome:
            mine = group.pending_txn_commits.get(producer_id)
            if mine is not None:
                for tp in accepted:
                    entry = mine.get(tp)
                    if entry is not None and entry[0] is None:
                        del mine[tp]
                if not mine:
                    del group.pending_txn_commits[producer_id]
            err = write_error_for_commit(code)
            self._maybe_drop(group)
            return Outcome(response={tp: (err if tp in accepted else e) for tp, e in result.items()})

        out.on_write_failed = failed
        return out

    def complete_txn(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction marker reached this partition: apply (COMMIT) or drop (ABORT)."""
        if self._load_buffer:
            self._flush_loaded()
        for group in list(self.groups.values()):
            pending = group.pending_txn_commits.pop(producer_id, None)
            if pending is None:
                continue
            if committed:
                for tp, (batch_offset, om) in pending.items():
                    self._apply_txn_offset(group, tp, batch_offset, om)
            self._maybe_drop(group)

    @staticmethod
    def _apply_txn_offset(group: Group, tp: TopicPartition, batch_offset: Optional[int],
                          om: OffsetAndMetadata) -> None:
        """Kafka's completePendingTxnOffsetCommit: a plain commit written after the transactional one wins."""
        current = group.offsets.get(tp)
        if current is not None and current[C_RECORD_OFFSET] is not None and batch_offset is not None \
                and current[C_RECORD_OFFSET] > batch_offset:
            return
        group.offsets[tp] = committed_offset(om, batch_offset)

    # ================================================================== OffsetFetch
    def fetch_offsets(self, group_id: str, partitions: Optional[List[TopicPartition]],
                      require_stable: bool) -> List[Tuple[TopicPartition, int, int, str, int]]:
        """[(tp, offset, leader_epoch, metadata, error)]; ``partitions`` None = every committed one."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and group.state != DEAD else {}
        if partitions is None:
            partitions = sorted(offsets)
        out: List[Tuple[TopicPartition, int, int, str, int]] = []
        for tp in partitions:
            if require_stable and group is not None and group.has_pending_commit(tp):
                out.append((tp, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            c = offsets.get(tp)
            if c is None:
                out.append((tp, -1, -1, "", 0))
            else:
                out.append((tp, c[C_OFFSET], c[C_LEADER_EPOCH], c[C_METADATA], 0))
        return out

    # ================================================================== Describe / List
    def describe_group(self, group_id: str) -> dict:
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": 0, "group_id": group_id, "group_state": DEAD, "protocol_type": "",
                    "protocol_data": "", "members": []}
        stable = group.state == STABLE
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b""} for m in group.members.values()]
        return {"error_code": 0, "group_id": group_id, "group_state": group.state,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "", "members": members}

    def list_groups(self, states: Optional[Set[str]] = None) -> List[dict]:
        """Groups, optionally only those whose state (lower-cased) is in ``states``."""
        out = []
        for g in self.groups.values():
            if g.state == DEAD:
                continue
            if states and g.state.lower() not in states:
                continue
            out.append({"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state,
                        "group_type": "classic"})
        return out

    # ================================================================== DeleteGroups / OffsetDelete
    def delete_groups(self, group_ids: List[str]) -> Outcome:
        """Outcome.response maps group id -> error; tombstones for the deleted groups' offsets and metadata.

        As Kafka's coordinator that writes through its runtime (GroupCoordinatorShard.deleteGroups): an Empty group
        is deleted (a group with members: NON_EMPTY_GROUP; unknown, Dead or already being removed:
        GROUP_ID_NOT_FOUND) by a tombstone of each of its offsets (committed, in flight or pending in a transaction,
        OffsetMetadataManager.deleteAllOffsets), then of its metadata when it ever had a generation (one used only
        for offsets wrote none). The state changes only when those tombstones are written and replayed
        (:meth:`replay_written`); meanwhile the group is ``deleting``: Dead to joins, commits and deletions
        (COORDINATOR_NOT_AVAILABLE / GROUP_ID_NOT_FOUND, Kafka's answers to a Dead group), as it is to Kafka's
        classic coordinator from the moment the deletion starts. A failed write changes nothing and answers every
        group of the call with the write's error (``write_error_for_delete_groups``), as Kafka's failed write."""
        out = Outcome()
        result: Dict[str, int] = {}
        marked: List[Group] = []
        nothing_written: List[Group] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None or group.dead:
                result[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state != EMPTY:
                result[gid] = ErrorCode.NON_EMPTY_GROUP
            else:
                records = self._offset_tombstones(group)
                if group.generation_id > 0:
                    records.append((rec.group_metadata_key(gid), None))
                group.deleting = True
                (marked if records else nothing_written).append(group)
                out.records.extend(records)
                result[gid] = 0
        out.response = result
        if not out.records:  # nothing of these groups is in the log: nothing to write, they go now
            for group in nothing_written:
                self._remove_group(group)
            return out
        out.replay = True  # the others go when their tombstones are replayed

        def written(t: int, _batch_offset: int) -> Outcome:
            for group in nothing_written:
                self._remove_group(group)
            self._unmark(marked)  # removed by the replay; whatever is left stays (what the log holds)
            return Outcome()

        def failed(t: int, code: int) -> Outcome:
            self._unmark(marked + nothing_written)
            error = write_error_for_delete_groups(code)
            return Outcome(response={gid: error for gid in group_ids})

        out.on_written, out.on_write_failed = written, failed
        return out

    @staticmethod
    def _offset_tombstones(group: Group) -> List[Record]:
        """A tombstone of each offset of ``group``: committed, with a commit in flight, pending in a transaction."""
        tps: Dict[TopicPartition, None] = dict.fromkeys(group.offsets)
        tps.update(dict.fromkeys(group.pending_commits))
        for pending in group.pending_txn_commits.values():
            tps.update(dict.fromkeys(pending))
        return [(rec.offset_commit_key(group.group_id, tp[0], tp[1]), None) for tp in tps]

    def _remove_group(self, group: Group) -> None:
        """Kafka's transition to Dead and removal from the cache."""
        if self.groups.get(group.group_id) is group:
            log.info("[GroupCoordinator] Group %s transitioned to Dead in generation %d", group.group_id,
                     group.generation_id)
            del self.groups[group.group_id]
        group.state = DEAD
        group.deleting = False

    def _unmark(self, groups: Iterable[Group]) -> None:
        for group in groups:
            if self.groups.get(group.group_id) is group:
                group.deleting = False

    def _drop_if_removed(self, group: Group) -> None:
        """After written tombstones were replayed: a group left Empty with nothing in the log (no offsets, none in
        flight or pending, no generation: its metadata tombstone reset it) is Dead and removed, as Kafka's
        cleanupGroupMetadata (``group.is(Empty) && !group.hasOffsets``) and as a load of the same log finds it
        (finish_loading). Members that were asked to rejoin (MEMBER_ID_REQUIRED) go with a group being deleted."""
        if self.groups.get(group.group_id) is not group or group.state != EMPTY or group.members \
                or group.offsets or group.generation_id or group.pending_commits or group.pending_txn_commits \
                or (group.pending_members and not group.deleting):
            return
        self._remove_group(group)

    def delete_offsets(self, group_id: str, partitions: List[TopicPartition]) -> Outcome:
        """Outcome.response is (group error, {tp: error}).

        Tombstones of the named offsets the group holds; an Empty group left without offsets (none in flight or
        pending in a transaction either) goes too, with its own tombstone when it ever had a generation, as Kafka's
        handleDeleteOffsets does through cleanupGroupMetadata (a group of generation 0 goes at the replay of its
        last offset tombstone, :meth:`_drop_if_removed`). Applied through replay; a failed write changes nothing
        and answers the group error Kafka's runtime-based coordinator answers (``write_error_for_delete_groups``:
        its handleOperationException), where Kafka's classic coordinator, having already changed its cache,
        answers success."""
        out = Outcome()
        group = self.groups.get(group_id)
        if group is None or group.dead:
            out.response = (ErrorCode.GROUP_ID_NOT_FOUND, {})
            return out
        if group.state == EMPTY:
            subscribed: Set[str] = set()
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = group.subscribed_topics if group.subscribed_topics is not None else {t for t, _ in partitions}
        else:
            out.response = (ErrorCode.NON_EMPTY_GROUP, {})
            return out
        errors: Dict[TopicPartition, int] = {}
        removed: Set[TopicPartition] = set()
        for tp in partitions:
            if tp[0] in subscribed:
                errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            errors[tp] = 0
            if tp in group.offsets and tp not in removed:
                removed.add(tp)
                out.records.append((rec.offset_commit_key(group_id, tp[0], tp[1]), None))
        # the offsets go when their tombstones are written and replayed
        out.response, out.replay = (0, errors), True
        if not out.records:
            return out
        marked: List[Group] = []
        if group.state == EMPTY and len(removed) == len(group.offsets) and group.generation_id > 0 \
                and not group.pending_commits and not group.pending_txn_commits:
            group.deleting = True
            marked.append(group)
            out.records.append((rec.group_metadata_key(group_id), None))

        def written(t: int, _batch_offset: int) -> Outcome:
            self._unmark(marked)
            return Outcome()

        def failed(t: int, code: int) -> Outcome:
            self._unmark(marked)
            return Outcome(response=(write_error_for_delete_groups(code), {}))

        out.on_written, out.on_write_failed = written, failed
        return out

    def expire_offsets(self, now: int, group_ids: Optional[Iterable[str]] = None) -> Outcome:
        """Kafka's cleanupGroupMetadata over ``group_ids`` (default: every group) at wall-clock ``now`` (compared
        with the commit and state timestamps stored in the log, as Kafka's time.milliseconds()): a tombstone of each
        offset GroupMetadata.removeExpiredOffsets names, then, for a group left Empty without offsets (none in
        flight or pending in a transaction either), the group's own tombstone if it ever had a generation (a group
        used only for offset storage never wrote metadata).

        Applied through replay, as Kafka's runtime-based coordinator (GroupCoordinatorShard.cleanupGroupMetadata):
        the offsets and the group go when the tombstones are written and replayed; a group being removed is
        ``deleting`` meanwhile (see :meth:`delete_groups`). A failed write changes nothing (the next pass tries
        again). Outcome.response is the number of offset tombstones (0 once the write failed)."""
        out = Outcome()
        retention = self.config.offsets_retention_ms
        marked: List[Group] = []
        expired_count = 0
        for gid in list(self.groups) if group_ids is None else list(group_ids):
            group = self.groups.get(gid)
            if group is None or group.dead:
                continue
            expired = _expired_offsets(group, now, retention)
            for tp in expired:
                out.records.append((rec.offset_commit_key(gid, tp[0], tp[1]), None))
            expired_count += len(expired)
            if group.state == EMPTY and len(expired) == len(group.offsets) and not group.pending_commits \
                    and not group.pending_txn_commits:
                if not expired and group.generation_id == 0:
                    self._remove_group(group)  # nothing of it in the log
                    continue
                group.deleting = True
                marked.append(group)
                if group.generation_id > 0:
                    out.records.append((rec.group_metadata_key(gid), None))
        out.response = expired_count
        if not out.records:
            return out
        out.replay = True

        def written(t: int, _batch_offset: int) -> Outcome:
            self._unmark(marked)
            return Outcome()

        def failed(t: int, code: int) -> Outcome:
            self._unmark(marked)
            return Outcome(response=0)

        out.on_written, out.on_write_failed = written, failed
        return out

    # ================================================================== load / unload
    def begin_loading(self) -> None:
        """Replay from here on only notes each key's latest record; they are applied by :meth:`finish_loading`
        (or sooner, see :meth:`_flush_loaded`). The latest record of a key wins and records of different keys
        do not interact (offset commits never read group metadata), so only the last record of each key is ever
        decoded: a log that holds many commits of few partitions loads at the cost of its distinct keys."""
        self._load_buffer = {}

    def _flush_loaded(self) -> None:
        """Apply the noted records (before a transaction marker, which compares record offsets; at the end;
        and whenever LOAD_BUFFER_KEYS keys are waiting, to bound the memory)."""
        buffered, self._load_buffer = self._load_buffer, None
        try:
            for key, (record_offset, value) in (buffered or {}).items():
                try:
                    self.replay(key, value, record_offset)
                except Exception:
                    log.exception("[GroupCoordinator] Skipping unreadable record at offset %d", record_offset)
        finally:
            if buffered is not None:
                self._load_buffer = {}

    def replay_batch(self, records: Sequence[StoredRecord], producer_id: int, marker: Optional[bool]) -> None:
        """Apply one loaded batch (records, or a transaction marker) while loading (on the loader thread)."""
        if marker is not None:
            self.replay_txn_marker(producer_id, marker)
            return
        if producer_id < 0:
            try:
                self.replay_records(records)
                return
            except Exception:  # one unreadable record: go through the batch one record at a time
                pass
        for r in records:
            try:
                if producer_id >= 0:
                    self.replay_txn_record(r.key, r.value, r.offset, producer_id)
                else:
                    self.replay(r.key, r.value, r.offset)
            except Exception:
                log.exception("[GroupCoordinator] Skipping unreadable record at offset %d", r.offset)

    def replay_written(self, records: Sequence[Record], base_offset: int, producer_id: int) -> None:
        """Apply offset commits this broker just wrote at ``base_offset`` (the runtime calls it once they are
        durable): :meth:`replay` / :meth:`replay_txn_record` at their offsets, plus what is not in the records: the
        commit in flight is settled (a plain one), and a transactional one whose transaction already ended (its
        marker was applied before this append's answer) is not made pending again."""
        touched: Dict[str, Group] = {}
        for i, (key, value) in enumerate(records):
            offset = base_offset + i
            ok = rec.decode_offset_key(key)
            if ok is None:
                if value is None:  # a group's tombstone (DeleteGroups, expiry): it resets the group
                    g = self.groups.get(rec.decode_key(key).group)
                    if g is not None:
                        touched[g.group_id] = g
                self.replay(key, value, offset)
                continue
            group = self.groups.get(ok[0])
            tp = (ok[1], ok[2])
            if producer_id < 0:
                self.replay(key, value, offset)
                if group is not None:
                    if value is not None:  # a commit
                        self._settle_pending_commit(group, tp)
                    else:  # a tombstone: OffsetDelete's, DeleteGroups', expiry's
                        touched[ok[0]] = group
                continue
            mine = group.pending_txn_commits.get(producer_id) if group is not None else None
            entry = mine.get(tp) if mine is not None else None
            if entry is not None and entry[0] is None:
                # the batch's offset, as Kafka's appendedBatchOffset (compared with plain commits' offsets)
                self.replay_txn_record(key, value, base_offset, producer_id)
        for g in touched.values():
            self._drop_if_removed(g)

    def replay_records(self, records: Iterable[StoredRecord]) -> None:
        """Replay a plain batch's records (objects with ``offset``, ``key``, ``value``) in order."""
        buffered = self._load_buffer
        if buffered is None:
            for r in records:
                self.replay(r.key, r.value, r.offset)
            return
        for r in records:
            if r.key is not None:
                buffered[r.key] = (r.offset, r.value)
        if len(buffered) >= LOAD_BUFFER_KEYS:
            self._flush_loaded()

    def replay(self, key: Optional[bytes], value: Optional[bytes], record_offset: int = -1) -> None:
        """Apply one ``__consumer_offsets`` record (loading; the latest record for a key wins).

        Offset commits take the short path (a load replays every record, a million of them at scale); topic
        names are interned so the loaded offsets of one topic share one string. Between :meth:`begin_loading`
        and :meth:`finish_loading` records are only noted per key (see there)."""
        if key is None:
            return
        buffered = self._load_buffer
        if buffered is not None:
            buffered[bytes(key)] = (record_offset, value)
            if len(buffered) >= LOAD_BUFFER_KEYS:
                self._flush_loaded()
            return
        ok = rec.decode_offset_key(key)
        if ok is not None:
            group_id, topic, partition = ok
            tp = (sys.intern(topic), partition)
            g = self.groups.get(group_id)
            if value is None:
                if g is not None:
                    self._replay_offset_tombstone(g, tp, record_offset)
                return
            if g is None:
                g = self.groups[group_id] = Group(group_id)
            g.offsets[tp] = _offset_value(value, record_offset if record_offset >= 0 else None)
            return
        k = rec.decode_key(key)
        g = self.groups.get(k.group)
        if value is None:
            if g is not None:
                g.members.clear()
                g.static_members.clear()
                g.pending_members.clear()
                g.protocol_type = g.protocol_name = g.leader_id = None
                g.generation_id = 0
                g.state = EMPTY
                g.current_state_timestamp = None
            return
        v = rec.decode_group_value(value)
        if g is None:
            g = self.groups[k.group] = Group(k.group)
        g.protocol_type = v.protocol_type or None  # Kafka writes "" for a group without a protocol type
        g.generation_id = v.generation
        g.protocol_name = v.protocol
        g.leader_id = v.leader
        ts = getattr(v, "current_state_timestamp", -1)
        g.current_state_timestamp = ts if ts != -1 else None
        g.members = {}
        g.static_members = {}
        for mm in v.members:
            rt = getattr(mm, "rebalance_timeout", -1)
            m = Member(mm.member_id, getattr(mm, "group_instance_id", None), mm.client_id, mm.client_host,
                       rt if rt != -1 else mm.session_timeout, mm.session_timeout, v.protocol_type,
                       [(v.protocol or "", bytes(mm.subscription))], bytes(mm.assignment))
            g.members[m.member_id] = m
            if m.group_instance_id is not None:
                g.static_members[m.group_instance_id] = m.member_id
        g.state = STABLE if g.members else EMPTY
        g.update_subscribed_topics()

    @staticmethod
    def _replay_offset_tombstone(g: Group, tp: TopicPartition, record_offset: int) -> None:
        """A plain offset tombstone at ``record_offset`` (-1: not known) removes what was written before it: the
        committed offset and, as Kafka's replay-based coordinator (OffsetMetadataManager.replay), the
        transactional commits of that partition pending in the group (a later COMMIT marker then applies none)."""
        c = g.offsets.get(tp)
        if c is not None and (record_offset < 0 or c[C_RECORD_OFFSET] is None or c[C_RECORD_OFFSET] < record_offset):
            del g.offsets[tp]
        for pid, pending in list(g.pending_txn_commits.items()):
            entry = pending.get(tp)
            if entry is not None and entry[0] is not None and (record_offset < 0 or entry[0] < record_offset):
                del pending[tp]
                if not pending:
                    del g.pending_txn_commits[pid]

    def replay_txn_record(self, key: Optional[bytes], value: Optional[bytes], record_offset: int,
                          producer_id: int) -> None:
        """A record of a transactional batch: an offset commit pending until the producer's marker."""
        if key is None:
            return
        ok = rec.decode_offset_key(key)
        if ok is None:
            self.replay(key, value, record_offset)  # Kafka writes only offsets transactionally
            return
        group_id, topic, partition = ok
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        tp = (sys.intern(topic), partition)
        pending = g.pending_txn_commits.setdefault(producer_id, {})
        if value is None:
            pending.pop(tp, None)
        else:
            pending[tp] = (record_offset, OffsetAndMetadata(*rec.decode_offset_commit_value(value)))

    def replay_txn_marker(self, producer_id: int, committed: bool) -> None:
        """A transaction marker met while loading (the same rule as a marker written while leader)."""
        if self._load_buffer:  # a COMMIT compares with the plain commits written before it
            self._flush_loaded()
        self.complete_txn(producer_id, committed)

    def end_replay(self) -> None:
        """Apply what is still noted and stop noting (the loader calls it on its own thread, as replay)."""
        if self._load_buffer is not None:
            self._flush_loaded()
            self._load_buffer = None

    def finish_loading(self, now: int) -> Outcome:
        """After replay: drop empty tombstoned groups and arm every loaded member's session timer."""
        self.end_replay()
        out = Outcome()
        for gid, g in list(self.groups.items()):
            if not g.members and not g.offsets and g.protocol_type is None and not g.pending_txn_commits:
                del self.groups[gid]
                continue
            for m in g.members.values():
                self._schedule_heartbeat(now, g, m, out)
        return out

    def shutdown(self) -> Outcome:
        """Resigning the partition: parked requests get NOT_COORDINATOR."""
        out = Outcome()
        for g in self.groups.values():
            for m in g.members.values():
                if m.join_waiter is not None:
                    out.completions.append((m.join_waiter, join_result(m.member_id, ErrorCode.NOT_COORDINATOR)))
                    m.join_waiter = None
                if m.sync_waiter is not None:
                    out.completions.append((m.sync_waiter, sync_result(ErrorCode.NOT_COORDINATOR)))
                    m.sync_waiter = None
            g.state = DEAD
        self.groups.clear()
        return out

    def snapshot(self) -> Dict[str, Any]:
        """The persistent part of the state (what replay must rebuild), for tests and tools."""
        out: Dict[str, Any] = {}
        for gid, g in sorted(self.groups.items()):
            out[gid] = {
                "generation": g.generation_id, "protocol_type": g.protocol_type,
                "protocol": g.protocol_name if g.members else None, "leader": g.leader_id if g.members else None,
                "state": STABLE if g.members and g.state in (STABLE,) else (EMPTY if not g.members else g.state),
                "members": {mid: (m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                                  m.rebalance_timeout_ms, m.metadata(g.protocol_name), m.assignment)
                            for mid, m in g.members.items()},
                "offsets": {tp: c[:C_RECORD_OFFSET] for tp, c in sorted(g.offsets.items())},
            }
        return out
