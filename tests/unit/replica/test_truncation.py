"""KIP-101 / KIP-279 truncation: leader-epoch based truncation leaves byte-identical logs.

Each scenario runs twice: at IBP 3.9 (divergence reported in the Fetch response, KIP-320 style)
and at IBP 2.6 (a separate OffsetForLeaderEpoch round trip while Truncating).
"""
from __future__ import annotations

import asyncio

import pytest

from broker.replica.config import ReplicaConfig
from broker.replica.manager import _topic_id_str
from broker.storage.checkpoints import OffsetCheckpointFile
from broker.storage.log import Log
from broker.storage.log_manager import LogManager

from .harness import TOPIC_ID, TP, FakeCluster, drive, read_all_bytes, records, state, values_of

IBPS = ["3.9", "2.6"]


def cluster(tmp_path, ibp: str) -> FakeCluster:
    return FakeCluster(str(tmp_path), config=ReplicaConfig(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=10,
                                                           inter_broker_protocol_version=ibp))


def api_keys_sent(c: FakeCluster, src: int, since: int = 0) -> set:
    return {k for s, _, k, _ in c.requests[since:] if s == src}


@pytest.mark.parametrize("ibp", IBPS)
def test_kip101_scenario1_restart_with_stale_hw_keeps_committed_record(tmp_path, ibp) -> None:
    """A follower restarts with an HW checkpoint behind a committed record, then becomes leader.

    Truncating to the HW (pre KIP-101) would lose m2, which the leader had acknowledged.
    """
    async def main() -> None:
        c = cluster(tmp_path, ibp)
        try:
            a, b = c.start(1), c.start(2)
            for x in (1, 2):
                await c.leader_and_isr(x, state(2, 0, [1, 2], [1, 2]))
            for v in (b"m1", b"m2"):
                assert (await drive(b.rm, b.rm.append_records(-1, {TP: records(v)}, timeout_ms=5000)))[TP].error_code == 0
            assert b.log.high_watermark == 2 and a.log.log_end_offset == 2
            await c.crash(1)
            # The follower's HW checkpoint lags: it only knew HW = 1.
            OffsetCheckpointFile(str(tmp_path / "broker-1" / "replication-offset-checkpoint")).write({TP: 1})
            a = c.start(1)
            assert a.log_manager.get_log(TP).high_watermark == 1
            mark = len(c.requests)
            await c.leader_and_isr(1, state(2, 0, [1, 2], [1, 2]))
            # It learns the leader's HW (2) from a fetch response: truncation (if any) happened before.
            await c.wait_until(lambda: a.log.high_watermark == 2, what="follower HW from the leader")
            assert a.log.log_end_offset == 2
            if ibp == "2.6":
                assert 23 in api_keys_sent(c, 1, mark)  # OffsetForLeaderEpoch
            else:
                assert 23 not in api_keys_sent(c, 1, mark)
            # The leader dies; the follower is elected and takes a new record.
            await c.crash(2)
            await c.leader_and_isr(1, state(1, 1, [1], [1, 2]))
            assert (await drive(a.rm, a.rm.append_records(1, {TP: records(b"m3")})))[TP].error_code == 0
            b = c.start(2)
            await c.leader_and_isr(2, state(1, 1, [1], [1, 2]))
            await c.wait_until(lambda: b.log.log_end_offset == 3, what="old leader caught up")
            assert values_of(a.log) == values_of(b.log) == [b"m1", b"m2", b"m3"]
            assert read_all_bytes(a.log) == read_all_bytes(b.log)
            assert a.log.leader_epoch_cache.entries == b.log.leader_epoch_cache.entries == [(0, 0), (1, 2)]
        finally:
            await c.close()

    asyncio.run(main())


@pytest.mark.parametrize("ibp", IBPS)
def test_kip101_scenario2_divergent_logs_after_multiple_failures(tmp_path, ibp) -> None:
    """Leader A wrote m2 that follower B never got; both crash; B comes back first, is elected and writes m3
    at the same offset. When A returns as follower its m2 must go, replaced by m3."""
    async def main() -> None:
        c = cluster(tmp_path, ibp)
        try:
            a, b = c.start(1), c.start(2)
            for x in (1, 2):
                await c.leader_and_isr(x, state(1, 0, [1, 2], [1, 2]))
            assert (await drive(a.rm, a.rm.append_records(-1, {TP: records(b"m1")}, timeout_ms=5000)))[TP].error_code == 0
            await c.crash(2)
            assert (await drive(a.rm, a.rm.append_records(1, {TP: records(b"m2")})))[TP].error_code == 0
            assert a.log.log_end_offset == 2
            await c.crash(1)
            b = c.start(2)
            await c.leader_and_isr(2, state(2, 1, [2], [1, 2]))
            assert (await drive(b.rm, b.rm.append_records(1, {TP: records(b"m3")})))[TP].error_code == 0
            a = c.start(1)
            mark = len(c.requests)
            await c.leader_and_isr(1, state(2, 1, [2], [1, 2]))
            await c.wait_until(lambda: read_all_bytes(a.log) == read_all_bytes(b.log), what="identical logs")
            assert values_of(a.log) == values_of(b.log) == [b"m1", b"m3"]
            assert a.log.leader_epoch_cache.entries == b.log.leader_epoch_cache.entries == [(0, 0), (1, 1)]
            if ibp == "2.6":
                assert 23 in api_keys_sent(c, 1, mark)
            else:
                assert 23 not in api_keys_sent(c, 1, mark)
                # The leader reported the divergence in a fetch response.
        finally:
            await c.close()

    asyncio.run(main())


@pytest.mark.parametrize("ibp", IBPS)
def test_follower_with_an_epoch_unknown_to_the_leader_truncates_in_steps(tmp_path, ibp) -> None:
    """KIP-279: the follower's latest epoch (2) is unknown to the leader, whose answer names epoch 1, which the
    follower in turn does not know: it steps back to its epoch 0 and asks (or fetches) again."""
    async def main() -> None:
        c = cluster(tmp_path, ibp)
        try:
            a, b = c.start(1), c.start(2)
            tid = _topic_id_str(TOPIC_ID)
            def fill(lm: LogManager, epochs: list) -> Log:  # on the partition's owner, as the broker's appends
                plog = lm.get_or_create_log("t", 0, c.log_config, tid)
                for values, epoch in epochs:
                    plog.append_as_leader(records(*values), epoch)
                return plog

            la = a.log_manager.owners.call(TP, lambda: fill(a.log_manager, [((b"a",), 0), ((b"x", b"y"), 2)]))
            lb = b.log_manager.owners.call(TP, lambda: fill(b.log_manager, [((b"a",), 0), ((b"b",), 1)]))
            await c.leader_and_isr(2, state(2, 3, [2], [1, 2]))
            await drive(b.rm, b.rm.append_records(1, {TP: records(b"c")}))
            assert lb.leader_epoch_cache.entries == [(0, 0), (1, 1), (3, 2)]
            await c.leader_and_isr(1, state(2, 3, [2], [1, 2]))
            await c.wait_until(lambda: read_all_bytes(la) == read_all_bytes(lb), what="identical logs")
            assert values_of(la) == [b"a", b"b", b"c"]
            assert la.leader_epoch_cache.entries == [(0, 0), (1, 1), (3, 2)]
        finally:
            await c.close()

    asyncio.run(main())
