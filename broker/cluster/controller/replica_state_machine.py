"""ReplicaStateMachine: the life of one replica (a partition on one broker), as Kafka's.

NonExistent -> New (LeaderAndIsr is_new to that broker) -> Online (LeaderAndIsr with the current state) ->
Offline (StopReplica delete=false; removed from the ISR with a leader epoch bump, the remaining replicas get
LeaderAndIsr) -> DeletionStarted (StopReplica delete=true) -> DeletionSuccessful | DeletionIneligible ->
NonExistent (dropped from the assignment).
"""
from __future__ import annotations

import logging
from typing import Iterable

from broker.cluster.controller.context import (NO_LEADER, REPLICA_VALID_PREVIOUS, ControllerContext,
                                               PartitionReplica, ReplicaState, TopicPartition)
from broker.cluster.controller.election import with_new_leader
from broker.cluster.controller.partition_state_machine import known_partition_states
from broker.cluster.controller.request_batch import ControllerBrokerRequestBatch
from broker.zk.client import KafkaZkClient
from broker.zk.errors import ZOOKEEPER_GONE, ControllerMovedError
from broker.zk.paths import LeaderAndIsr

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("state.change.logger")


class ReplicaStateMachine:
    def __init__(self, broker_id: int, ctx: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch) -> None:
        self.broker_id = broker_id
        self.ctx = ctx
        self.zk = zk
        self.batch = batch

    def startup(self) -> None:
        """Every replica starts Online (live broker) or DeletionIneligible; then Online ones get LeaderAndIsr and
        offline ones are taken out of the ISR."""
        online: list[PartitionReplica] = []
        offline: list[PartitionReplica] = []
        for tp in self.ctx.all_partitions():
            for r in self.ctx.partition_replica_assignment(tp):
                if self.ctx.is_replica_online(r, tp):
                    self.ctx.replica_states[(tp, r)] = ReplicaState.ONLINE
                    online.append((tp, r))
                else:
                    self.ctx.replica_states[(tp, r)] = ReplicaState.DELETION_INELIGIBLE
                    offline.append((tp, r))
        self.handle_state_changes(online, ReplicaState.ONLINE)
        self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def handle_state_changes(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        replicas = list(replicas)
        if not replicas:
            return
        self.batch.new_batch()
        try:
            by_broker: dict[int, list[PartitionReplica]] = {}
            for pr in replicas:
                by_broker.setdefault(pr[1], []).append(pr)
            for broker, prs in sorted(by_broker.items()):
                self._do_handle_state_changes(broker, prs, target)
            self.batch.send_requests(self.ctx.epoch)
        except (ControllerMovedError, *ZOOKEEPER_GONE):  # the controller goes with its session: one line upstream
            self.batch.clear()
            raise
        except Exception:
            log.exception("Error while moving some replicas to %s state", target.value)
            self.batch.clear()

    def _do_handle_state_changes(self, broker: int, replicas: list[PartitionReplica], target: ReplicaState) -> None:
        ctx = self.ctx
        valid = []
        for pr in replicas:
            current = ctx.replica_states.setdefault(pr, ReplicaState.NON_EXISTENT)
            if current in REPLICA_VALID_PREVIOUS[target]:
                valid.append(pr)
            else:
                state_change_log.error("Replica %d of %s should be in one of %s states before moving to %s state. "
                                       "Instead it is in %s state", pr[1], pr[0],
                                       sorted(s.value for s in REPLICA_VALID_PREVIOUS[target]), target.value,
                                       current.value)
        if target == ReplicaState.NEW:
            for tp, r in valid:
                s = ctx.leadership.get(tp)
                if s is not None:
                    if s.leader == r:
                        state_change_log.error("Replica %d for partition %s cannot be moved to NewReplica state "
                                               "as it is being requested to become leader", r, tp)
                        continue
                    self.batch.add_leader_and_isr([r], tp, s, ctx.partition_full_replica_assignment(tp), True)
                ctx.replica_states[(tp, r)] = ReplicaState.NEW
        elif target == ReplicaState.ONLINE:
            for tp, r in valid:
                if ctx.replica_states[(tp, r)] == ReplicaState.NEW:
                    a = ctx.partition_full_replica_assignment(tp)
                    if r not in a.replicas:
                        log.error("Adding replica (%d) that is not part of the assignment %s", r, a)
                        ctx.update_partition_full_replica_assignment(
                            tp, type(a)(a.replicas + (r,), a.adding, a.removing))
                else:
                    s = ctx.leadership.get(tp)
                    if s is not None:
                        self.batch.add_leader_and_isr([r], tp, s, ctx.partition_full_replica_assignment(tp), False)
                ctx.replica_states[(tp, r)] = ReplicaState.ONLINE
        elif target == ReplicaState.OFFLINE:
            for tp, r in valid:
                self.batch.add_stop_replica([r], tp, delete=False)
            with_info = [tp for tp, _ in valid if tp in ctx.leadership]
            without_info = [tp for tp, _ in valid if tp not in ctx.leadership]
            for tp, s in self._remove_replica_from_isr(broker, with_info).items():
                state_change_log.info("Partition %s state changed to %s after removing replica %d from the ISR as "
                                      "part of transition to OfflineReplica", tp, s, broker)
                if not ctx.is_topic_queued_for_deletion(tp[0]):
                    recipients = [x for x in ctx.partition_replica_assignment(tp) if x != broker]
                    self.batch.add_leader_and_isr(recipients, tp, s, ctx.partition_full_replica_assignment(tp),
                                                  False)
                ctx.replica_states[(tp, broker)] = ReplicaState.OFFLINE
            for tp in without_info:
                self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, [tp])
                ctx.replica_states[(tp, broker)] = ReplicaState.OFFLINE
        elif target == ReplicaState.DELETION_STARTED:
            for tp, r in valid:
                ctx.replica_states[(tp, r)] = ReplicaState.DELETION_STARTED
                self.batch.add_stop_replica([r], tp, delete=True)
        elif target in (ReplicaState.DELETION_INELIGIBLE, ReplicaState.DELETION_SUCCESSFUL):
            for pr in valid:
                ctx.replica_states[pr] = target
        elif target == ReplicaState.NON_EXISTENT:
            for tp, r in valid:
                ctx.update_partition_full_replica_assignment(tp, ctx.partition_full_replica_assignment(tp)
                                                             .remove_replica(r))
                ctx.replica_states.pop((tp, r), None)

    def _remove_replica_from_isr(self, replica: int, partitions: list[TopicPartition]
                                 ) -> dict[TopicPartition, LeaderAndIsr]:
        """Take `replica` out of the ISR of each partition (leader -> -1 if it led; the last ISR member stays),
        bumping the leader epoch. Returns the partitions' states afterwards (changed or not)."""
        results: dict[TopicPartition, LeaderAndIsr] = {}
        remaining = partitions
        fresh = False  # the first attempt from the controller's copy (versions fence it), retries from ZooKeeper
        while remaining:
            current = (self.zk.get_partition_states(remaining) if fresh
                       else known_partition_states(self.ctx, self.zk, remaining))
            fresh = True
            to_write: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                s = current.get(tp)
                if s is None:
                    if not self.ctx.is_topic_queued_for_deletion(tp[0]):
                        state_change_log.error("Failed to change state of replica %d for partition %s since the "
                                               "leader and isr path in zookeeper is empty", replica, tp)
                    continue
                if s.controller_epoch > self.ctx.epoch:
                    state_change_log.error("Leader and isr path of %s written by another controller (epoch %d); "
                                           "aborting state change by this controller", tp, s.controller_epoch)
                    continue
                if replica not in s.isr:
                    self.ctx.leadership[tp] = s
                    results[tp] = s
                    continue
                leader = NO_LEADER if s.leader == replica else s.leader
                isr = s.isr if len(s.isr) == 1 else [x for x in s.isr if x != replica]
                to_write[tp] = with_new_leader(s, leader, isr)
            if not to_write:
                break
            written, remaining = self.zk.update_leader_and_isr(to_write, self.ctx.epoch, self.ctx.epoch_zk_version)
            for tp, r in written.items():
                if isinstance(r, LeaderAndIsr):
                    self.ctx.leadership[tp] = r
                    results[tp] = r
                else:
                    state_change_log.error("Removing replica %d from the ISR of %s failed: %r", replica, tp, r)
        return results
