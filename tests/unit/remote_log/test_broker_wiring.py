"""Tiered storage wired into the broker's ReplicaManager: ``__remote_log_metadata`` reached through Produce and Fetch
on the broker's channel (BrokerMetadataTopic over the replica harness's in-process network and real wire codecs), the
RemoteLogManager's tasks started by LeaderAndIsr on its own thread, segments copied and deleted locally, ListOffsets
-4/-5, a remote Fetch, and the tasks stopped by StopReplica."""
from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, Optional

import pytest

from broker.remote_log.metadata_serde import METADATA_TOPIC
from broker.errors import ErrorCode
from broker.replica.config import ReplicaConfig
from broker.replica.manager import FetchPartitionInfo
from broker.replica.remote_log_metadata_topic import BrokerMetadataTopic
from broker.replica.tiered_storage import TieredStorage
from broker.storage.config import LogConfig
from broker.storage.remote.local_tiered_storage import LocalTieredStorage

from tests.unit.replica.harness import TOPIC, TOPIC_ID, TP, FakeCluster, records, state

META_ID = uuid.UUID("99999999-2222-3333-4444-555555555555")
ONE = len(records(b"v" * 20))


def _config(**kw: Any) -> LogConfig:
    base: Dict[str, Any] = dict(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=0, file_delete_delay_ms=0,
                                remote_storage_enable=True)
    base.update(kw)
    return LogConfig(**base)


class Wired:
    """One broker (id 1) leading ``t-0`` (tiered) and both ``__remote_log_metadata`` partitions."""

    def __init__(self, tmp: Path, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.broker = cluster.start(1)
        self.rm = self.broker.rm
        self.broker.log_manager.remote_storage_system_enable = True
        self.created: Optional[tuple] = None
        loop = asyncio.get_running_loop()

        async def produce(src: int, dst: int, api_key: int, req: Any) -> Optional[dict]:
            if api_key != 0:
                return None
            t = req.topic_data[0]
            p = t.partition_data[0]
            res = (await self.rm.append_records(req.acks, {(t.name, p.index): bytearray(p.records)}))[(t.name, p.index)]
            return {"responses": [{"name": t.name, "partition_responses": [
                {"index": p.index, "error_code": res.error_code, "base_offset": res.base_offset}]}],
                "throttle_time_ms": 0}
        cluster.intercept = produce

        async def ensure(name: str, n: int, rf: int, configs: Dict[str, str]) -> int:
            self.created = (name, n, rf, configs)
            states = [state(1, 1, [1], [1], tp=(name, i)) for i in range(n)]
            await self.rm.become_leader_or_follower(0, 1, states, {name: META_ID}, {1: cluster.node(1)},
                                                    self._cfg)
            return 0

        self.port = BrokerMetadataTopic(loop, cluster.channel_factory(1)("rlmm"),
                                        lambda t, p: cluster.node(1) if self.rm.get_partition((t, p)) else None,
                                        ensure, retry_timeout_ms=5000, retry_interval_ms=10, clock=cluster.clock)
        self.rsm = LocalTieredStorage()
        self.rsm.configure({"broker.id": 1, "dir": str(tmp / "remote")})
        lm = self.broker.log_manager
        self.tiered = TieredStorage(1, self.rsm, self.port, {"remote.log.metadata.topic.num.partitions": 2,
                                                             "remote.log.metadata.topic.replication.factor": 1},
                                    lambda t, p: lm.tiered_log((t, p)), task_interval_ms=20,
                                    log_dir=str(tmp / "logs-1"))
        self.rm.tiered = self.tiered

    async def _cfg(self, topic: str) -> LogConfig:
        return self.cluster.log_config if topic == TOPIC else LogConfig(file_delete_delay_ms=0)

    async def lead(self) -> None:
        await self.rm.become_leader_or_follower(0, 1, [state(1, 1, [1], [1, 2])], {TOPIC: TOPIC_ID},
                                                {1: self.cluster.node(1)}, self._cfg)

    async def produce(self, n: int) -> None:
        for i in range(n):
            res = (await self.rm.append_records(-1, {TP: records(b"v%019d" % i)}))[TP]
            assert res.error_code == 0


def with_wired(tmp_path: Path, body: Callable[[Wired], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = FakeCluster(str(tmp_path), config=ReplicaConfig(), log_config=_config(), io_threads=1)
        w = Wired(tmp_path, cluster)
        w.tiered.start()
        try:
            await body(w)
        finally:
            await cluster.close()
    asyncio.run(main())


def test_leader_copies_and_deletes_locally_through_the_metadata_topic(tmp_path: Path) -> None:
    with_wired(tmp_path, _copies_and_deletes)


async def _copies_and_deletes(w: Wired) -> None:
    await w.lead()
    plog = w.rm.get_partition(TP).log
    assert plog.remote_log_enabled
    await w.produce(7)  # segments [0,1] [2,3] [4,5] [6]
    await w.cluster.wait_mixed(lambda: plog.highest_offset_in_remote_storage == 5, what="three segments copied")
    assert w.created is not None and w.created[:3] == (METADATA_TOPIC, 2, 1)
    assert w.created[3]["retention.ms"] == "-1"
    meta = [w.rm.get_partition((METADATA_TOPIC, i)).log for i in range(2)]
    assert sum(m.log_end_offset for m in meta) == 6  # STARTED + FINISHED per segment
    # ListOffsets: -5 the highest copied offset, -4 the first local one once local retention ran
    assert await w.rm.list_offset(TP, -5, 0) == (0, -1, 5, 1)
    assert await w.rm.list_offset(TP, -4, 0) == (0, -1, 0, 1)
    await w.rm.run_io(lambda: plog.delete_old_segments(), key=TP)
    assert plog.log_start_offset == 0 and plog.offsets.local_log_start_offset == 6
    assert await w.rm.list_offset(TP, -4, 0) == (0, -1, 6, 1)
    assert await w.rm.list_offset(TP, -2, 0) == (0, -1, 0, 1)
    # by timestamp: remote storage first (every record here has the same timestamp), then the local log
    ts = 1_700_000_000_000
    assert await w.rm.list_offset(TP, ts, 0) == (0, ts, 0, 1)
    assert await w.rm.list_offset(TP, ts + 1, 0) == (0, -1, -1, -1)
    # a consumer reads every record from offset 0: the first 6 from remote storage, one segment per fetch
    got, offset = [], 0
    while offset < 7:
        res = (await w.rm.fetch_messages([(TP, FetchPartitionInfo(offset, 1 << 20))], 1 << 20, 1, 100))[TP]
        assert res.error_code == 0, res
        batch = bytes(res.records.read() if hasattr(res.records, "read") else res.records)
        vals = [r for r in _values(batch) if r[0] >= offset]
        assert vals, offset
        got += vals
        offset = vals[-1][0] + 1
    assert got == [(i, b"v%019d" % i) for i in range(7)]
    # the remote indexes were cached in the log dir given; the dynamic size change applies off the loop
    cache = w.tiered.index_cache
    assert len(cache) == 3 and cache.cache_dir.name == "remote-log-index-cache"
    assert len(list(cache.cache_dir.iterdir())) == 9
    w.tiered.resize_index_cache(1)
    await w.cluster.wait_mixed(lambda: len(cache) == 0 and not list(cache.cache_dir.iterdir()),
                               what="the cache shrunk")
    w.tiered.resize_index_cache(1 << 30)
    # a follower below the local log start is told to rebuild from remote storage (TierStateMachine)
    res = (await w.rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20))], 1 << 20, 1, 0, replica_id=2))[TP]
    assert res.error_code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
    assert (res.high_watermark, res.log_start_offset) == (7, 0)
    # a remote read slower than remote.fetch.max.wait.ms: the fetch answers without it (DelayedRemoteFetch expiry)
    # (the read waits until the fetch has answered: slower than any max wait, however slow the machine)
    slow, answered = w.tiered.reader.read, threading.Event()
    w.tiered.reader.read = lambda *a, **k: (answered.wait(10), slow(*a, **k))[1]  # type: ignore[method-assign]
    w.tiered.remote_fetch_max_wait_ms = 50
    started, clock = time.monotonic(), w.cluster.clock
    fake_start = clock.mono_ms()
    try:
        res = (await w.cluster.run_mixed(w.rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20))], 1 << 20, 1,
                                                              5000), fake_ms_per_step=1))[TP]
    finally:
        answered.set()
    assert time.monotonic() - started < 0.9
    assert 50 <= clock.mono_ms() - fake_start < 5000  # the remote wait on the replica manager's clock expired it
    assert (res.error_code, res.size, res.high_watermark) == (0, 0, 7)


def _values(data: bytes) -> list:
    from broker.accel import record_batch
    from broker.storage.cleaner_batch import iter_stored_records
    infos, _ = record_batch.scan_batches(data)
    out = []
    for bi in infos:
        out += [(r.offset, bytes(r.value)) for r in iter_stored_records(data[bi.position:bi.position + bi.size])]
    return out


def test_untiered_topic_list_offsets(tmp_path: Path) -> None:
    asyncio.run(_untiered(tmp_path))


async def _untiered(tmp_path: Path) -> None:
    cluster = FakeCluster(str(tmp_path), config=ReplicaConfig(), log_config=_config(remote_storage_enable=False),
                          io_threads=1)
    try:
        b = cluster.start(1)
        b.log_manager.remote_storage_system_enable = True
        await cluster.leader_and_isr(1, state(1, 1, [1], [1]))
        for i in range(3):
            await b.rm.append_records(-1, {TP: records(b"x")})
        assert not b.rm.get_partition(TP).log.remote_log_enabled
        assert await b.rm.list_offset(TP, -4, 0) == (0, -1, 0, 1)
        assert await b.rm.list_offset(TP, -5, 0) == (0, -1, -1, -1)
    finally:
        await cluster.close()


def test_stop_replica_delete_removes_remote_data(tmp_path: Path) -> None:
    with_wired(tmp_path, _stop_delete)


async def _stop_delete(w: Wired) -> None:
    await w.lead()
    plog = w.rm.get_partition(TP).log
    await w.produce(5)
    await w.cluster.wait_mixed(lambda: plog.highest_offset_in_remote_storage == 3, what="copied")
    assert any((Path(w.rsm.storage_directory)).rglob("*.log"))
    await w.rm.stop_replicas(0, 1, {TP: (-2, True)})
    await w.cluster.wait_mixed(lambda: not any(Path(w.rsm.storage_directory).rglob("*.log")), what="remote data deleted")
    meta = [w.rm.get_partition((METADATA_TOPIC, i)).log for i in range(2)]
    # per segment STARTED, FINISHED, DELETE_STARTED, DELETE_FINISHED; then the partition's MARKED, STARTED, FINISHED
    await w.cluster.wait_mixed(lambda: sum(m.log_end_offset for m in meta) == 2 * 4 + 3, what="partition deletion recorded")
    assert not w.tiered.rlm.leader_copy_tasks


def test_follower_rebuilds_from_remote_storage(tmp_path: Path) -> None:
    with_wired(tmp_path, _follower_rebuilds)


async def _follower_rebuilds(w: Wired) -> None:
    """Kafka's TierStateMachine: a new follower below the leader's local log start builds its epochs and producer
    state from the remote segment before it, starts its log after that segment and replicates the rest."""
    await w.lead()
    leader_log = w.rm.get_partition(TP).log
    await w.produce(7)
    await w.cluster.wait_mixed(lambda: leader_log.highest_offset_in_remote_storage == 5, what="copied")
    await w.rm.run_io(lambda: leader_log.delete_old_segments(), key=TP)
    assert leader_log.offsets.local_log_start_offset == 6
    cluster = w.cluster
    b2 = cluster.start(2)
    b2.log_manager.remote_storage_system_enable = True
    rsm2 = LocalTieredStorage()
    rsm2.configure({"broker.id": 2, "dir": str(Path(w.rsm.storage_directory).parent)})
    port2 = BrokerMetadataTopic(asyncio.get_running_loop(), cluster.channel_factory(2)("rlmm"),
                                lambda t, p: cluster.node(1), w.port._ensure_topic, retry_timeout_ms=5000,
                                retry_interval_ms=10, clock=cluster.clock)
    lm2 = b2.log_manager
    t2 = TieredStorage(2, rsm2, port2, {"remote.log.metadata.topic.num.partitions": 2,
                                        "remote.log.metadata.topic.replication.factor": 1},
                       lambda t, p: lm2.tiered_log((t, p)), task_interval_ms=20,
                       log_dir=str(Path(w.rsm.storage_directory).parent.parent / "logs-2"))
    b2.rm.tiered = t2
    t2.start()
    await b2.rm.become_leader_or_follower(0, 1, [state(1, 1, [1], [1, 2])], {TOPIC: TOPIC_ID},
                                          {1: cluster.node(1), 2: cluster.node(2)}, w._cfg)
    flog = b2.rm.get_partition(TP).log
    await w.cluster.wait_mixed(lambda: flog.log_end_offset == 7, what="the follower caught up")
    assert flog.log_start_offset == 0 and flog.offsets.local_log_start_offset == 6
    assert flog.leader_epoch_cache.entries == [(1, 0)]
    # only the segment after the remote one was replicated: its records, nothing below
    info = flog.read(6, 1 << 20)
    assert [v for _, v in _values(info.records.read())] == [b"v%019d" % 6]
    with pytest.raises(Exception):
        flog.read(5, 1 << 20)


def test_parked_remote_fetch_ends_when_the_partition_leaves_this_broker(tmp_path: Path) -> None:
    with_wired(tmp_path, _parked_remote_fetch_partition_gone)


async def _parked_remote_fetch_partition_gone(w: Wired) -> None:
    """Kafka's DelayedRemoteFetch.tryComplete: a parked remote fetch completes as soon as a partition of the fetch is
    no longer hosted here (StopReplica with deletion), not at remote.fetch.max.wait.ms; the partition answers what
    the local read found (no records, no error: Kafka's onComplete when the read is not done), and the next fetch
    gets the error. Becoming a follower does not end it (the partition is still hosted, as Kafka's check)."""
    await w.lead()
    plog = w.rm.get_partition(TP).log
    await w.produce(5)
    await w.cluster.wait_mixed(lambda: plog.highest_offset_in_remote_storage == 3, what="copied")
    await w.rm.run_io(lambda: plog.delete_old_segments(), key=TP)
    assert plog.offsets.local_log_start_offset == 4
    slow, release = w.tiered.reader.read, threading.Event()
    w.tiered.reader.read = lambda *a, **k: (release.wait(10), slow(*a, **k))[1]  # type: ignore[method-assign]
    w.tiered.remote_fetch_max_wait_ms = 60_000
    purgatory = w.rm.delayed_remote_fetch_purgatory
    clock = w.cluster.clock
    try:
        # a leadership change that keeps the partition here (now a follower of broker 2) leaves the fetch parked
        fetch = asyncio.ensure_future(w.rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20))], 1 << 20, 1, 100))
        await w.cluster.wait_mixed(lambda: len(purgatory) == 1, what="the remote fetch parked", fake_ms_per_step=0)
        fake_start = clock.mono_ms()
        w.cluster.start(2)
        await w.rm.become_leader_or_follower(0, 1, [state(2, 2, [1, 2], [1, 2])], {TOPIC: TOPIC_ID},
                                             {1: w.cluster.node(1), 2: w.cluster.node(2)}, w._cfg)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not fetch.done() and len(purgatory) == 1
        # StopReplica with deletion: no longer hosted, the fetch answers at once
        await w.rm.stop_replicas(0, 1, {TP: (-2, True)})
        res = (await asyncio.wait_for(fetch, 10))[TP]
        assert clock.mono_ms() - fake_start < 60_000 and len(purgatory) == 0
        assert (res.error_code, res.size) == (0, 0)
        again = (await w.rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20))], 1 << 20, 1, 0))[TP]
        assert again.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    finally:
        release.set()
