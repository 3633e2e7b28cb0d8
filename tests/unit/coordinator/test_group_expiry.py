"""Offset and group expiry as Kafka 3.9's GroupMetadataManager.cleanupGroupMetadata and
GroupMetadata.removeExpiredOffsets do it, driven with a manual clock (``Driver`` of test_group_state)."""
from __future__ import annotations

import asyncio
import struct
from typing import Any, List, Tuple

from broker.coordinator.group import records as rec
from broker.coordinator.group import service as group_service
from broker.coordinator.group.state import (C_OFFSET, COMPLETING_REBALANCE, DEAD, EMPTY, STABLE, GroupConfig,
                                            GroupCoordinatorState, OffsetAndMetadata)
from broker.protocol.api import data_codec
from broker.util.clock import ManualClock
from tests.unit.coordinator.test_group_state import Driver, subscription

RETENTION = 60_000
T0, T1 = ("t", 0), ("t", 1)


def expire(d: Driver) -> List[Tuple[bytes, Any]]:
    """Run an expiry pass; the tombstones it wrote."""
    start = len(d.log)
    d.finish(d.state.expire_offsets(d.now))
    return d.log[start:]


def empty_consumer_group(d: Driver, group: str, offsets: dict) -> None:
    """A consumer group that had a member (generation 1), committed ``offsets`` and became Empty now."""
    ids = d.stable_group(group, 1, session=600_000)
    d.commit(group, offsets, member=ids[0], gen=1)
    d.finish(d.state.leave_group(d.now, group, [(ids[0], None)]))
    d.advance(0)
    assert d.state.groups[group].state == EMPTY


def test_simple_consumer_offsets_expire_from_each_commit_and_the_group_goes_without_tombstone() -> None:
    """No protocol type (offset storage only): each offset expires retention after its own commit; once none is
    left the group is Dead and removed, with no group-metadata tombstone since its generation is 0."""
    d = Driver(offsets_retention_ms=RETENTION)
    d.commit("simple", {T0: 1})
    d.advance(30_000)
    d.commit("simple", {T1: 2})
    d.advance(29_999)
    assert expire(d) == []
    d.advance(1)
    assert expire(d) == [(rec.offset_commit_key("simple", "t", 0), None)]
    assert list(d.state.groups["simple"].offsets) == [T1]
    d.advance(30_000)
    assert expire(d) == [(rec.offset_commit_key("simple", "t", 1), None)]
    assert "simple" not in d.state.groups


def test_empty_group_offsets_expire_retention_after_the_group_became_empty() -> None:
    """An Empty group with a protocol type: the clock starts when the group became Empty, not at the commit, and
    the whole group goes at once, with its metadata tombstone (generation > 0)."""
    d = Driver(offsets_retention_ms=RETENTION)
    ids = d.stable_group("g", 1, session=600_000)
    d.commit("g", {T0: 1, T1: 2}, member=ids[0], gen=1)
    d.advance(RETENTION * 3)  # commits long older than the retention, but the group is Stable and subscribed
    assert d.heartbeat("g", ids[0], 1) == 0
    assert expire(d) == []
    d.finish(d.state.leave_group(d.now, "g", [(ids[0], None)]))
    d.advance(0)
    assert d.state.groups["g"].state == EMPTY
    d.advance(RETENTION - 1)
    assert expire(d) == []
    d.advance(1)
    assert expire(d) == [(rec.offset_commit_key("g", "t", 0), None), (rec.offset_commit_key("g", "t", 1), None),
                         (rec.group_metadata_key("g"), None)]
    assert "g" not in d.state.groups


def test_stable_consumer_group_loses_only_unsubscribed_topics_offsets() -> None:
    d = Driver(offsets_retention_ms=RETENTION)
    ids = d.stable_group("g", 1, session=600_000, protocols=[("range", subscription("t"))])
    d.commit("g", {T0: 1, ("old", 0): 2}, member=ids[0], gen=1)
    d.advance(RETENTION)
    assert d.heartbeat("g", ids[0], 1) == 0
    assert expire(d) == [(rec.offset_commit_key("g", "old", 0), None)]
    assert list(d.state.groups["g"].offsets) == [T0] and d.state.groups["g"].state == STABLE


def test_rebalancing_and_non_consumer_groups_keep_their_offsets() -> None:
    d = Driver(offsets_retention_ms=RETENTION)
    ids = d.stable_group("connect", 1, session=600_000, ptype="connect")
    d.commit("connect", {T0: 1}, member=ids[0], gen=1)
    ids2 = d.stable_group("g", 1, session=600_000, rebalance=600_000)
    d.commit("g", {("other", 0): 1}, member=ids2[0], gen=1)
    d.join("g", member=ids2[0], protocols=[("range", subscription("u"))], session=600_000, rebalance=600_000)
    assert d.state.groups["g"].state == COMPLETING_REBALANCE  # joined again, awaiting SyncGroup
    d.advance(RETENTION * 2)
    assert expire(d) == []


def test_a_commit_in_flight_keeps_its_offset() -> None:
    d = Driver(offsets_retention_ms=RETENTION)
    d.commit("simple", {T0: 1})
    d.advance(RETENTION)
    out = d.state.commit_offsets(d.now, "simple", "", None, -1, {T0: OffsetAndMetadata(2, commit_timestamp=d.now)})
    assert d.state.expire_offsets(d.now).records == []  # not written yet: the old offset stays
    d.finish(out)
    assert d.state.groups["simple"].offsets[T0][C_OFFSET] == 2


def test_explicit_expire_timestamp_wins_but_not_over_a_subscription() -> None:
    """Offsets committed with retention_time_ms (OffsetCommit v2-v4, value v1) expire at their own timestamp,
    unless a Stable consumer group subscribes to the topic (that filter comes first in Kafka)."""
    d = Driver(offsets_retention_ms=RETENTION)
    oms = {T0: OffsetAndMetadata(1, commit_timestamp=d.now, expire_timestamp=d.now + 1000)}
    d.finish(d.state.commit_offsets(d.now, "simple", "", None, -1, oms))
    ids = d.stable_group("g", 1, session=600_000, protocols=[("range", subscription("t"))])
    oms = {T0: OffsetAndMetadata(1, commit_timestamp=d.now, expire_timestamp=d.now + 1000),
           ("u", 0): OffsetAndMetadata(1, commit_timestamp=d.now, expire_timestamp=d.now + 1000)}
    d.finish(d.state.commit_offsets(d.now, "g", ids[0], None, 1, oms))
    d.advance(1000)
    assert d.heartbeat("g", ids[0], 1) == 0
    assert sorted(expire(d)) == sorted([(rec.offset_commit_key("simple", "t", 0), None),
                                        (rec.offset_commit_key("g", "u", 0), None)])
    assert list(d.state.groups["g"].offsets) == [T0] and "simple" not in d.state.groups


def test_loaded_empty_group_counts_from_its_recorded_state_timestamp() -> None:
    """After a coordinator move the loaded Empty group keeps the time it became Empty (GroupMetadataValue
    current_state_timestamp), so the retention is not restarted by the load."""
    d = Driver(offsets_retention_ms=RETENTION)
    empty_consumer_group(d, "g", {T0: 1})
    became_empty = d.now
    d.advance(RETENTION // 2)
    loaded = GroupCoordinatorState(GroupConfig(offsets_retention_ms=RETENTION))
    for offset, (k, v) in enumerate(d.log):
        loaded.replay(k, v, offset)
    loaded.finish_loading(d.now)
    g = loaded.groups["g"]
    assert (g.state, g.current_state_timestamp) == (EMPTY, became_empty)
    assert loaded.expire_offsets(became_empty + RETENTION - 1).records == []
    out = loaded.expire_offsets(became_empty + RETENTION)
    assert out.records == [(rec.offset_commit_key("g", "t", 0), None), (rec.group_metadata_key("g"), None)]
    assert loaded.groups["g"].offsets  # applied once written
    loaded.replay_written(out.records, len(d.log), -1)
    assert "g" not in loaded.groups


def test_old_metadata_without_state_timestamp_counts_from_each_commit() -> None:
    """GroupMetadataValue v0/v1 carry no current_state_timestamp: an Empty group's offsets then expire
    retention after their own commit."""
    state = GroupCoordinatorState(GroupConfig(offsets_retention_ms=RETENTION))
    value = struct.pack(">h", 1) + data_codec("GroupMetadataValue", 1).encode(
        {"protocol_type": "consumer", "generation": 3, "protocol": None, "leader": None, "members": []})
    state.replay(rec.group_metadata_key("g"), value, 0)
    state.replay(rec.offset_commit_key("g", "t", 0), rec.offset_commit_value(1, -1, "", 1000, None), 1)
    state.replay(rec.offset_commit_key("g", "t", 1), rec.offset_commit_value(1, -1, "", 5000, None), 2)
    state.finish_loading(10_000)
    assert state.groups["g"].current_state_timestamp is None
    out = state.expire_offsets(1000 + RETENTION)
    assert out.records == [(rec.offset_commit_key("g", "t", 0), None)]
    state.replay_written(out.records, 3, -1)
    out = state.expire_offsets(5000 + RETENTION)
    assert out.records == [(rec.offset_commit_key("g", "t", 1), None), (rec.group_metadata_key("g"), None)]
    state.replay_written(out.records, 4, -1)
    assert state.groups.get("g") is None


def test_dead_group_no_longer_answers_and_a_new_commit_starts_afresh() -> None:
    d = Driver(offsets_retention_ms=RETENTION)
    empty_consumer_group(d, "g", {T0: 7})
    group = d.state.groups["g"]
    d.advance(RETENTION)
    expire(d)
    assert group.state == DEAD
    assert d.state.fetch_offsets("g", [T0], False) == [(T0, -1, -1, "", 0)]
    d.commit("g", {T0: 8})
    assert d.state.groups["g"] is not group and d.state.groups["g"].generation_id == 0


def test_service_expires_a_large_shard_in_slices(monkeypatch: Any) -> None:
    """GroupCoordinator.expire_offsets looks at a slice of groups at a time and appends each slice's tombstones;
    every expired offset and empty group goes, whatever the slicing."""
    from tests.unit.coordinator.test_group_apis import FakeConfig, FakeOffsetsTopic

    class Config(FakeConfig):
        values = dict(FakeConfig.values, **{"offsets.retention.minutes": 1})

    monkeypatch.setattr(group_service, "EXPIRY_SLICE_OFFSETS", 7)
    clock = ManualClock(1_000_000)

    async def scenario() -> None:
        io = FakeOffsetsTopic()
        gc = group_service.GroupCoordinator(Config(), io, topics=None, clock=clock)  # type: ignore[arg-type]
        gc.start()
        await gc.on_become_leader("__consumer_offsets", 0)
        await gc.wait_loaded()
        for g in range(20):
            offsets = {("t", p): OffsetAndMetadata(p, commit_timestamp=clock.wall_ms()) for p in range(3)}
            await gc.commit_offsets(f"g{g}", "", None, -1, offsets)
        appends = len(io.base_sequences)
        clock.jump_wall(59_999)  # the wall reading only: the expiry compares it with the commit timestamps
        await gc.expire_offsets()
        assert len(io.base_sequences) == appends and len(gc.shards[0].groups) == 20
        clock.jump_wall(1)
        await gc.expire_offsets()
        assert gc.shards[0].groups == {}
        tombstones = [r.key for r in io.records if r.value is None]
        assert sorted(tombstones) == sorted(rec.offset_commit_key(f"g{g}", "t", p) for g in range(20)
                                            for p in range(3))
        assert len(io.base_sequences) - appends > 1  # several slices, each appended
        await gc.stop()

    asyncio.run(scenario())
