"""AlterPartitionManager: sends leaders' ISR changes to the controller (AlterPartition v3, KIP-497).

Partitions submit their proposed ISR here; pending items (at most one per partition) are batched
into one AlterPartition request to the current controller, with one request in flight at a
time. Each submitter gets the controller's per-partition answer (the committed LeaderAndIsr) or
an AlterPartitionError. Connection failures, an unknown controller and NOT_CONTROLLER are retried
with a short backoff, forever, as Kafka does (a newer LeaderAndIsr makes the answer irrelevant
and the Partition then ignores it). A top-level error (e.g. STALE_BROKER_EPOCH) re-sends the
pending items after the backoff.

Loop affinity: event loop only.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from broker.errors import ErrorCode
from broker.replica.partition import AlterPartitionError, LeaderAndIsr
from broker.util.broker_channel import BrokerChannel, BrokerChannelError, BrokerNode
from broker.util.clock import SYSTEM_CLOCK, Clock, Timer

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]
ALTER_PARTITION = 56
ZERO_UUID = uuid.UUID(int=0)


@dataclass
class _Item:
    tp: TopicPartition
    topic_id: Optional[uuid.UUID]
    leader_epoch: int
    new_isr_with_epochs: List[Tuple[int, int]]
    leader_recovery_state: int
    partition_epoch: int
    future: "Optional[asyncio.Future[LeaderAndIsr]]" = field(repr=False, default=None)


class AlterPartitionManager:
    """Batches ISR changes into AlterPartition requests to the controller."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], channel: BrokerChannel,
                 controller_node: Callable[[], Optional[BrokerNode]], *, api_version: int = 3,
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 50, clock: Clock = SYSTEM_CLOCK) -> None:
        """``clock``: whose timers run the retry backoff (a test's ManualClock runs them when advanced)."""
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._channel = channel
        self._controller_node = controller_node
        self.api_version = api_version
        self._timeout_ms = request_timeout_ms
        self._clock = clock
        self._backoff_ms = retry_backoff_ms
        #: items not yet answered, by partition (an item stays here while its request is in flight)
        self.unsent: Dict[TopicPartition, _Item] = {}
        self._in_flight = False
        self._task: Optional["asyncio.Task[None]"] = None
        self._retry_handle: Optional[Timer] = None
        self._closed = False

    def start(self) -> None:
        """Nothing to start: requests go out as items arrive."""

    async def shutdown(self) -> None:
        """Stop sending; waiting submitters get OPERATION_NOT_ATTEMPTED."""
        self._closed = True
        if self._retry_handle is not None:
            self._retry_handle.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for item in self.unsent.values():
            if item.future is not None and not item.future.done():
                item.future.set_exception(AlterPartitionError(ErrorCode.OPERATION_NOT_ATTEMPTED, "shutting down"))
        self.unsent.clear()
        await self._channel.close()

    async def submit(self, tp: TopicPartition, topic_id: Optional[uuid.UUID], leader_epoch: int,
                     new_isr_with_epochs: List[Tuple[int, int]], leader_recovery_state: int,
                     partition_epoch: int) -> LeaderAndIsr:
        """Propose ``tp``'s new ISR; returns what the controller committed or raises AlterPartitionError.

        A partition with an unanswered item already gets OPERATION_NOT_ATTEMPTED (one at a time).
        """
        if self._closed:
            raise AlterPartitionError(ErrorCode.OPERATION_NOT_ATTEMPTED, "AlterPartition manager is shut down")
        if tp in self.unsent:
            raise AlterPartitionError(ErrorCode.OPERATION_NOT_ATTEMPTED,
                                      "an ISR change of %s-%d is already pending" % tp)
        answer: "asyncio.Future[LeaderAndIsr]" = asyncio.get_running_loop().create_future()
        item = _Item(tp, topic_id, leader_epoch, list(new_isr_with_epochs), leader_recovery_state, partition_epoch,
                     answer)
        self.unsent[tp] = item
        self._maybe_propagate()
        return await answer

    # ------------------------------------------------------------------ sending
    def _maybe_propagate(self) -> None:
        self._retry_handle = None
        if self._closed or self._in_flight or not self.unsent:
            return
        self._in_flight = True
        self._task = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        # Snapshot when the task runs: items submitted in the same loop turn share the request.
        items = list(self.unsent.values())
        if not items:
            self._in_flight = False
            return
        error = 0
        try:
            error = await self._send_until_answered(items)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Unexpected error sending AlterPartition")
            error = int(ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            self._in_flight = False
        if self._closed:
            return
        if error == 0:
            self._maybe_propagate()
        else:
            self._retry_handle = self._clock.call_later_ms(self._backoff_ms, self._maybe_propagate)

    def _version_for(self, items: List[_Item]) -> int:
        """v2+ identifies topics by id; without ids for every item we must fall back to v1."""
        if self.api_version >= 2 and all(i.topic_id is not None and i.topic_id != ZERO_UUID for i in items):
            return self.api_version
        return 1

    def _build(self, items: List[_Item], version: int) -> Tuple[dict, Dict[uuid.UUID, str]]:
        by_topic: Dict[str, List[_Item]] = {}
        for i in items:
            by_topic.setdefault(i.tp[0], []).append(i)
        names: Dict[uuid.UUID, str] = {}
        topics = []
        for name, its in by_topic.items():
            tid = its[0].topic_id or ZERO_UUID
            names[tid] = name
            parts = []
            for i in its:
                entry: Dict[str, Any] = {"partition_index": i.tp[1], "leader_epoch": i.leader_epoch,
                         "leader_recovery_state": i.leader_recovery_state, "partition_epoch": i.partition_epoch}
                if version >= 3:
                    entry["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": e} for b, e in i.new_isr_with_epochs]
                else:
                    entry["new_isr"] = [b for b, _ in i.new_isr_with_epochs]
                parts.append(entry)
            topics.append({"topic_name": name, "topic_id": tid, "partitions": parts})
        return {"broker_id": self.broker_id, "broker_epoch": self._broker_epoch(), "topics": topics}, names

    async def _send_until_answered(self, items: List[_Item]) -> int:
        """Send to the current controller until one answers; returns its top-level error code."""
        version = self._version_for(items)
        while not self._closed:
            node = self._controller_node()
            if node is None:
                await self._clock.sleep_ms(self._backoff_ms)
                continue
            body, names = self._build(items, version)
            try:
                resp = await self._channel.send(node, ALTER_PARTITION, version, body, self._timeout_ms)
            except (BrokerChannelError, asyncio.TimeoutError, OSError) as e:
                log.info("AlterPartition to controller %d failed (%s); retrying", node.broker_id, e or type(e).__name__)
                await self._clock.sleep_ms(self._backoff_ms)
                continue
            top = int(resp.error_code)
            if top == ErrorCode.NOT_CONTROLLER:
                log.info("Broker %d is no longer the controller; retrying AlterPartition", node.broker_id)
                await self._clock.sleep_ms(self._backoff_ms)
                continue
            if top != 0:
                log.warning("Controller returned %s to AlterPartition (broker epoch %d); will retry",
                            _name(top), body["broker_epoch"])
                return top
            self._handle_response(resp, items, version, names)
            return 0
        return int(ErrorCode.OPERATION_NOT_ATTEMPTED)

    def _handle_response(self, resp: object, items: List[_Item], version: int, names: Dict[uuid.UUID, str]) -> None:
        answers: Dict[TopicPartition, object] = {}
        for t in getattr(resp, "topics", []) or []:
            name = names.get(t.topic_id) if version >= 2 else t.topic_name
            if not name:
                log.error("Unexpected topic %s in the AlterPartition response; ignoring it", t)
                continue
            for p in t.partitions:
                tp = (name, p.partition_index)
                if p.error_code:
                    answers[tp] = AlterPartitionError(p.error_code)
                elif getattr(p, "leader_recovery_state", 0) not in (0, 1):
                    log.error("Controller returned an invalid leader recovery state %s for %s-%d",
                              p.leader_recovery_state, *tp)
                    answers[tp] = AlterPartitionError(ErrorCode.UNKNOWN_SERVER_ERROR)
                else:
                    answers[tp] = LeaderAndIsr(p.leader_id, p.leader_epoch, tuple(p.isr),
                                               int(getattr(p, "leader_recovery_state", 0)), p.partition_epoch)
        for item in items:
            answer = answers.get(item.tp)
            if answer is None:
                log.warning("%s-%d was sent in AlterPartition but not answered; it will be re-sent", *item.tp)
                continue
            if self.unsent.get(item.tp) is item:
                del self.unsent[item.tp]
            fut = item.future
            if fut is None or fut.done():
                continue
            if isinstance(answer, AlterPartitionError):
                fut.set_exception(answer)
            else:
                fut.set_result(answer)  # type: ignore[arg-type]


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
