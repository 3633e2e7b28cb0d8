"""ReplicaManager: LeaderAndIsr / StopReplica rules, DelayedProduce outcomes, the leader's replica-fetch
path, KIP-392 follower reads, ListOffsets for replicas, ISR shrink scheduling."""
from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, List, Tuple

from broker.errors import ErrorCode
from broker.replica.config import RACK_AWARE_REPLICA_SELECTOR, ReplicaConfig
from broker.replica.manager import ClientMetadata, FetchPartitionInfo
from broker.replica.partition import EPOCH_DURING_DELETE

from .harness import TOPIC, TP, FakeCluster, drive, records, state

STALE = ErrorCode.STALE_CONTROLLER_EPOCH


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class Listener:
    def __init__(self) -> None:
        self.events: List[Tuple[str, str, int]] = []

    async def on_become_leader(self, topic: str, partition: int) -> None:
        self.events.append(("leader", topic, partition))

    def on_resign(self, topic: str, partition: int) -> None:
        self.events.append(("resign", topic, partition))


def test_leader_and_isr_epoch_rules(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            listener = Listener()
            b.rm.add_leadership_listener(listener)
            assert await c.leader_and_isr(1, state(1, 2, [1], controller_epoch=5), controller_epoch=5) == (0, {TP: 0})
            p = b.rm.get_partition(TP)
            assert (p.is_leader, p.leader_epoch, p.controller_epoch) == (True, 2, 5)
            assert listener.events == [("leader", TOPIC, 0)]
            # An older controller: rejected as a whole.
            code, errs = await c.leader_and_isr(1, state(2, 3, [2]), controller_epoch=4)
            assert (code, errs) == (STALE, {TP: STALE})
            # Same leader epoch: ignored (Kafka answers STALE_CONTROLLER_EPOCH for it); smaller: the same.
            assert await c.leader_and_isr(1, state(2, 2, [2]), controller_epoch=5) == (0, {TP: STALE})
            assert await c.leader_and_isr(1, state(2, 1, [2]), controller_epoch=5) == (0, {TP: STALE})
            assert p.is_leader and p.leader_epoch == 2
            # A newer epoch making us a follower: applied; the listener hears of the resignation.
            assert await c.leader_and_isr(1, state(2, 3, [2, 1]), controller_epoch=6) == (0, {TP: 0})
            assert (p.is_leader, p.leader_id, p.leader_epoch) == (False, 2, 3)
            assert listener.events[-1] == ("resign", TOPIC, 0)
            assert b.rm.fetcher_manager.fetch_state(TP) is not None
            # No leader (its leader failed and no ISR member is left): nothing changes, the fetcher keeps trying.
            assert await c.leader_and_isr(1, state(-1, 4, [1]), controller_epoch=6) == (0, {TP: 0})
            assert (p.leader_id, p.leader_epoch) == (2, 3)
            assert b.rm.fetcher_manager.fetch_state(TP).current_leader_epoch == 3
            # A partition whose replicas do not include us.
            other = ("t", 1)
            code, errs = await c.leader_and_isr(1, state(2, 0, [2], [2, 3], tp=other), controller_epoch=6)
            assert errs == {other: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            assert b.rm.get_partition(other) is None
        finally:
            await c.close()

    run(main())


def test_leader_and_isr_inconsistent_topic_id(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1]))

            async def cfg(_t: str) -> Any:
                return c.log_config

            code, errs = await b.rm.become_leader_or_follower(0, 1, [state(1, 1, [1])], {TOPIC: uuid.uuid4()},
                                                              {}, cfg)
            assert errs == {TP: ErrorCode.INCONSISTENT_TOPIC_ID}
            assert b.rm.get_partition(TP).leader_epoch == 0
        finally:
            await c.close()

    run(main())


def test_stop_replicas(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            listener = Listener()
            b.rm.add_leadership_listener(listener)
            await c.leader_and_isr(1, state(1, 3, [1]))
            await drive(b.rm, b.rm.append_records(1, {TP: records(b"x")}))
            log_dir = b.log.dir
            assert await b.rm.stop_replicas(0, 0, {TP: (4, True)}) == (STALE, {})
            assert await b.rm.stop_replicas(0, 1, {TP: (2, True)}) == (0, {TP: ErrorCode.FENCED_LEADER_EPOCH})
            # Without delete the partition stays hosted.
            assert await b.rm.stop_replicas(0, 1, {TP: (3, False)}) == (0, {TP: 0})
            assert b.rm.get_partition(TP) is not None
            assert await b.rm.stop_replicas(0, 1, {TP: (EPOCH_DURING_DELETE, True)}) == (0, {TP: 0})
            assert b.rm.get_partition(TP) is None
            assert not os.path.exists(log_dir)
            assert b.log_manager.get_log(TP) is None
            assert ("resign", TOPIC, 0) in listener.events
            # Unknown partitions are fine (their logs may linger from before a restart).
            assert await b.rm.stop_replicas(0, 1, {("t", 9): (-1, True)}) == (0, {("t", 9): 0})
        finally:
            await c.close()

    run(main())


def test_delayed_produce_outcomes(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            rm = b.rm
            # Not replicated in time.
            res = (await drive(rm, rm.append_records(-1, {TP: records(b"a")}, timeout_ms=20)))[TP]
            assert (res.error_code, res.base_offset) == (ErrorCode.REQUEST_TIMED_OUT, 0)
            assert rm.delayed_produce_purgatory.num_delayed() == 0
            # acks=1 does not wait; invalid acks are refused.
            assert (await drive(rm, rm.append_records(1, {TP: records(b"b")})))[TP].error_code == 0
            assert (await drive(rm, rm.append_records(2, {TP: records(b"c")})))[TP].error_code == ErrorCode.INVALID_REQUIRED_ACKS
            # Leadership lost while waiting.
            waiting = asyncio.ensure_future(rm.append_records(-1, {TP: records(b"d")}, timeout_ms=10000))
            await c.wait_until(lambda: rm.delayed_produce_purgatory.num_delayed() == 1)
            await c.leader_and_isr(1, state(2, 1, [2, 1], [1, 2]))
            assert (await asyncio.wait_for(waiting, 8))[TP].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # Appends on a follower are refused.
            assert (await drive(rm, rm.append_records(-1, {TP: records(b"e")})))[TP].error_code == \
                ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            await c.close()

    run(main())


def test_a_broker_leaving_the_metadata_lets_waiting_acks_all_produces_complete(tmp_path) -> None:
    """A caught-up follower outside the ISR holds the leader's HW while its broker may join the ISR (Kafka's rule),
    as after a controlled shutdown whose expansion the controller refused. Once UpdateMetadata drops that broker, the
    HW moves over the ISR and the acks=all produce waiting for it is answered then, not when the follower's catch-up
    time (replica.lag.time.max.ms) has run out."""
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2, 3]))
            rm, p = b.rm, b.rm.get_partition(TP)
            b.apm.error = ErrorCode.INELIGIBLE_REPLICA  # broker 3 is shutting down: the controller refuses it
            p.update_follower_fetch_state(3, -1, 0, 0, c.clock.mono_ms())  # caught up
            await p.wait_alter_partition_idle()
            assert p.isr == (1, 2)
            waiting = asyncio.ensure_future(rm.append_records(-1, {TP: records(b"a")}, timeout_ms=20_000))
            await c.wait_until(lambda: rm.delayed_produce_purgatory.num_delayed() == 1)
            p.update_follower_fetch_state(2, -1, 1, 0, c.clock.mono_ms())  # the ISR has it
            await asyncio.sleep(0)
            assert b.log.high_watermark == 0 and not waiting.done()  # broker 3 still counts
            c.not_alive.add(3)  # its registration went away; UpdateMetadata says so
            rm.brokers_gone({3})
            res = (await asyncio.wait_for(waiting, 5))[TP]
            assert (res.error_code, res.base_offset) == (0, 0) and b.log.high_watermark == 1
        finally:
            await c.close()

    run(main())


def test_not_enough_replicas_before_and_after_append(tmp_path) -> None:
    async def main() -> None:
        from broker.storage.config import LogConfig
        c = FakeCluster(str(tmp_path), log_config=LogConfig(min_insync_replicas=2, file_delete_delay_ms=0))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1, 2]))
            rm = b.rm
            res = (await drive(rm, rm.append_records(-1, {TP: records(b"a")})))[TP]
            assert res.error_code == ErrorCode.NOT_ENOUGH_REPLICAS and res.error_message
            assert b.log.log_end_offset == 0
            assert (await drive(rm, rm.append_records(1, {TP: records(b"a")})))[TP].error_code == 0  # acks=1 is not checked
            await c.leader_and_isr(1, state(1, 1, [1, 2], [1, 2]))
            waiting = asyncio.ensure_future(rm.append_records(-1, {TP: records(b"b")}, timeout_ms=10000))
            await c.wait_until(lambda: rm.delayed_produce_purgatory.num_delayed() == 1)
            # The record got replicated, but by the time the waiting request looks the ISR is [1].
            p = rm.get_partition(TP)
            from broker.replica.partition import IsrState
            b.log_manager.owners.call(TP, lambda: b.log.update_high_watermark(2))  # as its owner would
            p.isr_state = IsrState.committed([1])
            rm.try_complete_delayed(TP)
            assert (await asyncio.wait_for(waiting, 8))[TP].error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        finally:
            await c.close()

    run(main())


def test_leader_side_replica_fetch_checks(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 2, [1, 2], [1, 2]))
            rm = b.rm
            for v in (b"a", b"b", b"c"):
                await drive(rm, rm.append_records(1, {TP: records(v)}))

            async def fetch(replica: int, info: FetchPartitionInfo, **kw: Any) -> Any:
                return (await drive(rm, rm.fetch_messages([(TP, info)], 1 << 20, 1, 0, replica_id=replica, **kw)))[TP]

            # Followers read up to the LEO; consumers only to the HW.
            r = await fetch(2, FetchPartitionInfo(0, 1 << 20, 2))
            assert r.error_code == 0 and r.log_end_offset == 3 and r.high_watermark == 0 and r.size > 0
            assert (await fetch(-1, FetchPartitionInfo(0, 1 << 20, 2))).size == 0
            # Epoch checks.
            assert (await fetch(2, FetchPartitionInfo(0, 1 << 20, 1))).error_code == ErrorCode.FENCED_LEADER_EPOCH
            assert (await fetch(2, FetchPartitionInfo(0, 1 << 20, 3))).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
            # A broker that is not a replica (yet).
            assert (await fetch(3, FetchPartitionInfo(0, 1 << 20, 2))).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
            assert (await fetch(3, FetchPartitionInfo(0, 1 << 20))).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # A last fetched epoch above every epoch the leader knows: its end cannot be found -> out of range.
            r = await fetch(2, FetchPartitionInfo(3, 1 << 20, 2, last_fetched_epoch=5))
            assert r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            await c.leader_and_isr(1, state(1, 4, [1, 2], [1, 2]))
            await drive(rm, rm.append_records(1, {TP: records(b"d")}))  # epoch 4 starts at 3
            r = await fetch(2, FetchPartitionInfo(5, 1 << 20, 4, last_fetched_epoch=3))
            assert r.error_code == 0 and r.diverging_epoch == (2, 3) and r.size == 0
            r = await fetch(2, FetchPartitionInfo(3, 1 << 20, 4, last_fetched_epoch=2))
            assert r.diverging_epoch is None and r.size > 0
            # The follower's state is recorded only without divergence.
            assert rm.get_partition(TP).remote_replica(2).log_end_offset == 3
        finally:
            await c.close()

    run(main())


def test_consumer_reads_from_follower_and_preferred_read_replica(tmp_path) -> None:
    async def main() -> None:
        cfg = ReplicaConfig(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=10,
                            replica_selector_class=RACK_AWARE_REPLICA_SELECTOR, broker_rack="r1")
        c = FakeCluster(str(tmp_path), config=cfg)
        try:
            leader, follower = c.start(1), c.start(2)
            leader.rm._broker_rack = {2: "r2"}.get
            for x in (1, 2):
                await c.leader_and_isr(x, state(1, 0, [1, 2], [1, 2]))
            assert (await drive(leader.rm, leader.rm.append_records(-1, {TP: records(b"a")}, timeout_ms=5000)))[TP].error_code == 0
            await drive(leader.rm, leader.rm.append_records(-1, {TP: records(b"b")}, timeout_ms=5000))
            await c.wait_until(lambda: follower.log.high_watermark >= 1)

            async def consume(rm: Any, meta: Any) -> Any:
                return (await drive(rm, rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20, 0))], 1 << 20, 1, 0,
                                                client_metadata=meta)))[TP]

            # The leader sends a rack-r2 consumer to the in-sync follower in r2.
            r = await consume(leader.rm, ClientMetadata("r2"))
            assert r.preferred_read_replica == 2 and r.size == 0
            assert (await consume(leader.rm, ClientMetadata("r1"))).preferred_read_replica == -1
            assert (await consume(leader.rm, ClientMetadata(""))).preferred_read_replica == -1
            # The follower serves consumers that sent client metadata (Fetch v11+), up to its own HW.
            r = await consume(follower.rm, ClientMetadata("r2"))
            assert r.error_code == 0 and r.size > 0 and r.high_watermark == follower.log.high_watermark
            assert (await consume(follower.rm, None)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            await c.close()

    run(main())


def test_list_offsets_for_replicas_consumers_and_lagging_hw(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            rm = b.rm
            await drive(rm, rm.append_records(1, {TP: records(b"a", b"b")}))
            assert await rm.list_offset(TP, -1, 0) == (0, -1, 0, 0)  # consumers: the HW
            assert await rm.list_offset(TP, -1, 0, replica_id=2) == (0, -1, 2, 0)  # followers: the LEO
            assert await rm.list_offset(TP, -2, 0, replica_id=2) == (0, -1, 0, 0)
            assert (await rm.list_offset(TP, -1, 0, current_leader_epoch=1))[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
            # New leader epoch starting at 2 while the HW is still 0: consumers must wait.
            await c.leader_and_isr(1, state(1, 1, [1, 2], [1, 2]))
            assert (await rm.list_offset(TP, -1, 0))[0] == ErrorCode.OFFSET_NOT_AVAILABLE
            assert (await rm.list_offset(TP, -1, 0, replica_id=2))[0] == 0
            await c.leader_and_isr(1, state(2, 2, [2, 1], [1, 2]))
            assert (await rm.list_offset(TP, -1, 0, replica_id=3))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            await c.close()

    run(main())


def test_scheduled_isr_shrink_goes_through_alter_partition(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2, 3]))
            rm = b.rm
            await drive(rm, rm.append_records(1, {TP: records(b"a")}))
            assert rm.maybe_shrink_isr() == []
            c.clock.advance(30001)
            assert rm.maybe_shrink_isr() == [TP]
            await rm.get_partition(TP).wait_alter_partition_idle()
            assert rm.get_partition(TP).isr == (1,)
            assert b.apm.submissions[-1][3] == [1]
            # The HW was held by the ISR; now it follows the leader alone.
            assert b.log.high_watermark == 1
        finally:
            await c.close()

    run(main())


def test_legacy_make_leader_and_stop_replica_still_work(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            rm = b.rm
            p = await rm.make_leader(TOPIC, 0, uuid.uuid4(), 0, [1], [1], c.log_config, 1)
            assert p.is_leader
            res = (await drive(rm, rm.append_records(-1, {TP: records(b"a")})))[TP]
            assert res.error_code == 0 and p.log.high_watermark == 1
            assert await rm.make_leader(TOPIC, 0, p.topic_id, 0, [1], [1], c.log_config, 1) is p
            out = await drive(rm, rm.fetch_messages([(TP, 0, 1 << 20)], 1 << 20, 1, 100, 0))
            assert out[TP].size > 0
            await rm.stop_replica(TOPIC, 0, delete=True)
            assert rm.get_partition(TP) is None
        finally:
            await c.close()

    run(main())


def test_periodic_isr_expiration_and_hw_checkpoint(tmp_path) -> None:
    async def main() -> None:
        cfg = ReplicaConfig(replica_lag_time_max_ms=20, replica_high_watermark_checkpoint_interval_ms=10)
        c = FakeCluster(str(tmp_path), config=cfg)
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2, 3]))
            await drive(b.rm, b.rm.append_records(1, {TP: records(b"a")}))
            b.rm.startup()
            c.clock.advance(21)  # the followers never fetched: out of the ISR at the next check
            await c.wait_until(lambda: b.rm.get_partition(TP).isr == (1,), what="scheduled ISR shrink")
            path = os.path.join(b.dir, "replication-offset-checkpoint")
            from broker.storage.checkpoints import OffsetCheckpointFile
            await c.wait_until(lambda: os.path.exists(path) and OffsetCheckpointFile(path).read().get(TP) == 1,
                             what="HW checkpoint")
        finally:
            await c.close()

    run(main())


def test_replica_config_from_broker_props() -> None:
    props = {"replica.lag.time.max.ms": "10000", "num.replica.fetchers": 3, "broker.rack": "r1",
             "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR, "inter.broker.protocol.version": "2.6-IV0"}

    def get(key: str) -> Any:
        return props[key]

    cfg = ReplicaConfig.from_props(get)
    assert (cfg.replica_lag_time_max_ms, cfg.num_replica_fetchers, cfg.broker_rack) == (10000, 3, "r1")
    assert cfg.uses_rack_aware_selector and not cfg.truncation_on_fetch
    assert cfg.replica_fetch_wait_max_ms == 500 and ReplicaConfig().truncation_on_fetch
