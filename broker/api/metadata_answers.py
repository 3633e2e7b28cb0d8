"""Prepared Metadata topic entries: each topic's entry encoded once per (listener, version), not per request.

Kafka's ZkMetadataCache walks an immutable snapshot for every Metadata request. Here, walking and
encoding 10,000 partitions took ~15 ms a request and left ~100,000 objects of garbage behind (GC
pauses in the tail). A topic's entry only changes when the controller changes the topic or the
brokers, so :class:`MetadataAnswers` keeps each topic's entry already encoded
(:class:`~broker.protocol.codec.PreEncoded`, which the response encoder copies as it is) and an
all-topics answer becomes a join of cached bytes.

What an entry depends on, hence its key and how it is invalidated (no hooks: by identity):

- the topic's :class:`TopicMeta` (name, id, partitions). MetadataCache replaces it whenever an
  UpdateMetadata changes the topic, and only then; a deleted topic leaves the cache, and its stale
  entry is pruned;
- the listener's view of the brokers (:class:`ListenerView`: the live broker ids, and those with
  an endpoint on the listener), which decides LEADER_NOT_AVAILABLE, LISTENER_NOT_FOUND and v0's
  replica filtering. Views are recomputed when MetadataCache replaces its ``brokers`` dict and
  interned, so a change of host, port or rack (or an UpdateMetadata that changes no broker) keeps
  every entry;
- the request version, through :data:`ENTRY_VERSION`: versions whose topic entries are the same
  bytes share one (v1-4: no new topic field; v10-12: v11 drops a top-level field only, v12 lets
  names be null, which known topics never are).

The list of every topic's entry by name (an all-topics request without an authorizer) is kept too,
until ``MetadataCache.topics_changes`` moves or the listener's view changes.

Not cached, and decided per request exactly as before: which topics are answered (ACL filtering,
topic ids, auto-creation), error entries, and ``topic_authorized_operations`` (v8+), which is
spliced into the cached bytes when a client asks for it. :func:`broker.api.metadata.topic_entry`
(the per-partition walk) stays the reference these entries are tested against.

Loop affinity: the event loop only, like the MetadataCache it reads.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from broker.api import acl_ops
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey, response_schema
from broker.protocol.codec import PreEncoded, element_encoder

if TYPE_CHECKING:
    from broker.cluster.metadata_cache import MetadataCache, TopicMeta

#: The version whose topic entry encoding each Metadata version (index) shares. v0 filters replicas by
#: listener, v5 adds offline_replicas, v6 LISTENER_NOT_FOUND, v7 leader_epoch, v8 the operations,
#: v9 the flexible encoding, v10 topic_id.
ENTRY_VERSION: Tuple[int, ...] = (0, 1, 1, 1, 1, 5, 6, 7, 8, 9, 10, 10, 10)

_I32 = struct.Struct(">i")
_BY_PARTITION = attrgetter("partition")
_LEADER_NOT_AVAILABLE = int(ErrorCode.LEADER_NOT_AVAILABLE)
_LISTENER_NOT_FOUND = int(ErrorCode.LISTENER_NOT_FOUND)
_REPLICA_NOT_AVAILABLE = int(ErrorCode.REPLICA_NOT_AVAILABLE)


def _check_topic_layout() -> None:
    """with_operations() splices the int32 that ends a topic entry (then, v9+, its empty tagged fields)."""
    topics = next(f for f in response_schema(ApiKey.METADATA, 12).fields if f.name == "topics")
    last = topics.fields[-1]
    if (last.name, last.type, last.versions.low) != ("topic_authorized_operations", "int32", 8) or any(
            f.tag is not None for f in topics.fields):
        raise RuntimeError("MetadataResponseTopic no longer ends with topic_authorized_operations")


_check_topic_layout()


@dataclass(frozen=True)
class ListenerView:
    """What a topic entry needs to know of the brokers, as clients of one listener see them."""

    #: ids of the live brokers (a leader among them without the listener: LISTENER_NOT_FOUND, v6+)
    live: FrozenSet[int]
    #: ids of the live brokers with an endpoint on the listener
    reachable: FrozenSet[int]


class TopicAnswer:
    """A known topic's entry, encoded for one (listener, entry version) with no operations requested."""

    __slots__ = ("name", "entry")

    def __init__(self, name: str, entry: PreEncoded) -> None:
        self.name = name
        self.entry = entry

    def with_operations(self, version: int, operations: int) -> PreEncoded:
        """The entry carrying ``topic_authorized_operations`` (a field of v8+; older versions lack it)."""
        if version < 8 or operations == acl_ops.NOT_REQUESTED:
            return self.entry
        data = self.entry.data
        at = len(data) - (5 if version >= 9 else 4)  # v9+: the entry's tagged-field count (0) follows
        return PreEncoded(b"".join((data[:at], _I32.pack(operations), data[at + 4:])))


def partition_entries(topic: "TopicMeta", version: int, view: ListenerView) -> List[Dict[str, Any]]:
    """The topic's partitions as broker.api.metadata.partition_entries gives them, from a ListenerView."""
    strict = version == 0
    listener_errors = version >= 6
    reachable, live = view.reachable, view.live
    out = []
    for p in sorted(topic.partitions.values(), key=_BY_PARTITION):
        replicas: Sequence[int] = p.replicas
        isr: Sequence[int] = p.isr
        if strict:
            replicas = [r for r in replicas if r in reachable]
            isr = [r for r in isr if r in reachable]
        leader = p.leader
        if leader in reachable:
            error = _REPLICA_NOT_AVAILABLE if len(replicas) < len(p.replicas) or len(isr) < len(p.isr) else 0
        else:
            error = _LISTENER_NOT_FOUND if listener_errors and leader in live else _LEADER_NOT_AVAILABLE
            leader = -1
        out.append({"error_code": error, "partition_index": p.partition, "leader_id": leader,
                    "leader_epoch": p.leader_epoch, "replica_nodes": replicas, "isr_nodes": isr,
                    "offline_replicas": p.offline})
    return out


def encode_topic(topic: "TopicMeta", entry_version: int, view: ListenerView) -> TopicAnswer:
    """Build and encode one topic's entry (error 0, no operations requested)."""
    encode = element_encoder(response_schema(ApiKey.METADATA, entry_version), ("topics",), entry_version)
    return TopicAnswer(topic.name, encode({
        "error_code": 0, "name": topic.name, "topic_id": topic.topic_id, "is_internal": topic.is_internal,
        "partitions": partition_entries(topic, entry_version, view),
        "topic_authorized_operations": acl_ops.NOT_REQUESTED}))


class _TopicEntries:
    """A topic's encoded entries, valid while ``meta`` is the MetadataCache's TopicMeta of the topic."""

    __slots__ = ("meta", "by_key")

    def __init__(self, meta: "TopicMeta") -> None:
        self.meta = meta
        #: (listener, entry version) -> (the ListenerView it was built with, the answer)
        self.by_key: Dict[Tuple[str, int], Tuple[ListenerView, TopicAnswer]] = {}


class MetadataAnswers:
    """Encoded topic entries of one MetadataCache, rebuilt lazily for the topics (or brokers) that changed."""

    def __init__(self, metadata: "MetadataCache") -> None:
        self.metadata = metadata
        self._topics: Dict[str, _TopicEntries] = {}
        self._names: Tuple[int, List[str]] = (-1, [])  # (MetadataCache.topics_changes, sorted names)
        #: (listener, entry version) -> (topics_changes, view, every topic's answer by name)
        self._every: Dict[Tuple[str, int], Tuple[int, ListenerView, List[TopicAnswer]]] = {}
        #: listener -> (the brokers dict it was computed from, the view)
        self._views: Dict[str, Tuple[Any, ListenerView]] = {}

    def view(self, listener: str) -> ListenerView:
        """The listener's current view of the brokers; the same object for as long as it is unchanged."""
        brokers = self.metadata.brokers
        got = self._views.get(listener)
        if got is not None and got[0] is brokers:
            return got[1]
        view = ListenerView(frozenset(brokers),
                            frozenset(b for b, m in brokers.items() if m.endpoint(listener) is not None))
        if got is not None and got[1] == view:
            view = got[1]
        self._views[listener] = (brokers, view)
        return view

    def answer(self, topic: "TopicMeta", version: int, listener: str) -> TopicAnswer:
        """``topic``'s entry for a Metadata ``version`` request on ``listener``."""
        return self._answer(topic, ENTRY_VERSION[version], listener, self.view(listener))

    def topic_names(self) -> List[str]:
        """Every known topic's name, sorted; the same list until the topics change (do not mutate it)."""
        changes = self.metadata.topics_changes
        if self._names[0] != changes:
            self._names = (changes, sorted(self.metadata.topics))
        return self._names[1]

    def answer_every_topic(self, version: int, listener: str) -> List[TopicAnswer]:
        """Every known topic's entry, by name (an all-topics request without an authorizer); the same list
        until a topic or the listener's view changes (do not mutate it)."""
        view = self.view(listener)
        key = (listener, ENTRY_VERSION[version])
        changes = self.metadata.topics_changes
        got = self._every.get(key)
        if got is not None and got[0] == changes and got[1] is view:
            return got[2]
        every = self.answer_all(self.topic_names(), version, listener)
        self._every[key] = (changes, view, every)
        return every

    def answer_all(self, names: Sequence[str], version: int, listener: str) -> List[TopicAnswer]:
        """The entries of known topics ``names`` (each must be in the MetadataCache), in that order."""
        topics = self.metadata.topics
        ev = ENTRY_VERSION[version]
        view = self.view(listener)
        key = (listener, ev)
        out = []
        for name in names:
            meta = topics[name]
            entries = self._topics.get(name)
            if entries is not None and entries.meta is meta:
                got = entries.by_key.get(key)
                if got is not None and got[0] is view:
                    out.append(got[1])
                    continue
            out.append(self._answer(meta, ev, listener, view))
        return out

    def cached(self, name: str, version: int, listener: str) -> Optional[TopicAnswer]:
        """The entry held for ``name`` if it is still valid, without building one (for tests and tools)."""
        meta = self.metadata.topics.get(name)
        entries = self._topics.get(name)
        if meta is None or entries is None or entries.meta is not meta:
            return None
        got = entries.by_key.get((listener, ENTRY_VERSION[version]))
        return got[1] if got is not None and got[0] is self.view(listener) else None

    def _answer(self, meta: "TopicMeta", ev: int, listener: str, view: ListenerView) -> TopicAnswer:
        entries = self._topics.get(meta.name)
        if entries is None or entries.meta is not meta:
            entries = self._topics[meta.name] = _TopicEntries(meta)
            if len(self._topics) > len(self.metadata.topics):
                self._prune()
        key = (listener, ev)
        got = entries.by_key.get(key)
        if got is not None and got[0] is view:
            return got[1]
        answer = encode_topic(meta, ev, view)
        entries.by_key[key] = (view, answer)
        return answer

    def _prune(self) -> None:
        """Drop the entries of deleted topics (there is one at least: more entries than topics)."""
        topics = self.metadata.topics
        self._topics = {name: e for name, e in self._topics.items() if topics.get(name) is e.meta}
