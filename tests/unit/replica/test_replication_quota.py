"""Replication throttling: Kafka's ReplicationQuotaManager semantics, the throttled replica lists, the config keys,
and both sides of a throttled catch-up between in-process brokers (leader leaves data out, follower leaves the
partition out)."""
from __future__ import annotations

import asyncio
from typing import Callable

import pytest

from broker.config.defs import BROKER_CONFIGS, LONG_MAX
from broker.config.kafka_config import KafkaConfig
from broker.config.topic_defs import TOPIC_CONFIGS, effective_topic_config, validate_topic_configs
from broker.config.types import ConfigType, Dynamic, InvalidConfigError
from broker.replica.config import ReplicaConfig
from broker.replica.replication_quota import (ALL_REPLICAS, UNLIMITED, ReplicationQuotaManager, ReplicationQuotas,
                                              SimpleRate, dynamic_rate_getter, parse_throttled_replicas)
from broker.storage.config import LogConfig

from .harness import TP, FakeCluster, ManualClock, records, state

FETCH = 1


def run(coro):
    return asyncio.run(coro)


# ---------------------------------------------------------------------- the rate and the quota
def test_simple_rate_divides_by_elapsed_time_but_at_least_one_window() -> None:
    r = SimpleRate(num_samples=11, window_ms=1000)
    r.record(1000, 0)
    assert r.measure(0) == 1000.0  # at least one whole window
    assert r.measure(500) == 1000.0
    assert r.measure(5000) == 200.0  # 1000 bytes over 5 s
    r.record(1000, 5000)
    assert r.measure(10000) == 200.0  # 2000 bytes over 10 s
    # 11 windows after its last event a sample is obsolete: at 12 s only the t=5 s sample counts
    assert r.measure(12000) == pytest.approx(1000 / 7.0)
    assert r.measure(16000) == 0.0


def test_quota_manager_exceeded_until_the_average_falls_below_the_bound() -> None:
    clock = ManualClock(0)
    q = ReplicationQuotaManager("Leader", 11, 1, clock.mono_ms)
    assert q.upper_bound == UNLIMITED and not q.is_quota_exceeded()
    q.record(10_000_000)
    assert not q.is_quota_exceeded()  # no quota set: Kafka's null quota
    q.update_quota(float(LONG_MAX))
    assert not q.is_quota_exceeded() and q.is_unlimited
    q.update_quota(1000)
    assert q.upper_bound == 1000
    q2 = ReplicationQuotaManager("Follower", 11, 1, clock.mono_ms, bound=1000)
    q2.record(3000)
    assert q2.is_quota_exceeded()  # 3000 B/s
    clock.advance(2000)
    assert q2.is_quota_exceeded()  # 1500 B/s
    clock.advance(1000)
    assert not q2.is_quota_exceeded()  # exactly 1000 B/s is acceptable (value <= bound)
    assert q2.rate() == 1000.0


def test_throttled_replica_lists() -> None:
    assert parse_throttled_replicas("*", 1) == ALL_REPLICAS
    assert parse_throttled_replicas(" 0:1, 1:2 ,2:1", 1) == (0, 2)
    assert parse_throttled_replicas("0:2", 1) == ()
    assert parse_throttled_replicas("", 1) == ()
    assert parse_throttled_replicas(None, 1) == ()
    for bad in ("x", "0:1,*", "0-1", "1:"):
        with pytest.raises(ValueError):
            parse_throttled_replicas(bad, 1)
    q = ReplicationQuotas(1)
    q.update_topic("t", "0:1,3:1,1:2", "*")
    assert q.leader.is_throttled(("t", 0)) and q.leader.is_throttled(("t", 3))
    assert not q.leader.is_throttled(("t", 1)) and not q.leader.is_throttled(("u", 0))
    assert q.follower.is_throttled(("t", 7))
    q.update_topic("t", "", None)
    assert not q.leader.is_throttled(("t", 0)) and not q.follower.is_throttled(("t", 7))
    assert q.leader.throttled_topics() == {} == q.follower.throttled_topics()


def test_config_keys_have_kafkas_types_and_defaults() -> None:
    for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                "replica.alter.log.dirs.io.max.bytes.per.second"):
        d = BROKER_CONFIGS[key]
        assert (d.type, d.default, d.dynamic) == (ConfigType.LONG, LONG_MAX, Dynamic.CLUSTER_WIDE)
    for key in ("replication.quota.window.num", "alter.log.dirs.replication.quota.window.num"):
        assert (BROKER_CONFIGS[key].type, BROKER_CONFIGS[key].default) == (ConfigType.INT, 11)
    for key in ("replication.quota.window.size.seconds", "alter.log.dirs.replication.quota.window.size.seconds"):
        assert (BROKER_CONFIGS[key].type, BROKER_CONFIGS[key].default) == (ConfigType.INT, 1)
    for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        assert TOPIC_CONFIGS[key].type == ConfigType.LIST
    assert validate_topic_configs({"leader.replication.throttled.replicas": "0:1,1:2",
                                   "follower.replication.throttled.replicas": "*"})
    with pytest.raises(InvalidConfigError):
        validate_topic_configs({"leader.replication.throttled.replicas": "0:1,x"})
    base = {"zookeeper.connect": "zk:2181", "broker.id": "1"}
    eff = effective_topic_config(KafkaConfig(base), {"follower.replication.throttled.replicas": "0:1,1:1"})
    assert eff["follower.replication.throttled.replicas"] == "0:1,1:1"
    assert eff["leader.replication.throttled.replicas"] == ""
    # the LogConfig the sink receives carries them in ``extra``
    assert LogConfig.from_props(eff).extra["follower.replication.throttled.replicas"] == "0:1,1:1"


def test_rates_come_from_the_dynamic_layers_only() -> None:
    # A dynamic-only rate in server.properties stops start-up (tests/unit/config/test_loader.py); without one
    # the quotas are unlimited until a dynamic layer sets them.
    static = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1"}, warn_unknown=False)
    q = ReplicationQuotas.from_config(1, static.get, dynamic_rate_getter(static))
    assert q.leader.upper_bound == UNLIMITED
    cfg = static.with_dynamic(per_broker={"leader.replication.throttled.rate": "1000"},
                              cluster_default={"leader.replication.throttled.rate": "7",
                                               "follower.replication.throttled.rate": "2000"})
    q.update_rates(dynamic_rate_getter(cfg))
    assert (q.leader.upper_bound, q.follower.upper_bound, q.alter_log_dirs.upper_bound) == (1000, 2000, UNLIMITED)
    q.update_rates(dynamic_rate_getter(static))
    assert q.leader.upper_bound == UNLIMITED == q.follower.upper_bound
    windows = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1", "replication.quota.window.num": "3",
                           "replication.quota.window.size.seconds": "2"})
    q = ReplicationQuotas.from_config(1, windows.get, dynamic_rate_getter(windows))
    assert (q.leader.num_samples, q.leader.window_ms, q.alter_log_dirs.num_samples) == (3, 2000, 11)


# ---------------------------------------------------------------------- throttled catch-up between brokers
BATCH = 20_000


async def _cluster_with_backlog(tmp_path, batches: int) -> FakeCluster:
    c = FakeCluster(str(tmp_path), config=ReplicaConfig(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=20,
                                                        replica_fetch_max_bytes=BATCH))
    leader = c.start(1)
    await c.leader_and_isr(1, state(1, 0, [1], [1, 2]))
    for i in range(batches):
        res = (await leader.rm.append_records(1, {TP: records(bytes([65 + i]) * BATCH)}))[TP]
        assert res.error_code == 0
    return c


def _fetches_for_tp(c: FakeCluster) -> int:
    n = 0
    for src, dst, key, body in c.requests:
        if key == FETCH and src == 2:
            n += sum(1 for t in body["topics"] for p in t["partitions"] if p["partition"] == TP[1])
    return n


def _follower_fetches(c: FakeCluster) -> int:
    """Fetch requests broker 2 has sent (with or without TP: an incremental one leaves an unchanged partition out).
    The fetcher sends one at a time, so request n + 1 means response n has been processed."""
    return sum(1 for src, _, key, _ in c.requests if key == FETCH and src == 2)


def _count_exceeded(quota: ReplicationQuotaManager) -> Callable[[], int]:
    """Counts the checks of ``quota`` that found it exceeded (each a decision to leave throttled data out)."""
    real = quota.is_quota_exceeded
    n = [0]

    def counted() -> bool:
        exceeded = real()
        n[0] += exceeded
        return exceeded

    quota.is_quota_exceeded = counted  # type: ignore[method-assign]
    return lambda: n[0]


def test_leader_sends_no_throttled_data_while_its_quota_is_exceeded(tmp_path) -> None:
    async def main() -> None:
        c = await _cluster_with_backlog(tmp_path, 4)
        try:
            leader = c.brokers[1]
            clock = ManualClock(0)
            leader.rm.quotas = ReplicationQuotas(1, clock=clock.mono_ms)
            leader.rm.quotas.leader.update_quota(BATCH / 2)  # one batch exceeds it for two windows
            throttled = _count_exceeded(leader.rm.quotas.leader)
            leader.rm.update_throttled_replicas(TP[0], LogConfig.from_props(
                {"leader.replication.throttled.replicas": "0:1"}))
            assert leader.rm.quotas.leader.is_throttled(TP)
            follower = c.start(2)
            await c.leader_and_isr(2, state(1, 0, [1], [1, 2]))
            await c.wait_until(lambda: follower.log.log_end_offset == 1, what="first batch")
            # the leader recorded the batch before answering: the quota is exceeded for every fetch after it
            assert leader.rm.quotas.leader.rate() > leader.rm.quotas.leader.upper_bound
            sent = _follower_fetches(c)
            # several follower fetches (three more sent: at least two answered), all answered without records
            await c.wait_until(lambda: _follower_fetches(c) >= sent + 3, what="three more follower fetches")
            assert throttled() >= 2  # the leader consulted the quota and left the data out
            assert follower.log.log_end_offset == 1
            assert leader.rm.quotas.leader.rate() == follower.log.size_bytes  # one batch in one window
            clock.advance(3000)  # 20000 B / 3 s < 10000 B/s: one more batch, then exceeded again
            await c.wait_until(lambda: follower.log.log_end_offset == 2, what="second batch")
            assert leader.rm.quotas.leader.rate() > leader.rm.quotas.leader.upper_bound  # 2 batches / 3 s
            sent, refused = _follower_fetches(c), throttled()
            await c.wait_until(lambda: _follower_fetches(c) >= sent + 3, what="three more follower fetches")
            assert throttled() >= refused + 2
            assert follower.log.log_end_offset == 2
            leader.rm.quotas.leader.update_quota(float(UNLIMITED))
            await c.wait_until(lambda: follower.log.log_end_offset == 4, what="the rest once unthrottled")
        finally:
            await c.close()

    run(main())


def test_leader_never_throttles_a_follower_in_the_isr(tmp_path) -> None:
    async def main() -> None:
        c = await _cluster_with_backlog(tmp_path, 3)
        try:
            leader = c.brokers[1]
            leader.rm.quotas = ReplicationQuotas(1, clock=ManualClock(0).mono_ms)
            leader.rm.quotas.leader.update_quota(1)
            leader.rm.quotas.leader.mark_throttled(TP[0])
            leader.rm.quotas.leader.record(10 * BATCH)
            assert leader.rm.quotas.leader.is_quota_exceeded()
            follower = c.start(2)
            # A follower in the ISR (e.g. after a leader change) is not throttled.
            await c.leader_and_isr(1, state(1, 1, [1, 2], [1, 2]))
            await c.leader_and_isr(2, state(1, 1, [1, 2], [1, 2]))
            await c.wait_until(lambda: follower.log.log_end_offset == 3, what="unthrottled catch-up")
        finally:
            await c.close()

    run(main())


def test_follower_leaves_throttled_partitions_out_of_its_fetches(tmp_path) -> None:
    async def main() -> None:
        c = await _cluster_with_backlog(tmp_path, 4)
        try:
            follower = c.start(2)
            clock = ManualClock(0)
            follower.rm.quotas = ReplicationQuotas(2, clock=clock.mono_ms)
            follower.rm.quotas.follower.update_quota(BATCH / 2)
            exceeded = _count_exceeded(follower.rm.quotas.follower)
            follower.rm.update_throttled_replicas(TP[0], LogConfig.from_props(
                {"follower.replication.throttled.replicas": "0:2,1:3"}))
            assert follower.rm.quotas.follower.is_throttled(TP)
            await c.leader_and_isr(2, state(1, 0, [1], [1, 2]))
            await c.wait_until(lambda: follower.log.log_end_offset == 1, what="first batch")
            # The fetcher records the batch right after appending it, so the first fetch it builds after that
            # finds the quota exceeded and leaves TP out (that request is on record once the check has returned).
            await c.wait_until(lambda: exceeded() >= 1, what="the fetcher to find its quota exceeded")
            sent, checks = _fetches_for_tp(c), exceeded()
            await c.wait_until(lambda: exceeded() >= checks + 3, what="three more fetch rounds while exceeded")
            assert follower.log.log_end_offset == 1
            assert _fetches_for_tp(c) == sent  # not even asked for while the quota is exceeded
            assert follower.rm.quotas.follower.rate() == follower.log.size_bytes
            clock.advance(3000)
            await c.wait_until(lambda: follower.log.log_end_offset == 2, what="second batch")
            checks = exceeded()  # 40000 B / 3 s once the second batch is recorded: exceeded again
            await c.wait_until(lambda: exceeded() >= checks + 3, what="three more fetch rounds while exceeded")
            assert follower.log.log_end_offset == 2
            # removing the throttle from the topic config lets it catch up at once
            follower.rm.update_config(TP[0], LogConfig.from_props({"follower.replication.throttled.replicas": ""}))
            await c.wait_until(lambda: follower.log.log_end_offset == 4, what="the rest once unthrottled")
        finally:
            await c.close()

    run(main())
