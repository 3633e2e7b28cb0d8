"""The group APIs at every version Kafka 3.9 accepts, through the real codec and GroupCoordinator.

Each request is encoded with our codec, decoded as the dispatcher would, handled, and the response
encoded and decoded again. ``__consumer_offsets`` is an in-memory list (no sockets, ZooKeeper or
files); the coordinator's timers run on the asyncio loop with zero delays.
"""
from __future__ import annotations

import asyncio
import struct
import uuid
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

import pytest

from broker.api import (delete_groups, describe_groups, find_coordinator, heartbeat, join_group, leave_group,
                        list_groups, offset_commit, offset_delete, offset_fetch, sync_group, txn_offset_commit)
from broker.coordinator.group import records as rec
from broker.cluster.metadata_cache import BrokerEndpoint, BrokerMeta, MetadataCache, PartitionMeta, TopicMeta
from broker.coordinator.group.service import GroupCoordinator
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.coordinator.offsets_topic import LoadedRecord
from broker.errors import ErrorCode as E
from broker.protocol import api as proto
from broker.protocol.api import ApiKey

MODULES = {ApiKey.FIND_COORDINATOR: find_coordinator, ApiKey.JOIN_GROUP: join_group, ApiKey.SYNC_GROUP: sync_group,
           ApiKey.HEARTBEAT: heartbeat, ApiKey.LEAVE_GROUP: leave_group, ApiKey.OFFSET_COMMIT: offset_commit,
           ApiKey.OFFSET_FETCH: offset_fetch, ApiKey.DESCRIBE_GROUPS: describe_groups,
           ApiKey.LIST_GROUPS: list_groups, ApiKey.DELETE_GROUPS: delete_groups, ApiKey.OFFSET_DELETE: offset_delete,
           ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit}


def versions(key: ApiKey) -> range:
    mod = MODULES[key]
    return range(mod.MIN_VERSION, mod.MAX_VERSION + 1)


def test_handlers_cover_exactly_the_schema_versions() -> None:
    for key, mod in MODULES.items():
        assert (mod.MIN_VERSION, mod.MAX_VERSION) == tuple(proto.API_VERSIONS_RANGE[key]), key.name


class FakeOffsetsTopic:
    def __init__(self) -> None:
        self.records: List[LoadedRecord] = []
        self.base_sequences: List[int] = []   # one per appended batch
        self.load_gate: Optional[asyncio.Event] = None   # a load waits for it when set

    async def append(self, partition: int, records: List[Tuple[bytes, Optional[bytes]]],
                     base_sequence: int = -1) -> int:
        self.base_sequences.append(base_sequence)
        for k, v in records:
            self.records.append(LoadedRecord(len(self.records), k, v))
        return len(self.records) - 1

    def start_verification(self, partition: int, producer_id: int, producer_epoch: int) -> None:
        return None

    async def append_transactional(self, partition: int, records: List[Tuple[bytes, Optional[bytes]]],
                                   producer_id: int, producer_epoch: int, guard: object = None) -> int:
        for k, v in records:
            self.records.append(LoadedRecord(len(self.records), k, v, producer_id))
        return len(self.records) - 1

    def marker(self, producer_id: int, committed: bool) -> int:
        self.records.append(LoadedRecord(len(self.records), None, None, producer_id, committed))
        return len(self.records) - 1

    async def load(self, partition: int, on_batch: Any, buffer_bytes: int, on_end: Any = None) -> Tuple[int, int]:
        """One batch per record, as OffsetsTopicIO.load hands them over."""
        if self.load_gate is not None:
            await self.load_gate.wait()
        for r in list(self.records):
            on_batch((r,), r.producer_id, r.marker)
        if on_end is not None:
            on_end()
        return sum(1 for r in self.records if r.marker is None), len(self.records)

    def is_leader(self, partition: int) -> bool:
        return True


class FakeConfig:
    values = {"offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0,
              "offset.metadata.max.bytes": 20}

    def get(self, key: str) -> Any:
        return self.values[key]


def make_broker(clock: Clock = SYSTEM_CLOCK) -> Any:
    md = MetadataCache(0)
    md.set_brokers({0: BrokerMeta(0, (BrokerEndpoint("PLAINTEXT", "broker0", 9092),))})
    for name, n in (("t", 3), ("__consumer_offsets", 1)):
        md.put_topic(TopicMeta(name, uuid.uuid4(), {p: PartitionMeta(p, 0, 0, (0,), (0,)) for p in range(n)}))

    async def ensure_internal_topic(*_: Any) -> int:
        return 0

    coordinator = GroupCoordinator(FakeConfig(), FakeOffsetsTopic(),  # type: ignore[arg-type]
                                   SimpleNamespace(ensure_internal_topic=ensure_internal_topic), clock=clock)
    return SimpleNamespace(metadata=md, group_coordinator=coordinator)


async def call(broker: Any, key: ApiKey, version: int, body: Dict[str, Any]) -> Any:
    frame = memoryview(proto.encode_request(key, version, 7, "client-x", body))[4:]
    header, offset = proto.decode_request_header(frame)
    request = proto.decode_request(key, version, frame, offset)
    ctx = SimpleNamespace(api_version=version, client_id=header.client_id, listener_name="PLAINTEXT",
                          connection=SimpleNamespace(client_host="10.0.0.1", listener_name="PLAINTEXT"))
    collaborators: Dict[str, Any] = {"coordinator": broker.group_coordinator}
    if key in (ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_DELETE, ApiKey.TXN_OFFSET_COMMIT):
        collaborators["metadata"] = broker.metadata
    response = await MODULES[key].handle(ctx, request, **collaborators)
    return proto.decode_response(key, version, b"".join(proto.encode_response(key, version, 7, response)))


def run(scenario: Any, clock: Clock = SYSTEM_CLOCK) -> None:
    """``scenario(broker)`` with a loaded coordinator on ``clock`` (a ManualClock's timers fire only as it moves:
    drive the calls that wait for one, as the zero-delay rebalance timer of a join)."""
    async def main() -> None:
        broker = make_broker(clock)
        gc = broker.group_coordinator
        gc.start()
        await gc.on_become_leader("__consumer_offsets", 0)
        await gc.wait_loaded()
        try:
            await scenario(broker)
        finally:
            await gc.stop()
    asyncio.run(main())


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


JOIN = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "reason": None,
        "protocols": [{"name": "range", "metadata": subscription("t")}]}


async def joined_member(broker: Any, group: str = "g", version: int = 9) -> Tuple[str, int]:
    """Join and sync one member at the newest versions; (member id, generation)."""
    body = dict(JOIN, group_id=group)
    r = await call(broker, ApiKey.JOIN_GROUP, version, body)
    if r.error_code == E.MEMBER_ID_REQUIRED:
        r = await call(broker, ApiKey.JOIN_GROUP, version, dict(body, member_id=r.member_id))
    assert r.error_code == 0
    s = await call(broker, ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": r.generation_id, "member_id": r.member_id, "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": r.member_id, "assignment": b"ASSIGN"}]})
    assert s.error_code == 0 and s.assignment == b"ASSIGN"
    return r.member_id, r.generation_id


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator(version: int) -> None:
    async def scenario(broker: Any) -> None:
        if version >= 4:
            r = await call(broker, ApiKey.FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": ["a", "b"]})
            assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in r.coordinators] == [
                ("a", 0, "broker0", 9092, 0), ("b", 0, "broker0", 9092, 0)]
            r = await call(broker, ApiKey.FIND_COORDINATOR, version, {"key_type": 1, "coordinator_keys": ["tx"]})
            assert r.coordinators[0].error_code == E.COORDINATOR_NOT_AVAILABLE
        else:
            r = await call(broker, ApiKey.FIND_COORDINATOR, version, {"key": "a", "key_type": 0})
            assert (r.error_code, r.node_id, r.host, r.port) == (0, 0, "broker0", 9092)
            if version >= 1:
                r = await call(broker, ApiKey.FIND_COORDINATOR, version, {"key": "tx", "key_type": 1})
                assert (r.error_code, r.node_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_join_group(version: int) -> None:
    async def scenario(broker: Any) -> None:
        r = await call(broker, ApiKey.JOIN_GROUP, version, JOIN)
        if version >= 4:
            assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id.startswith("client-x-")
            r = await call(broker, ApiKey.JOIN_GROUP, version, dict(JOIN, member_id=r.member_id))
        assert r.error_code == 0 and r.generation_id == 1 and r.protocol_name == "range"
        assert r.leader == r.member_id and [m.member_id for m in r.members] == [r.member_id]
        assert r.members[0].metadata == subscription("t")
        if version >= 7:
            assert r.protocol_type == "consumer"
        d = await call(broker, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False})
        assert d.groups[0].members[0].client_host == "/10.0.0.1" and d.groups[0].members[0].client_id == "client-x"
        bad = await call(broker, ApiKey.JOIN_GROUP, version, dict(JOIN, session_timeout_ms=1))
        assert bad.error_code == E.INVALID_SESSION_TIMEOUT
        if version >= 5:
            s = await call(broker, ApiKey.JOIN_GROUP, version, dict(JOIN, group_id="s", group_instance_id="i"))
            assert s.error_code == 0 and s.member_id.startswith("i-")  # static: no MEMBER_ID_REQUIRED round
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
def test_sync_group(version: int) -> None:
    async def scenario(broker: Any) -> None:
        r = await call(broker, ApiKey.JOIN_GROUP, 3, JOIN)  # v3: no MEMBER_ID_REQUIRED round
        body = {"group_id": "g", "generation_id": r.generation_id, "member_id": r.member_id,
                "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                "assignments": [{"member_id": r.member_id, "assignment": b"xyz"}]}
        s = await call(broker, ApiKey.SYNC_GROUP, version, body)
        assert s.error_code == 0 and s.assignment == b"xyz"
        if version >= 5:
            assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
            bad = await call(broker, ApiKey.SYNC_GROUP, version, dict(body, protocol_name="roundrobin"))
            assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        bad = await call(broker, ApiKey.SYNC_GROUP, version, dict(body, generation_id=9))
        assert bad.error_code == E.ILLEGAL_GENERATION
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.HEARTBEAT))
def test_heartbeat(version: int) -> None:
    async def scenario(broker: Any) -> None:
        member, gen = await joined_member(broker)
        body = {"group_id": "g", "generation_id": gen, "member_id": member, "group_instance_id": None}
        assert (await call(broker, ApiKey.HEARTBEAT, version, body)).error_code == 0
        r = await call(broker, ApiKey.HEARTBEAT, version, dict(body, member_id="nobody"))
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        r = await call(broker, ApiKey.HEARTBEAT, version, dict(body, generation_id=gen + 1))
        assert r.error_code == E.ILLEGAL_GENERATION
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
def test_leave_group(version: int) -> None:
    async def scenario(broker: Any) -> None:
        member, _ = await joined_member(broker)
        if version >= 3:
            r = await call(broker, ApiKey.LEAVE_GROUP, version, {"group_id": "g", "members": [
                {"member_id": member, "group_instance_id": None, "reason": None},
                {"member_id": "nobody", "group_instance_id": None, "reason": None}]})
            assert r.error_code == 0
            assert [(m.member_id, m.error_code) for m in r.members] == [(member, 0), ("nobody", E.UNKNOWN_MEMBER_ID)]
        else:
            r = await call(broker, ApiKey.LEAVE_GROUP, version, {"group_id": "g", "member_id": member})
            assert r.error_code == 0
            r = await call(broker, ApiKey.LEAVE_GROUP, version, {"group_id": "g", "member_id": "nobody"})
            assert r.error_code == E.UNKNOWN_MEMBER_ID
        await asyncio.sleep(0)  # the rebalance of the now-empty group completes on a zero-delay timer
        await asyncio.sleep(0)
        d = await call(broker, ApiKey.DESCRIBE_GROUPS, 0, {"groups": ["g"]})
        assert d.groups[0].group_state == "Empty" and not d.groups[0].members
    run(scenario)


def _commit_body(version: int, group: str, member: str, gen: int, offsets: Dict[int, int],
                 metadata: Optional[str] = "md") -> Dict[str, Any]:
    return {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": member,
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 4, "commit_timestamp": -1,
                 "committed_metadata": metadata} for p, o in offsets.items()]}]}


def _fetch_body(version: int, group: str, partitions: Optional[List[int]]) -> Dict[str, Any]:
    topics = None if partitions is None else [{"name": "t", "partition_indexes": partitions}]
    if version >= 8:
        return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
                "require_stable": True}
    return {"group_id": group, "topics": topics if topics is not None or version >= 2 else [],
            "require_stable": True}


def _fetched(version: int, r: Any) -> Tuple[int, Dict[int, Tuple[int, int, Optional[str], int]]]:
    if version >= 8:
        g = r.groups[0]
        err, topics = g.error_code, g.topics
    else:
        err, topics = (r.error_code if version >= 2 else 0), r.topics
    rows = {p.partition_index: (p.committed_offset, p.committed_leader_epoch if version >= 5 else -1, p.metadata,
                                p.error_code) for t in topics for p in t.partitions}
    return err, rows


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_then_fetch(version: int) -> None:
    async def scenario(broker: Any) -> None:
        if version >= 1:
            member, gen = await joined_member(broker)
        else:
            member, gen = "", -1
        group = "g" if version >= 1 else "simple"
        r = await call(broker, ApiKey.OFFSET_COMMIT, version, _commit_body(version, group, member, gen, {0: 5, 1: 6}))
        assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [(0, 0), (1, 0)]
        too_large = await call(broker, ApiKey.OFFSET_COMMIT, version,
                               _commit_body(version, group, member, gen, {2: 1}, metadata="x" * 21))
        assert too_large.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE
        unknown = await call(broker, ApiKey.OFFSET_COMMIT, version, dict(
            _commit_body(version, group, member, gen, {0: 1}), topics=[{"name": "nope", "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "commit_timestamp": -1,
                 "committed_metadata": None}]}]))
        assert unknown.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        if version >= 1:
            stale = await call(broker, ApiKey.OFFSET_COMMIT, version, _commit_body(version, group, member, gen + 1,
                                                                                  {0: 9}))
            assert stale.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
        f = await call(broker, ApiKey.OFFSET_FETCH, 8, _fetch_body(8, group, [0, 1, 2]))
        err, rows = _fetched(8, f)
        epoch = 4 if version >= 6 else -1
        assert err == 0 and rows == {0: (5, epoch, "md", 0), 1: (6, epoch, "md", 0), 2: (-1, -1, "", 0)}
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch(version: int) -> None:
    async def scenario(broker: Any) -> None:
        r = await call(broker, ApiKey.OFFSET_COMMIT, 8, _commit_body(8, "simple", "", -1, {0: 5, 1: 6}))
        assert r.topics[0].partitions[0].error_code == 0
        f = await call(broker, ApiKey.OFFSET_FETCH, version, _fetch_body(version, "simple", [0, 2]))
        err, rows = _fetched(version, f)
        epoch = 4 if version >= 5 else -1
        assert err == 0 and rows == {0: (5, epoch, "md", 0), 2: (-1, -1, "", 0)}
        if version >= 2:  # null topics = every committed partition
            err, rows = _fetched(version, await call(broker, ApiKey.OFFSET_FETCH, version,
                                                     _fetch_body(version, "simple", None)))
            assert sorted(rows) == [0, 1]
        if version >= 8:
            multi = await call(broker, ApiKey.OFFSET_FETCH, version, {"require_stable": False, "groups": [
                {"group_id": "simple", "member_id": None, "member_epoch": -1, "topics": None},
                {"group_id": "other", "member_id": None, "member_epoch": -1,
                 "topics": [{"name": "t", "partition_indexes": [1]}]}]})
            assert [g.group_id for g in multi.groups] == ["simple", "other"]
            assert multi.groups[1].topics[0].partitions[0].committed_offset == -1
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_while_loading(version: int) -> None:
    async def scenario(broker: Any) -> None:
        gc = broker.group_coordinator
        gc.io.load_gate = asyncio.Event()  # a reload that stays in progress until the gate opens
        await gc.on_become_leader("__consumer_offsets", 0)
        assert gc.loading == {0}
        try:
            err, rows = _fetched(version, await call(broker, ApiKey.OFFSET_FETCH, version,
                                                     _fetch_body(version, "g", [0])))
            if version >= 2:
                assert err == E.COORDINATOR_LOAD_IN_PROGRESS
            else:
                assert rows[0][3] == E.COORDINATOR_LOAD_IN_PROGRESS
            hb = await call(broker, ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                                          "group_instance_id": None})
            assert hb.error_code == 0  # Kafka answers heartbeats blindly while loading
            s = await call(broker, ApiKey.SYNC_GROUP, 5, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                                          "group_instance_id": None, "protocol_type": "consumer",
                                                          "protocol_name": "range", "assignments": []})
            assert s.error_code == E.REBALANCE_IN_PROGRESS
        finally:
            gc.io.load_gate.set()
            await gc.wait_loaded()
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
def test_describe_groups(version: int) -> None:
    async def scenario(broker: Any) -> None:
        member, _ = await joined_member(broker)
        r = await call(broker, ApiKey.DESCRIBE_GROUPS, version, {"groups": ["g", "none"],
                                                                 "include_authorized_operations": True})
        g, none = r.groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
        assert [(m.member_id, m.member_assignment) for m in g.members] == [(member, b"ASSIGN")]
        assert g.members[0].member_metadata == subscription("t")
        assert none.group_state == "Dead" and none.error_code == 0
        if version >= 3:
            assert g.authorized_operations != -2147483648
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
def test_list_groups(version: int) -> None:
    async def scenario(broker: Any) -> None:
        await joined_member(broker)
        await call(broker, ApiKey.OFFSET_COMMIT, 8, _commit_body(8, "simple", "", -1, {0: 1}))
        r = await call(broker, ApiKey.LIST_GROUPS, version, {"states_filter": [], "types_filter": []})
        assert r.error_code == 0 and sorted((g.group_id, g.protocol_type) for g in r.groups) == [
            ("g", "consumer"), ("simple", "")]
        if version >= 4:
            r = await call(broker, ApiKey.LIST_GROUPS, version, {"states_filter": ["Stable"], "types_filter": []})
            assert [(g.group_id, g.group_state) for g in r.groups] == [("g", "Stable")]
        if version >= 5:
            r = await call(broker, ApiKey.LIST_GROUPS, version, {"states_filter": [], "types_filter": ["consumer"]})
            assert r.groups == []
            r = await call(broker, ApiKey.LIST_GROUPS, version, {"states_filter": [], "types_filter": ["Classic"]})
            assert len(r.groups) == 2 and {g.group_type for g in r.groups} == {"classic"}
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_GROUPS))
def test_delete_groups(version: int) -> None:
    async def scenario(broker: Any) -> None:
        await joined_member(broker)
        await call(broker, ApiKey.OFFSET_COMMIT, 8, _commit_body(8, "simple", "", -1, {0: 1}))
        r = await call(broker, ApiKey.DELETE_GROUPS, version, {"groups_names": ["g", "simple", "none"]})
        assert [(x.group_id, x.error_code) for x in r.results] == [
            ("g", E.NON_EMPTY_GROUP), ("simple", 0), ("none", E.GROUP_ID_NOT_FOUND)]
        io = broker.group_coordinator.io
        # the offset's tombstone; no group tombstone: "simple" never had a generation (Kafka's
        # cleanupGroupMetadata writes one only for generation > 0)
        assert (io.records[-1].key, io.records[-1].value) == (rec.offset_commit_key("simple", "t", 0), None)
        assert rec.group_metadata_key("simple") not in [r.key for r in io.records]
    run(scenario)


def test_offset_delete() -> None:
    async def scenario(broker: Any) -> None:
        member, gen = await joined_member(broker)
        await call(broker, ApiKey.OFFSET_COMMIT, 8, _commit_body(8, "g", member, gen, {0: 1}))
        body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]},
                                            {"name": "nope", "partitions": [{"partition_index": 0}]}]}
        r = await call(broker, ApiKey.OFFSET_DELETE, 0, body)
        assert r.error_code == 0
        assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [
            ("t", E.GROUP_SUBSCRIBED_TO_TOPIC), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION)]
        r = await call(broker, ApiKey.OFFSET_DELETE, 0, dict(body, group_id="none"))
        assert r.error_code == E.GROUP_ID_NOT_FOUND
    run(scenario)


def test_offset_commits_are_written_at_base_sequence_0_and_group_records_at_minus_1() -> None:
    """Kafka 3.9's GroupMetadataManager builds offset-commit batches with base sequence 0 (storeOffsets) and group
    metadata batches with -1; kafka-dump-log shows the header, so ours matches it."""
    async def scenario(broker: Any) -> None:
        io = broker.group_coordinator.io
        io.base_sequences.clear()
        member, gen = await joined_member(broker)          # JoinGroup + SyncGroup write a group metadata record
        assert io.base_sequences and set(io.base_sequences) == {-1}
        io.base_sequences.clear()
        await call(broker, ApiKey.OFFSET_COMMIT, 8, _commit_body(8, "g", member, gen, {0: 1}))
        assert io.base_sequences == [0]
    run(scenario)


def test_reload_from_offsets_topic_serves_committed_offsets() -> None:
    async def scenario(broker: Any) -> None:
        member, gen = await joined_member(broker)
        await call(broker, ApiKey.OFFSET_COMMIT, 8, _commit_body(8, "g", member, gen, {0: 11, 2: 12}))
        gc = broker.group_coordinator
        await gc.on_resign("__consumer_offsets", 0)
        err, _ = _fetched(8, await call(broker, ApiKey.OFFSET_FETCH, 8, _fetch_body(8, "g", [0])))
        assert err == E.NOT_COORDINATOR
        await gc.on_become_leader("__consumer_offsets", 0)
        await gc.wait_loaded()
        err, rows = _fetched(8, await call(broker, ApiKey.OFFSET_FETCH, 8, _fetch_body(8, "g", [0, 2])))
        assert err == 0 and rows == {0: (11, 4, "md", 0), 2: (12, 4, "md", 0)}
        d = await call(broker, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False})
        assert d.groups[0].group_state == "Stable" and d.groups[0].members[0].member_id == member
        hb = await call(broker, ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": gen, "member_id": member,
                                                      "group_instance_id": None})
        assert hb.error_code == 0
    run(scenario)


def _txn_commit_body(version: int, group: str, offsets: Dict[int, int], member: str = "", gen: int = -1) -> dict:
    body: Dict[str, Any] = {"transactional_id": "tx", "group_id": group, "producer_id": 77, "producer_epoch": 0,
                            "topics": [{"name": "t", "partitions": [
                                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                 "committed_metadata": ""} for p, o in offsets.items()]}]}
    if version >= 3:
        body.update(generation_id=gen, member_id=member, group_instance_id=None)
    return body


@pytest.mark.parametrize("version", versions(ApiKey.TXN_OFFSET_COMMIT))
def test_txn_offset_commit_pending_until_marker(version: int) -> None:
    async def scenario(broker: Any) -> None:
        gc = broker.group_coordinator
        r = await call(broker, ApiKey.TXN_OFFSET_COMMIT, version, _txn_commit_body(version, "tg", {0: 11, 9: 1}))
        assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [
            (0, 0), (9, E.UNKNOWN_TOPIC_OR_PARTITION)]
        assert gc.io.records[-1].producer_id == 77  # written as the producer's transactional batch
        fetch = {"group_id": "tg", "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": True}
        r = await call(broker, ApiKey.OFFSET_FETCH, 7, fetch)
        assert r.topics[0].partitions[0].error_code == E.UNSTABLE_OFFSET_COMMIT
        gc.on_txn_marker("__consumer_offsets", 0, 77, True, gc.io.marker(77, True))
        r = await call(broker, ApiKey.OFFSET_FETCH, 7, fetch)
        assert (r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].committed_offset) == (0, 11)
        # an empty group id is refused as Kafka's validateGroupStatus does for this API
        r = await call(broker, ApiKey.TXN_OFFSET_COMMIT, version, _txn_commit_body(version, "", {0: 1}))
        assert r.topics[0].partitions[0].error_code == E.INVALID_GROUP_ID
    run(scenario)


def test_txn_offset_commit_state_survives_reload() -> None:
    async def scenario(broker: Any) -> None:
        gc = broker.group_coordinator
        await call(broker, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit_body(3, "tg", {0: 5}))
        gc.io.marker(77, False)                      # aborted
        await call(broker, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit_body(3, "tg", {0: 6}))
        gc.io.marker(77, True)                       # committed
        await call(broker, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit_body(3, "tg", {0: 7}))  # still open
        await gc.on_resign("__consumer_offsets", 0)
        await gc.on_become_leader("__consumer_offsets", 0)
        await gc.wait_loaded()
        fetch = {"group_id": "tg", "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": False}
        r = await call(broker, ApiKey.OFFSET_FETCH, 7, fetch)
        assert r.topics[0].partitions[0].committed_offset == 6
        gc.on_txn_marker("__consumer_offsets", 0, 77, True, gc.io.marker(77, True))
        r = await call(broker, ApiKey.OFFSET_FETCH, 7, fetch)
        assert r.topics[0].partitions[0].committed_offset == 7
    run(scenario)
