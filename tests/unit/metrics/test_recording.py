"""Where the broker records: the dispatcher (RequestMetrics, queue time from the connection's read), the
ReplicaManager (bytes/messages in as leader, bytes out to consumers, committed ISR changes) and LogSegment.flush
(LogFlushStats). Real dispatcher, real ReplicaManager and logs (in-process fake cluster), no sockets."""
from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace
from typing import Any

import pytest

from broker.api import dispatcher as dispatcher_module
from broker.api.dispatcher import ConnectionContext, RequestDispatcher
from broker.api.registry import ApiRegistry
from broker.errors import ErrorCode
from broker.stats import LOG_FLUSH_STATS, BrokerTopicStats, RequestMetrics
from broker.protocol.api import encode_request
from broker.protocol.api_keys import ApiKey
from broker.storage.config import LogConfig
from broker.storage.log import Log
from broker.util.clock import ManualClock

from tests.unit.replica.harness import TP, FakeCluster, records, state, wait_until


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _frame(api_key: int, version: int, body: dict) -> memoryview:
    return memoryview(encode_request(api_key, version, 7, "client", body))[4:]


def test_dispatcher_records_each_answered_request_with_its_queue_time(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ApiRegistry()
    clock = ManualClock()  # the dispatcher's monotonic nanoseconds, moved by the handler
    monkeypatch.setattr(dispatcher_module, "time", SimpleNamespace(monotonic_ns=lambda: clock.mono_ms() * 1_000_000))

    async def metadata(ctx: Any, request: Any) -> dict:
        await asyncio.sleep(0)
        clock.advance(10)  # the handler takes 10 ms
        return {"brokers": [], "topics": []}

    async def produce_acks0(ctx: Any, request: Any) -> None:
        return None  # acks=0: no response, still a request served

    registry.register(ApiKey.METADATA, "METADATA", 0, 12, metadata)
    registry.register(ApiKey.PRODUCE, "PRODUCE", 3, 11, produce_acks0)
    metrics = RequestMetrics()
    dispatcher = RequestDispatcher(registry, metrics=metrics)
    conn = ConnectionContext("c", "127.0.0.1", 1, "PLAINTEXT")

    async def main() -> None:
        conn.received_ns = clock.mono_ms() * 1_000_000 - 5_000_000  # read off the socket 5 ms ago
        parts = await dispatcher.handle(conn, _frame(ApiKey.METADATA, 12, {"topics": None}))
        assert isinstance(parts, list)
        conn.received_ns = clock.mono_ms() * 1_000_000
        assert await dispatcher.handle(conn, _frame(ApiKey.PRODUCE, 9, {"acks": 0, "timeout_ms": 1,
                                                                        "topic_data": []})) is None

    run(main())
    entries = dict(metrics.entries())
    md = entries[int(ApiKey.METADATA)]
    assert md.versions() == [(12, 1)]
    queue_ms, total_ms = md.queue_time_ms.snapshot().sum, md.total_time_ms.snapshot().sum
    assert queue_ms >= 5.0  # from the read, not from the handler start
    assert total_ms >= queue_ms + 9.0  # includes the handler's 10 ms
    assert entries[int(ApiKey.PRODUCE)].versions() == [(9, 1)]


def test_dispatcher_without_metrics_records_nothing() -> None:
    registry = ApiRegistry()

    async def metadata(ctx: Any, request: Any) -> dict:
        return {"brokers": [], "topics": []}

    registry.register(ApiKey.METADATA, "METADATA", 0, 12, metadata)
    dispatcher = RequestDispatcher(registry)
    conn = ConnectionContext("c", "127.0.0.1", 1, "PLAINTEXT")
    assert isinstance(run(dispatcher.handle(conn, _frame(ApiKey.METADATA, 12, {"topics": None}))), list)


def test_leader_appends_count_in_and_consumer_reads_count_out_followers_do_not(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = c.start(1), c.start(2)
            leader.rm.topic_stats = ls = BrokerTopicStats()
            follower.rm.topic_stats = fs = BrokerTopicStats()
            await c.leader_and_isr(1, state(1, 0, [1], [1, 2]))
            await c.leader_and_isr(2, state(1, 0, [1], [1, 2]))
            batch = records(b"a", b"b", b"c")
            assert (await leader.rm.append_records(1, {TP: batch}))[TP].error_code == 0
            # The follower replicates and joins the ISR (the fake controller commits the expansion).
            await wait_until(lambda: leader.rm.get_partition(TP).isr == (1, 2) and leader.log.high_watermark == 3)
            assert leader.rm.isr_expands == 1 and leader.rm.isr_shrinks == 0
            assert (ls.all_topics.bytes_in, ls.all_topics.messages_in) == (len(batch), 3)
            assert ls.topic(TP[0]).bytes_in == len(batch)
            assert ls.all_topics.bytes_out == 0  # the follower's fetches are replication, not BytesOut
            assert (fs.all_topics.bytes_in, fs.all_topics.messages_in) == (0, 0)  # follower appends do not count
            read = await leader.rm.fetch_messages([(TP, 0, 1 << 20)], 1 << 20, 1, 0)
            assert read[TP].size == len(batch)
            assert ls.all_topics.bytes_out == len(batch) and ls.topic(TP[0]).bytes_out == len(batch)
            # The follower stops fetching: after replica.lag.time.max.ms it leaves the ISR.
            await c.crash(2)
            await leader.rm.append_records(1, {TP: records(b"d")})  # it falls behind the LEO
            c.clock.advance(30001)
            assert leader.rm.maybe_shrink_isr() == [TP]
            await leader.rm.get_partition(TP).wait_alter_partition_idle()
            assert leader.rm.isr_shrinks == 1 and leader.rm.isr_expands == 1
        finally:
            await c.close()

    run(main())


def test_a_rejected_isr_change_is_not_counted(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            b.apm.error = ErrorCode.INELIGIBLE_REPLICA  # the controller applied nothing
            await c.leader_and_isr(1, state(1, 0, [1, 2, 3]))
            c.clock.advance(30001)
            assert b.rm.maybe_shrink_isr() == [TP]
            await b.rm.get_partition(TP).wait_alter_partition_idle()
            assert b.rm.get_partition(TP).isr == (1, 2, 3)
            assert b.rm.isr_shrinks == 0
        finally:
            await c.close()

    run(main())


def test_segment_flushes_are_timed(tmp_path) -> None:
    log = Log.open(os.path.join(str(tmp_path), "t-0"), LogConfig())
    try:
        before = LOG_FLUSH_STATS.snapshot().count
        log.append_as_leader(records(b"x"), 0)
        log.flush()
        after = LOG_FLUSH_STATS.snapshot()
        assert after.count == before + 1
        log.flush()  # nothing new to flush: no segment fsync
        assert LOG_FLUSH_STATS.snapshot().count == before + 1
    finally:
        log.close()
