"""ZkAlterPartitionManager: ISR changes below inter.broker.protocol.version 2.7, as Kafka's leaders made them.

Before AlterPartition (KIP-497) a partition leader wrote its new ISR into the partition state znode
itself, compare-and-set on the znode version (the partition epoch), and told the controller through a
sequential ``/isr_change_notification/isr_change_<n>`` znode so it would send UpdateMetadata. The
notifications are batched as Kafka batches them: checked every 2.5 s, written once no ISR changed for
5 s, or at the latest 60 s after the last one (IsrChangePropagationConfig). At IBP >= 2.7 this class
is not used and no notification is ever written.

Implements the replica layer's ``AlterPartitionSubmitter``. Loop affinity: the event loop; ZooKeeper
calls run on the ZooKeeper executor.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Callable, List, Optional, Set, Tuple

from broker.errors import ErrorCode
from broker.replica.partition import AlterPartitionError, LeaderAndIsr
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.zk.paths import LeaderAndIsr as ZkLeaderAndIsr

if TYPE_CHECKING:
    from broker.util.executor import NamedExecutor
    from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]

CHECK_INTERVAL_MS = 2500
LINGER_MS = 5000
MAX_DELAY_MS = 60000


class ZkAlterPartitionManager:
    def __init__(self, broker_id: int, zk: "KafkaZkClient", zk_calls: "NamedExecutor",
                 controller_epoch: Callable[[], int], clock: Clock = SYSTEM_CLOCK,
                 check_interval_ms: int = CHECK_INTERVAL_MS, linger_ms: int = LINGER_MS,
                 max_delay_ms: int = MAX_DELAY_MS) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.zk_calls = zk_calls
        self.controller_epoch = controller_epoch
        #: the linger and max-delay intervals on mono_ms(); the check interval sleeps on it
        self._clock = clock
        self.check_interval_ms = check_interval_ms
        self.linger_ms = linger_ms
        self.max_delay_ms = max_delay_ms
        self._changed: Set[TopicPartition] = set()
        self._last_change = 0
        self._last_propagation = clock.mono_ms()
        self._task: Optional["asyncio.Task[None]"] = None

    async def submit(self, tp: TopicPartition, topic_id: Optional[uuid.UUID], leader_epoch: int,
                     new_isr_with_epochs: List[Tuple[int, int]], leader_recovery_state: int,
                     partition_epoch: int) -> LeaderAndIsr:
        """Write the new ISR with compare-and-set; INVALID_UPDATE_VERSION if the znode moved on (the controller
        changed it: the LeaderAndIsr it sends next tells the leader what is current)."""
        isr = [b for b, _ in new_isr_with_epochs]
        state = ZkLeaderAndIsr(self.broker_id, leader_epoch, isr, self.controller_epoch(), leader_recovery_state)
        new_version = await self.zk_calls.run(self.zk.set_partition_state, tp[0], tp[1], state, partition_epoch)
        if new_version is None:
            raise AlterPartitionError(ErrorCode.INVALID_UPDATE_VERSION,
                                      f"partition state of {tp[0]}-{tp[1]} is no longer at version {partition_epoch}")
        log.info("Updated ISR of %s-%d to %s in ZooKeeper (partition epoch %d)", tp[0], tp[1], isr, new_version)
        self._changed.add(tp)
        self._last_change = self._clock.mono_ms()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._propagate_loop())
        return LeaderAndIsr(self.broker_id, leader_epoch, tuple(isr), leader_recovery_state, new_version)

    def due(self) -> bool:
        """Whether the pending notifications should be written now (Kafka's maybePropagateIsrChanges rule)."""
        now = self._clock.mono_ms()
        return bool(self._changed) and (now - self._last_change >= self.linger_ms
                                        or now - self._last_propagation >= self.max_delay_ms)

    async def propagate(self) -> None:
        changed, self._changed = sorted(self._changed), set()
        self._last_propagation = self._clock.mono_ms()
        await self.zk_calls.run(self.zk.propagate_isr_changes, changed)

    async def _propagate_loop(self) -> None:
        try:
            while self._changed:
                await self._clock.sleep_ms(self.check_interval_ms)
                if self.due():
                    await self.propagate()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Writing an ISR change notification failed")
        finally:
            self._task = None

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._changed and not getattr(self.zk, "connected", True):  # a write would wait for ZooKeeper forever
            log.warning("Could not write the last ISR change notification at shutdown: no connection to ZooKeeper")
        elif self._changed:  # the controller should still hear of the last changes
            try:
                await self.propagate()
            except Exception:
                log.warning("Could not write the last ISR change notification at shutdown")
