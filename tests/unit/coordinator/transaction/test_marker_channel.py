"""TransactionMarkerChannelManager against a fake BrokerChannel: markers grouped by partition leader, one request
in flight per leader, retries (retriable errors, lost connections, unknown leaders), deleted topics skipped,
cancellation by fencing errors, by the owner (coordinator epoch changed) and by emigration.

Requests and responses go through the real WriteTxnMarkers codec, so what is sent is what a leader would parse.
The manager runs on a ManualClock: its retry backoffs pass when a test moves the clock, never in real time.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Optional, Tuple

from broker.coordinator.transaction.marker_channel import TransactionMarkerChannelManager, metadata_leader_lookup
from broker.coordinator.transaction.metadata import PREPARE_COMMIT, TransactionMetadata
from broker.coordinator.transaction.state import PendingCompleteTxn
from broker.errors import ErrorCode as E
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.util.broker_channel import BrokerChannelError, BrokerNode
from broker.util.clock import ManualClock
from tests.unit.replica.harness import wait_until

TopicPartition = Tuple[str, int]
B1, B2 = BrokerNode(1, "h1", 9092), BrokerNode(2, "h2", 9092)


def pending(tid: str, *tps: TopicPartition, pid: int = 100, epoch: int = 3, commit: bool = True,
            txn_partition: int = 0, coordinator_epoch: int = 5) -> PendingCompleteTxn:
    txn = TransactionMetadata(tid, pid, -1, epoch, -1, 1000, PREPARE_COMMIT, set(tps))
    return PendingCompleteTxn(tid, txn_partition, coordinator_epoch, commit, pid, epoch, frozenset(tps), txn,
                              txn.prepare_complete(0))


class Owner:
    def __init__(self) -> None:
        self.current = True
        self.written: List[Tuple[str, TopicPartition]] = []
        self.completed: List[str] = []

    def is_current(self, p: PendingCompleteTxn) -> bool:
        return self.current

    def on_marker_written(self, p: PendingCompleteTxn, tp: TopicPartition) -> None:
        self.written.append((p.transactional_id, tp))

    def on_markers_complete(self, p: PendingCompleteTxn) -> None:
        self.completed.append(p.transactional_id)


class FakeChannel:
    """Answers WriteTxnMarkers with ``errors(broker, tp)`` per partition; ``fail(broker)`` True: connection lost."""

    def __init__(self) -> None:
        self.requests: List[Tuple[int, int, Any]] = []
        self.errors: Callable[[int, TopicPartition], int] = lambda b, tp: 0
        self.fail: Callable[[int], bool] = lambda b: False
        self.gate: Optional[asyncio.Event] = None

    async def send(self, node: BrokerNode, api_key: int, api_version: int, body: Any, timeout_ms: int) -> Any:
        assert api_key == ApiKey.WRITE_TXN_MARKERS
        frame = memoryview(proto.encode_request(api_key, api_version, 1, "coordinator", body))[4:]
        _, off = proto.decode_request_header(frame)
        request = proto.decode_request(api_key, api_version, frame, off)
        self.requests.append((node.broker_id, api_version, request))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail(node.broker_id):
            raise BrokerChannelError("connection lost")
        response = {"markers": [
            {"producer_id": m.producer_id, "topics": [
                {"name": t.name, "partitions": [{"partition_index": p,
                                                 "error_code": self.errors(node.broker_id, (t.name, p))}
                                                for p in t.partition_indexes]} for t in m.topics]}
            for m in request.markers]}
        data = b"".join(proto.encode_response(api_key, api_version, 1, response))
        return proto.decode_response(api_key, api_version, data)

    def disconnect(self, broker_id: int) -> None:
        pass

    async def close(self) -> None:
        pass


def run(scenario: Callable[..., Any], leaders: Dict[TopicPartition, Tuple[bool, Optional[BrokerNode]]]) -> None:
    async def main() -> None:
        channel, owner = FakeChannel(), Owner()
        mgr = TransactionMarkerChannelManager(channel, lambda t, p: leaders.get((t, p), (False, None)),
                                              request_version=1, retry_backoff_ms=10, clock=ManualClock())
        mgr.start(owner)
        try:
            await scenario(mgr, channel, owner)
        finally:
            await mgr.stop()
    asyncio.run(main())


async def until(mgr: TransactionMarkerChannelManager, cond: Callable[[], bool]) -> None:
    """Wait for ``cond`` on loop turns, moving the manager's ManualClock to its next backoff when nothing else
    can happen (fails when ``cond`` never holds)."""
    assert isinstance(mgr.clock, ManualClock)
    await wait_until(cond, mgr.clock, max_ms=5_000)


async def settled(mgr: TransactionMarkerChannelManager) -> None:
    """Nothing queued and no request in flight: nothing more can be sent or completed."""
    await until(mgr, lambda: mgr.pending_count() == 0 and not mgr._sends)


def sent_partitions(request: Any) -> Dict[int, List[TopicPartition]]:
    return {m.producer_id: sorted((t.name, p) for t in m.topics for p in t.partition_indexes) for m in request.markers}


def test_markers_go_to_each_partition_leader_then_the_owner_completes() -> None:
    leaders = {("a", 0): (True, B1), ("a", 1): (True, B2), ("b", 0): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        mgr.add_markers(pending("tx", ("a", 0), ("a", 1), ("b", 0)))
        await until(mgr, lambda: owner.completed == ["tx"])
        by_broker = {b: r for b, _, r in channel.requests}
        assert set(by_broker) == {1, 2} and len(channel.requests) == 2
        assert sent_partitions(by_broker[1]) == {100: [("a", 0), ("b", 0)]}
        assert sent_partitions(by_broker[2]) == {100: [("a", 1)]}
        m = by_broker[1].markers[0]
        assert (m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (3, True, 5)
        assert all(v == 1 for _, v, _ in channel.requests)
        assert sorted(tp for _, tp in owner.written) == [("a", 0), ("a", 1), ("b", 0)]
        assert mgr.pending_count() == 0
    run(scenario, leaders)


def test_transactions_for_one_leader_share_a_request_and_one_request_is_in_flight_per_leader() -> None:
    leaders = {("a", 0): (True, B1), ("a", 1): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        channel.gate = asyncio.Event()
        mgr.add_markers(pending("t1", ("a", 0), pid=1))
        await until(mgr, lambda: len(channel.requests) == 1)
        dispatches: List[Optional[float]] = []
        real = mgr._dispatch

        def counted() -> Optional[float]:
            dispatches.append(real())
            return dispatches[-1]
        mgr._dispatch = counted
        mgr.add_markers(pending("t2", ("a", 0), pid=2, commit=False))
        mgr.add_markers(pending("t3", ("a", 1), pid=3))
        await until(mgr, lambda: len(dispatches) == 1)    # the sender saw them
        for _ in range(50):                          # let every ready callback of the loop run, many times over
            await asyncio.sleep(0)
        assert len(channel.requests) == 1            # broker 1 is busy
        assert dispatches == [None]                  # and the sender waits for it without a timer: no spinning
        assert mgr.clock.next_deadline_ms() is None
        channel.gate.set()
        await until(mgr, lambda: sorted(owner.completed) == ["t1", "t2", "t3"])
        assert len(channel.requests) == 2
        second = channel.requests[1][2]
        assert sent_partitions(second) == {2: [("a", 0)], 3: [("a", 1)]}
        assert [m.transaction_result for m in second.markers] == [False, True]
    run(scenario, leaders)


def test_retriable_errors_are_sent_again_to_the_new_leader() -> None:
    leaders = {("a", 0): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        def errors(broker: int, tp: TopicPartition) -> int:
            if broker == 1:
                leaders[tp] = (True, B2)             # the leader moved
                return E.NOT_LEADER_OR_FOLLOWER
            return 0
        channel.errors = errors
        mgr.add_markers(pending("tx", ("a", 0)))
        await until(mgr, lambda: owner.completed == ["tx"])
        assert [b for b, _, _ in channel.requests] == [1, 2]
    run(scenario, leaders)


def test_unknown_leader_waits_for_metadata_and_deleted_topics_need_no_marker() -> None:
    leaders: Dict[TopicPartition, Tuple[bool, Optional[BrokerNode]]] = {("a", 0): (True, None)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        started = mgr.clock.mono_ms()
        mgr.add_markers(pending("tx", ("a", 0), ("gone", 0)))
        dispatches: List[Optional[float]] = []
        real = mgr._dispatch

        def counted() -> Optional[float]:
            dispatches.append(real())
            return dispatches[-1]
        mgr._dispatch = counted
        await until(mgr, lambda: ("tx", ("gone", 0)) in owner.written)   # deleted: no longer waits for a marker
        await until(mgr, lambda: len(dispatches) >= 3)    # the unknown leader looked up again after each backoff
        assert mgr.clock.mono_ms() - started >= 2 * 10     # of retry_backoff_ms, on the clock
        assert channel.requests == [] and owner.completed == []
        leaders[("a", 0)] = (True, B1)
        await until(mgr, lambda: owner.completed == ["tx"])
        assert sent_partitions(channel.requests[0][2]) == {100: [("a", 0)]}
    run(scenario, leaders)


def test_a_lost_connection_is_retried() -> None:
    leaders = {("a", 0): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        attempts: List[int] = []

        def fail(broker: int) -> bool:
            attempts.append(broker)
            return len(attempts) < 3
        channel.fail = fail
        mgr.add_markers(pending("tx", ("a", 0)))
        await until(mgr, lambda: owner.completed == ["tx"])
        assert len(channel.requests) == 3
    run(scenario, leaders)


def test_fencing_errors_cancel_the_transactions_markers() -> None:
    leaders = {("a", 0): (True, B1), ("a", 1): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        channel.errors = lambda b, tp: E.INVALID_PRODUCER_EPOCH if tp == ("a", 1) else 0
        mgr.add_markers(pending("tx", ("a", 0), ("a", 1)))
        await settled(mgr)
        assert owner.completed == [] and len(channel.requests) == 1
    run(scenario, leaders)


def test_unexpected_errors_cancel_without_completing() -> None:
    leaders = {("a", 0): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        channel.errors = lambda b, tp: E.CORRUPT_MESSAGE
        mgr.add_markers(pending("tx", ("a", 0)))
        await settled(mgr)
        assert owner.completed == [] and owner.written == []
    run(scenario, leaders)


def test_old_message_format_partitions_are_skipped() -> None:
    leaders = {("a", 0): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        channel.errors = lambda b, tp: E.UNSUPPORTED_FOR_MESSAGE_FORMAT
        mgr.add_markers(pending("tx", ("a", 0)))
        await until(mgr, lambda: owner.completed == ["tx"])
    run(scenario, leaders)


def test_markers_the_owner_no_longer_wants_are_dropped() -> None:
    leaders = {("a", 0): (True, B1)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        owner.current = False
        mgr.add_markers(pending("tx", ("a", 0)))
        await until(mgr, lambda: mgr.pending_count() == 0)
        assert channel.requests == [] and owner.completed == []
        # and when the answer arrives after the coordinator epoch changed
        owner.current = True
        channel.gate = asyncio.Event()
        mgr.add_markers(pending("t2", ("a", 0)))
        await until(mgr, lambda: len(channel.requests) == 1)
        owner.current = False
        channel.gate.set()
        await settled(mgr)
        assert owner.completed == [] and owner.written == []
    run(scenario, leaders)


def test_emigration_drops_the_partitions_markers() -> None:
    leaders = {("a", 0): (True, None)}

    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        mgr.add_markers(pending("t1", ("a", 0), txn_partition=1))
        mgr.add_markers(pending("t2", ("a", 0), txn_partition=2))
        mgr.remove_markers_for_txn_partition(1)
        assert mgr.pending_count() == 1
        leaders[("a", 0)] = (True, B1)
        await until(mgr, lambda: owner.completed == ["t2"])
        assert [sorted(sent_partitions(r)) for _, _, r in channel.requests] == [[100]]
    run(scenario, leaders)


def test_an_empty_transaction_completes_at_once() -> None:
    async def scenario(mgr: Any, channel: FakeChannel, owner: Owner) -> None:
        mgr.add_markers(pending("tx"))
        assert owner.completed == ["tx"] and channel.requests == []
    run(scenario, {})


def test_metadata_leader_lookup() -> None:
    from broker.cluster.metadata_cache import BrokerMeta, MetadataCache, PartitionMeta, TopicMeta
    from broker.config.kafka_config import Endpoint
    import uuid
    md = MetadataCache(0)
    md.set_brokers({1: BrokerMeta(1, (Endpoint("INTERNAL", "h1", 9093, "PLAINTEXT"),))})
    md.put_topic(TopicMeta("t", uuid.uuid4(), {0: PartitionMeta(0, 1, 0, (1,), (1,)),
                                               1: PartitionMeta(1, -1, 0, (1,), ()),
                                               2: PartitionMeta(2, 7, 0, (7,), (7,))}))

    def node(b: int) -> Optional[BrokerNode]:
        ep = md.endpoint_of(b, "INTERNAL")
        return BrokerNode(b, ep.host, ep.port) if ep is not None else None
    lookup = metadata_leader_lookup(md, node)
    assert lookup("t", 0) == (True, BrokerNode(1, "h1", 9093))
    assert lookup("t", 1) == (True, None)       # no leader
    assert lookup("t", 2) == (True, None)       # leader not alive
    assert lookup("t", 3) == (False, None)      # no such partition
    assert lookup("u", 0) == (False, None)
