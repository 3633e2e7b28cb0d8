"""TransactionCoordinator (the asyncio side) with an in-memory ``__transaction_state`` and a fake broker channel:
loading on leadership (COORDINATOR_LOAD_IN_PROGRESS meanwhile, NOT_COORDINATOR after resigning), the coordinator
epoch from the leader epoch, markers then CompleteCommit/CompleteAbort, markers resumed after a load, a write that
ends after emigration, completion retried while the log is unavailable, timeouts and expiration run by the service.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Tuple


from broker.util.java_hash import partition_for
from broker.coordinator.transaction import records as rec
from broker.coordinator.transaction.marker_channel import TransactionMarkerChannelManager
from broker.coordinator.transaction.service import TransactionCoordinator
from broker.coordinator.transaction.state import TransactionConfig, TransactionCoordinatorState
from broker.errors import ErrorCode as E, error_for_code
from broker.util.broker_channel import BrokerNode
from tests.unit.coordinator.transaction.test_marker_channel import FakeChannel
from tests.unit.replica.harness import wait_until
from broker.util.clock import ManualClock

NUM_PARTITIONS = 3
TID = "tx"
P = partition_for(TID, NUM_PARTITIONS)
B0 = BrokerNode(0, "self", 9092)


class FakeLog:
    """``__transaction_state`` partitions in memory; appends can fail or wait on a gate."""

    def __init__(self) -> None:
        self.partitions: Dict[int, List[Tuple[int, bytes, Optional[bytes]]]] = {}
        self.fail_next: List[int] = []
        self.append_gate: Optional[asyncio.Event] = None
        self.parked = 0  # appends that reached a closed append_gate
        self.read_gate: Optional[asyncio.Event] = None
        self.leader = True

    async def append(self, partition: int, records: List[Tuple[bytes, Optional[bytes]]],
                     base_sequence: int = -1) -> int:
        if self.append_gate is not None:
            self.parked += 1
            await self.append_gate.wait()
        if self.fail_next:
            raise error_for_code(self.fail_next.pop(0))("failed")
        log = self.partitions.setdefault(partition, [])
        for k, v in records:
            log.append((len(log), k, v))
        return len(log) - 1

    async def read_all(self, partition: int) -> List[Tuple[int, bytes, Optional[bytes]]]:
        if self.read_gate is not None:
            await self.read_gate.wait()
        return list(self.partitions.get(partition, []))

    async def load(self, partition: int, on_batch: Any, buffer_bytes: int, on_end: Any = None) -> Tuple[int, int]:
        """Each record as a batch of its own, as OffsetsTopicIO.load hands them over."""
        records = await self.read_all(partition)
        for offset, k, v in records:
            on_batch((SimpleNamespace(offset=offset, key=k, value=v),), -1, None)
        if on_end is not None:
            on_end()
        return len(records), len(records)

    def is_leader(self, partition: int) -> bool:
        return self.leader

    def states(self, partition: int = P) -> List[Tuple[str, Optional[int]]]:
        out = []
        for _, k, v in self.partitions.get(partition, []):
            d = rec.decode_value(v)
            out.append((rec.decode_key(k), None if d is None else d.transaction_status))
        return out


async def logged_and_applied(tc: TransactionCoordinator, log: "FakeLog", partition: int, tid: str,
                             status: int) -> None:
    """Wait until the log holds ``status`` for ``tid`` and the coordinator has applied it: the coordinator
    applies a write when the append's answer reaches it, a moment after the log has it."""
    assert isinstance(tc.clock, ManualClock)
    await wait_until(lambda: log.states(partition)[-1] == (tid, status), tc.clock, max_ms=5_000)
    txn = tc.shards[partition].transactions[tid]
    await wait_until(lambda: not txn.pending_transition_in_progress, tc.clock, max_ms=5_000)


class Config:
    def __init__(self, **values: Any) -> None:
        self.values = {"transaction.state.log.num.partitions": NUM_PARTITIONS, **values}

    def get(self, key: str) -> Any:
        return self.values[key]


class Ids:
    def __init__(self) -> None:
        self.next = 1000
        self.fail = False

    async def generate(self) -> int:
        if self.fail:
            raise RuntimeError("no block yet")
        self.next += 1
        return self.next - 1


class Topics:
    def __init__(self) -> None:
        self.created: List[Tuple[str, int, int, Dict[str, str]]] = []

    async def ensure_internal_topic(self, name: str, n: int, rf: int, configs: Dict[str, str]) -> int:
        self.created.append((name, n, rf, configs))
        return 0


class Env:
    def __init__(self, coordinator: TransactionCoordinator, log: FakeLog, channel: FakeChannel,
                 epochs: Dict[int, int], ids: Ids, topics: Topics, clock: ManualClock) -> None:
        self.tc, self.log, self.channel, self.epochs, self.ids, self.topics = \
            coordinator, log, channel, epochs, ids, topics
        #: the coordinator's and the marker sender's clock: timeouts, intervals and backoffs pass when it moves
        self.clock = clock

    async def until(self, cond: Callable[[], bool]) -> None:
        """Wait for ``cond`` on loop turns, moving the clock to its next timer when nothing else can happen."""
        await wait_until(cond, self.clock, max_ms=5_000)

    async def lead(self, partition: int = P, epoch: int = 5) -> None:
        self.epochs[partition] = epoch
        await self.tc.on_become_leader(rec.TRANSACTION_STATE_TOPIC_NAME, partition)
        await self.tc.wait_loaded()

    async def completed(self, status: int) -> None:
        await logged_and_applied(self.tc, self.log, P, TID, status)

    async def start_txn(self, *tps: Tuple[str, int]) -> Tuple[int, int]:
        err, pid, epoch = await self.tc.init_producer_id(TID, 60000, None)
        assert err == 0
        assert await self.tc.add_partitions(TID, pid, epoch, set(tps)) == 0
        return pid, epoch


def run(scenario: Callable[[Env], Any], **config: Any) -> None:
    async def main() -> None:
        log, channel, epochs, ids, topics, clock = FakeLog(), FakeChannel(), {}, Ids(), Topics(), ManualClock()
        markers = TransactionMarkerChannelManager(channel, lambda t, p: (True, B0), retry_backoff_ms=10, clock=clock)
        tc = TransactionCoordinator(Config(**config), log, topics, ids, lambda p: epochs.get(p, -1), markers,
                                    clock=clock)
        tc.start()
        try:
            await scenario(Env(tc, log, channel, epochs, ids, topics, clock))
        finally:
            await tc.stop()
    asyncio.run(main())


def test_not_coordinator_before_leadership_and_after_resigning() -> None:
    async def scenario(env: Env) -> None:
        assert await env.tc.init_producer_id(TID, 1000, None) == (E.NOT_COORDINATOR, -1, -1)
        await env.lead()
        assert (await env.tc.init_producer_id(TID, 1000, None))[0] == 0
        await env.tc.on_resign(rec.TRANSACTION_STATE_TOPIC_NAME, P)
        assert await env.tc.init_producer_id(TID, 1000, None) == (E.NOT_COORDINATOR, -1, -1)
        assert env.tc.describe_transaction(TID)["error_code"] == E.NOT_COORDINATOR
        assert env.tc.verify_partitions(TID, 1, 0, {("a", 0)}) == {("a", 0): E.NOT_COORDINATOR}
    run(scenario)


def test_load_in_progress_until_the_partition_is_replayed() -> None:
    async def scenario(env: Env) -> None:
        env.log.read_gate = asyncio.Event()
        env.epochs[P] = 2
        await env.tc.on_become_leader(rec.TRANSACTION_STATE_TOPIC_NAME, P)
        assert await env.tc.init_producer_id(TID, 1000, None) == (E.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
        assert await env.tc.end_transaction(TID, 1, 0, True) == E.COORDINATOR_LOAD_IN_PROGRESS
        assert env.tc.list_transactions(set(), set())[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        env.log.read_gate.set()
        await env.tc.wait_loaded()
        assert (await env.tc.init_producer_id(TID, 1000, None))[0] == 0
        assert env.tc.list_transactions(set(), set()) == (0, [], [
            {"transactional_id": TID, "producer_id": 1000, "transaction_state": "Empty"}])
    run(scenario)


def test_checks_before_the_lookup() -> None:
    async def scenario(env: Env) -> None:
        assert await env.tc.init_producer_id("", 1000, None) == (E.INVALID_REQUEST, -1, -1)
        assert await env.tc.init_producer_id(TID, 0, None) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
        assert await env.tc.init_producer_id(TID, 5001, None) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
        assert await env.tc.add_partitions("", 1, 0, {("a", 0)}) == E.INVALID_REQUEST
        assert await env.tc.end_transaction("", 1, 0, True) == E.INVALID_REQUEST
        assert env.tc.describe_transaction("")["error_code"] == E.INVALID_REQUEST
    run(scenario, **{"transaction.max.timeout.ms": 5000})


def test_producer_id_allocation_failure_is_load_in_progress() -> None:
    async def scenario(env: Env) -> None:
        await env.lead()
        env.ids.fail = True
        assert await env.tc.init_producer_id(TID, 1000, None) == (E.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    run(scenario)


def test_commit_sends_markers_at_the_coordinator_epoch_then_logs_complete() -> None:
    async def scenario(env: Env) -> None:
        await env.lead(epoch=7)
        pid, epoch = await env.start_txn(("a", 0), ("b", 1))
        assert await env.tc.end_transaction(TID, pid, epoch, True) == 0
        await env.completed(4)                                          # CompleteCommit
        assert [s for _, s in env.log.states()] == [0, 1, 2, 4]
        [(_, version, request)] = env.channel.requests
        m = request.markers[0]
        assert (version, m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == \
            (1, pid, epoch, True, 7)
        assert env.tc.describe_transaction(TID)["transaction_state"] == "CompleteCommit"
        assert await env.tc.end_transaction(TID, pid, epoch, True) == 0   # retried: answered as done
    run(scenario)


def test_load_resumes_markers_of_a_prepared_transaction() -> None:
    async def scenario(env: Env) -> None:
        # what a previous coordinator left: PrepareAbort in the log, no CompleteAbort
        state = TransactionCoordinatorState(P, 1, TransactionConfig())
        out = state.init_producer_id(0, TID, 60000, None, new_producer_id=77)
        records = list(out.records)
        state.replay_written(out.records, 0, -1)
        out = state.add_partitions(0, TID, 77, 0, {("a", 0)})
        records += out.records
        state.replay_written(out.records, 1, -1)
        out = state.end_transaction(0, TID, 77, 0, False)
        records += out.records
        env.log.partitions[P] = [(i, k, v) for i, (k, v) in enumerate(records)]
        await env.lead(epoch=9)
        await env.until(lambda: env.log.states()[-1] == (TID, 5))          # CompleteAbort
        m = env.channel.requests[0][2].markers[0]
        assert (m.producer_id, m.transaction_result, m.coordinator_epoch) == (77, False, 9)
    run(scenario)


def test_a_write_that_ends_after_emigration_is_not_coordinator() -> None:
    async def scenario(env: Env) -> None:
        await env.lead()
        pid, epoch = await env.start_txn(("a", 0))
        env.log.append_gate = asyncio.Event()
        end = asyncio.ensure_future(env.tc.end_transaction(TID, pid, epoch, True))
        await env.until(lambda: env.log.parked == 1)                       # the PrepareCommit is being appended
        await env.tc.on_resign(rec.TRANSACTION_STATE_TOPIC_NAME, P)
        env.log.append_gate.set()
        assert await end == E.NOT_COORDINATOR
        # no markers from a former coordinator: none queued (a queued entry stays until its answer), none sent
        assert env.tc.markers.pending_count() == 0 and env.channel.requests == []
    run(scenario)


def test_a_write_that_ends_after_a_reload_is_not_coordinator_and_the_reload_sends_the_markers() -> None:
    async def scenario(env: Env) -> None:
        await env.lead(epoch=5)
        pid, epoch = await env.start_txn(("a", 0))
        env.log.append_gate = asyncio.Event()
        end = asyncio.ensure_future(env.tc.end_transaction(TID, pid, epoch, True))
        await env.until(lambda: env.log.parked == 1)                       # the PrepareCommit is being appended
        env.epochs[P] = 6
        await env.tc.on_become_leader(rec.TRANSACTION_STATE_TOPIC_NAME, P)   # reload at a new epoch
        env.log.append_gate.set()
        assert await end in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS)
        await env.tc.wait_loaded()
        # the PrepareCommit did reach the log: the new coordinator completes it with its own epoch
        await env.until(lambda: env.log.states()[-1] == (TID, 4))
        assert [r.markers[0].coordinator_epoch for _, _, r in env.channel.requests] == [6]
    run(scenario)


def test_completion_is_retried_while_the_log_is_unavailable() -> None:
    async def scenario(env: Env) -> None:
        await env.lead()
        pid, epoch = await env.start_txn(("a", 0))
        env.channel.gate = asyncio.Event()
        assert await env.tc.end_transaction(TID, pid, epoch, False) == 0
        env.log.fail_next = [E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT]   # both COORDINATOR_NOT_AVAILABLE
        env.channel.gate.set()
        await env.completed(5)
        assert env.log.fail_next == []
        assert await env.tc.init_producer_id(TID, 60000, None) == (0, pid, epoch + 1)
    run(scenario)


def test_timed_out_transactions_are_aborted_by_the_service() -> None:
    async def scenario(env: Env) -> None:
        clock = env.clock
        await env.lead()
        err, pid, epoch = await env.tc.init_producer_id(TID, 1, None)
        await env.tc.add_partitions(TID, pid, epoch, {("a", 0)})
        await env.tc.abort_timed_out_transactions()
        assert env.log.states()[-1] == (TID, 1)                        # Ongoing: its 1 ms has not passed
        clock.advance(2)
        await env.tc.abort_timed_out_transactions()
        await env.completed(5)
        assert env.channel.requests[0][2].markers[0].producer_epoch == epoch + 1
        assert await env.tc.end_transaction(TID, pid, epoch, False) == E.PRODUCER_FENCED
    run(scenario)


def test_idle_transactional_ids_expire() -> None:
    async def scenario(env: Env) -> None:
        clock = env.clock
        await env.lead()
        await env.tc.init_producer_id(TID, 1000, None)
        await env.tc.expire_transactional_ids()
        assert env.log.states()[-1] == (TID, 0)                        # Empty: not idle for 1 ms yet
        clock.advance(2)
        await env.tc.expire_transactional_ids()
        assert env.log.states()[-1] == (TID, None)                     # tombstone
        assert env.tc.describe_transaction(TID)["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    run(scenario, **{"transactional.id.expiration.ms": 1})


def test_periodic_abort_runs_on_its_interval() -> None:
    async def scenario(env: Env) -> None:
        await env.lead()
        err, pid, epoch = await env.tc.init_producer_id(TID, 1, None)
        await env.tc.add_partitions(TID, pid, epoch, {("a", 0)})
        await env.until(lambda: env.log.states()[-1] == (TID, 5))
    run(scenario, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 20})


def test_transaction_state_topic_is_created_with_its_settings() -> None:
    async def scenario(env: Env) -> None:
        assert await env.tc.ensure_transaction_state_topic() == 0
        assert env.topics.created == [("__transaction_state", NUM_PARTITIONS, 1, {
            "cleanup.policy": "compact", "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false", "min.insync.replicas": "1", "segment.bytes": "1048576"})]
    run(scenario, **{"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
                     "transaction.state.log.segment.bytes": 1048576})


def test_inactive_coordinator_answers_list_and_describe_unavailable() -> None:
    async def scenario(env: Env) -> None:
        await env.tc.stop()
        assert env.tc.list_transactions(set(), set())[0] == E.COORDINATOR_NOT_AVAILABLE
        assert env.tc.describe_transaction(TID)["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    run(scenario)
