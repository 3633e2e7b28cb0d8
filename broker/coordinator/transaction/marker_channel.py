"""TransactionMarkerChannelManager: sends COMMIT/ABORT markers (WriteTxnMarkers) to the leaders of a transaction's
partitions until every one is written, then lets the coordinator log the transaction complete.

As Kafka's: pending markers are grouped by the current leader of each partition (from the metadata cache, on the
inter-broker listener) and each leader gets one WriteTxnMarkers request at a time, carrying the markers of every
transaction waiting for it; this broker sends to itself over the network like to any other. A partition whose
leader is unknown or unreachable waits (retried every ``retry_backoff_ms`` as the metadata changes); one the
metadata no longer has (its topic was deleted) needs no marker; retriable errors are retried; INVALID_PRODUCER_EPOCH
and TRANSACTION_COORDINATOR_FENCED cancel the transaction's markers (a newer producer or coordinator took over).
Before each send and on each response the owner (the TransactionCoordinator) confirms the transaction is still its
own at the same coordinator epoch; markers of a ``__transaction_state`` partition that emigrated are dropped.

Loop affinity: everything runs on the broker's event loop.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Set, Tuple

from broker.coordinator.transaction.state import PendingCompleteTxn
from broker.errors import ErrorCode
from broker.protocol.api_keys import ApiKey
from broker.util.broker_channel import BrokerChannel, BrokerChannelError, BrokerNode
from broker.util.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]

#: per-partition errors after which the marker is sent again (to the then-current leader)
RETRIABLE = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                       ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})
#: the producer or the coordinator moved on: this transaction's markers are no longer wanted
CANCELLING = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
#: the partition cannot hold a marker (old message format): the producer could not have written to it either
SKIPPED = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


class MarkerOwner(Protocol):
    """The coordinator side of the markers."""

    def is_current(self, pending: PendingCompleteTxn) -> bool: ...

    def on_marker_written(self, pending: PendingCompleteTxn, tp: TopicPartition) -> None: ...

    def on_markers_complete(self, pending: PendingCompleteTxn) -> None: ...


class LeaderLookup(Protocol):
    """Where the leader of a partition is (``partition_leader`` answers (known, node))."""

    def __call__(self, topic: str, partition: int) -> Tuple[bool, Optional[BrokerNode]]: ...


def metadata_leader_lookup(metadata: Any, broker_node: Callable[[int], Optional[BrokerNode]]) -> LeaderLookup:
    """(False, None): the metadata has no such partition (topic deleted); (True, None): leader unknown or not
    reachable on the inter-broker listener; (True, node): send there. Kafka's getPartitionLeaderEndpoint."""
    def lookup(topic: str, partition: int) -> Tuple[bool, Optional[BrokerNode]]:
        meta = metadata.partition(topic, partition)
        if meta is None:
            return False, None
        if meta.leader < 0:
            return True, None
        return True, broker_node(meta.leader)
    return lookup


@dataclass(eq=False)
class _Txn:
    """Markers of one transaction still to deliver."""
    pending: PendingCompleteTxn
    waiting: Set[TopicPartition]                      # not yet sent (or to be sent again)
    in_flight: Set[TopicPartition] = field(default_factory=set)
    not_before: int = 0                               # the clock's mono_ms: retry backoff
    cancelled: bool = False


class TransactionMarkerChannelManager:
    def __init__(self, channel: BrokerChannel, leader_of: LeaderLookup, request_version: int = 1,
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 100, clock: Clock = SYSTEM_CLOCK) -> None:
        self.channel = channel
        #: the backoffs' readings (mono_ms) and the sender's waits
        self.clock = clock
        self.leader_of = leader_of
        self.request_version = request_version
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = int(retry_backoff_ms)
        self._owner: Optional[MarkerOwner] = None
        self._txns: Dict[str, _Txn] = {}
        self._busy: Set[int] = set()                  # brokers with a request in flight
        self._wakeup: Optional[asyncio.Event] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._sends: Set["asyncio.Task[None]"] = set()

    # ------------------------------------------------------------------ lifecycle
    def start(self, owner: MarkerOwner) -> None:
        self._owner = owner
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        tasks = [t for t in [self._task, *self._sends] if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        self._txns.clear()

    # ------------------------------------------------------------------ queueing
    def add_markers(self, pending: PendingCompleteTxn) -> None:
        """Send ``pending``'s markers (replacing any earlier entry of the same transactional id)."""
        old = self._txns.get(pending.transactional_id)
        if old is not None:
            old.cancelled = True
            log.info("Replaced pending markers of %s (coordinator epoch %d) with coordinator epoch %d",
                     pending.transactional_id, old.pending.coordinator_epoch, pending.coordinator_epoch)
        entry = self._txns[pending.transactional_id] = _Txn(pending, set(pending.partitions))
        if not entry.waiting:
            self._finish(entry)
        self._wake()

    def remove_markers_for_txn_partition(self, txn_partition: int) -> None:
        """The coordinator left (or reloads) this ``__transaction_state`` partition: its markers are not ours."""
        for tid, entry in list(self._txns.items()):
            if entry.pending.txn_partition == txn_partition:
                entry.cancelled = True
                del self._txns[tid]

    def pending_count(self) -> int:
        return len(self._txns)

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    # ------------------------------------------------------------------ the sender
    async def _run(self) -> None:
        assert self._wakeup is not None
        timeout_ms: Optional[int] = None
        while True:
            if timeout_ms is None:
                await self._wakeup.wait()
            else:
                try:
                    await self.clock.wait_for_ms(self._wakeup.wait(), timeout_ms)
                except asyncio.TimeoutError:
                    pass
            self._wakeup.clear()
            try:
                timeout_ms = self._dispatch()
            except Exception:
                log.exception("[TransactionMarkerChannelManager] Dispatching markers failed")
                timeout_ms = self.retry_backoff_ms

    def _dispatch(self) -> Optional[int]:
        """Group every sendable marker by its partition's leader and start one request per idle leader; the ms
        until the earliest backed-off marker may go (None: nothing to wait for but a wake-up, which the end of a
        request in flight also gives)."""
        assert self._owner is not None
        now = self.clock.mono_ms()
        by_broker: Dict[int, Tuple[BrokerNode, Dict[str, Set[TopicPartition]]]] = {}
        for tid, entry in list(self._txns.items()):
            if not entry.waiting or entry.not_before > now:
                continue
            if not self._owner.is_current(entry.pending):
                log.info("No longer the coordinator of %s at coordinator epoch %d; cancel sending its markers", tid,
                         entry.pending.coordinator_epoch)
                self._drop(entry)
                continue
            unknown = False
            for tp in sorted(entry.waiting):
                known, node = self.leader_of(*tp)
                if not known:
                    log.info("Couldn't find leader endpoint for partition %s-%d while trying to send transaction "
                             "markers for %s; the partition is likely deleted already and hence can be skipped",
                             tp[0], tp[1], tid)
                    entry.waiting.discard(tp)
                    self._owner.on_marker_written(entry.pending, tp)
                elif node is None or node.broker_id in self._busy:
                    unknown |= node is None
                else:
                    by_broker.setdefault(node.broker_id, (node, {}))[1].setdefault(tid, set()).add(tp)
            if unknown:
                entry.not_before = now + self.retry_backoff_ms
            self._maybe_finish(entry)
        for broker_id, (node, txns) in by_broker.items():
            batch = []
            for tid, tps in txns.items():
                entry = self._txns[tid]
                entry.waiting -= tps
                entry.in_flight |= tps
                batch.append((entry, frozenset(tps)))
            self._busy.add(broker_id)
            task = asyncio.get_running_loop().create_task(self._send(node, batch))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)
        waits = [e.not_before - now for e in self._txns.values() if e.waiting and e.not_before > now]
        return min(waits) if waits else None

    async def _send(self, node: BrokerNode, batch: List[Tuple[_Txn, frozenset]]) -> None:
        markers = []
        for entry, tps in batch:
            by_topic: Dict[str, List[int]] = {}
            for topic, p in sorted(tps):
                by_topic.setdefault(topic, []).append(p)
            pending = entry.pending
            markers.append({"producer_id": pending.producer_id, "producer_epoch": pending.producer_epoch,
                            "transaction_result": pending.commit, "coordinator_epoch": pending.coordinator_epoch,
                            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]})
        try:
            try:
                response = await self.channel.send(node, ApiKey.WRITE_TXN_MARKERS, self.request_version,
                                                   {"markers": markers}, self.request_timeout_ms)
            except (BrokerChannelError, asyncio.TimeoutError, OSError) as exc:
                log.info("Sending transaction markers to broker %d failed (%s); retrying", node.broker_id, exc)
                for entry, tps in batch:
                    self._retry(entry, tps, backoff=True)
                return
            results = list(getattr(response, "markers", None) or [])
            for i, (entry, tps) in enumerate(batch):
                result = results[i] if i < len(results) and results[i].producer_id == entry.pending.producer_id \
                    else next((r for r in results if r.producer_id == entry.pending.producer_id), None)
                errors = {(t.name, int(p.partition_index)): int(p.error_code)
                          for t in (result.topics if result is not None else ()) for p in t.partitions}
                self._handle(node, entry, tps, errors)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("[TransactionMarkerChannelManager] Handling the WriteTxnMarkers response of broker %d "
                          "failed", node.broker_id)
        finally:
            self._busy.discard(node.broker_id)
            self._wake()

    def _handle(self, node: BrokerNode, entry: _Txn, tps: frozenset, errors: Dict[TopicPartition, int]) -> None:
        assert self._owner is not None
        pending = entry.pending
        entry.in_flight -= tps
        if entry.cancelled:
            return
        if not self._owner.is_current(pending):
            log.info("Transaction coordinator epoch for %s changed from %d; cancel sending its markers",
                     pending.transactional_id, pending.coordinator_epoch)
            self._drop(entry)
            return
        retry: Set[TopicPartition] = set()
        broken = False
        for tp in sorted(tps):
            code = errors.get(tp)
            if code is None:
                log.warning("WriteTxnMarkers response of broker %d has no result for %s-%d of producer %d; retrying",
                            node.broker_id, tp[0], tp[1], pending.producer_id)
                retry.add(tp)
            elif code == 0 or code in SKIPPED:
                if code:
                    log.info("Sending %s's transaction marker to %s-%d failed with %s; the partition no longer "
                             "waits for it", pending.transactional_id, tp[0], tp[1], ErrorCode(code).name)
                self._owner.on_marker_written(pending, tp)
            elif code in RETRIABLE:
                log.info("Sending %s's transaction marker for partition %s-%d failed with %s, retrying with "
                         "coordinator epoch %d", pending.transactional_id, tp[0], tp[1], ErrorCode(code).name,
                         pending.coordinator_epoch)
                retry.add(tp)
            elif code in CANCELLING:
                log.info("Sending %s's transaction marker for partition %s-%d permanently failed with %s; cancel "
                         "sending any more of its markers", pending.transactional_id, tp[0], tp[1],
                         ErrorCode(code).name)
                self._drop(entry)
                return
            else:  # Kafka's IllegalStateException: the transaction stays in PrepareCommit/PrepareAbort
                log.error("Unexpected error %s while sending %s's transaction marker to %s-%d; cancel sending its "
                          "markers", _name(code), pending.transactional_id, tp[0], tp[1])
                broken = True
        if broken:
            self._drop(entry)
            return
        if retry:
            self._retry(entry, frozenset(retry), backoff=False)
        self._maybe_finish(entry)

    def _retry(self, entry: _Txn, tps: frozenset, backoff: bool) -> None:
        entry.in_flight -= tps
        if entry.cancelled:
            return
        entry.waiting |= tps
        if backoff:
            entry.not_before = self.clock.mono_ms() + self.retry_backoff_ms

    def _maybe_finish(self, entry: _Txn) -> None:
        if not entry.cancelled and not entry.waiting and not entry.in_flight:
            self._finish(entry)

    def _finish(self, entry: _Txn) -> None:
        assert self._owner is not None
        if self._txns.get(entry.pending.transactional_id) is entry:
            del self._txns[entry.pending.transactional_id]
        entry.cancelled = True
        self._owner.on_markers_complete(entry.pending)

    def _drop(self, entry: _Txn) -> None:
        entry.cancelled = True
        if self._txns.get(entry.pending.transactional_id) is entry:
            del self._txns[entry.pending.transactional_id]


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
