"""Partition reassignment (KIP-455): Kafka's KafkaController.onPartitionReassignment, for many partitions at once.

Kafka runs each partition through the phases on its own; 1,000 partitions then cost thousands of sequential
ZooKeeper round trips (the topic znode rewritten twice per partition, the state read and written) and one
request batch per partition. Here each phase runs for every partition of the call together, in Kafka's order:

  U   RS = ORS + TRS with AR/RR recorded: one topic znode write per topic (the whole assignment, as each of
      Kafka's per-partition writes is); replicas no longer in RS stopped.
  A   (TRS not yet all in the ISR) the leader epoch bumped, pipelined, LeaderAndIsr to ORS and, as new, to AR
      (one batch), AR -> NewReplica.
  B   (TRS in the ISR) AR -> OnlineReplica, RS = TRS in memory, leadership moved into TRS where needed
      (an election, else an epoch bump with LeaderAndIsr), RR -> Offline -> ... -> NonExistent, RS = TRS in
      ZooKeeper (one write per topic), the partitions leave /admin/reassign_partitions, UpdateMetadata.

A partition whose step fails (its state znode is gone, a newer controller wrote it) stops there and is reported,
as Kafka's per-partition exception is; the others go on. Runs on the controller's event thread.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from broker.cluster.controller.config import ControllerConfig
from broker.cluster.controller.context import ControllerContext, PartitionState, ReplicaAssignment, ReplicaState
from broker.cluster.controller.context import TopicPartition
from broker.cluster.controller.election import with_new_epoch
from broker.cluster.controller.partition_state_machine import (REASSIGN, PartitionStateMachine, StateChangeFailed,
                                                               known_partition_states)
from broker.cluster.controller.replica_state_machine import ReplicaStateMachine
from broker.cluster.controller.request_batch import ControllerBrokerRequestBatch
from broker.cluster.controller.topic_deletion_manager import TopicDeletionManager
from broker.zk.client import KafkaZkClient
from broker.zk.paths import LeaderAndIsr, TopicAssignment

log = logging.getLogger("broker.cluster.controller.kafka_controller")

#: tp -> why its reassignment step failed
Failures = dict[TopicPartition, Exception]


def _tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


class PartitionReassignments:
    """The reassignment phases over sets of partitions (see the module docstring)."""

    def __init__(self, config: ControllerConfig, ctx: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch, replica_sm: ReplicaStateMachine,
                 partition_sm: PartitionStateMachine, topic_deletion: TopicDeletionManager, *,
                 watch_isr: Callable[[TopicPartition], None], unwatch_isr: Callable[[TopicPartition], None],
                 remove_from_zk_reassignment: Callable[[Callable[[TopicPartition, list[int]], bool]], None],
                 send_update_metadata: Callable[[Iterable[int], Iterable[TopicPartition]], None]) -> None:
        self.config = config
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.replica_sm = replica_sm
        self.partition_sm = partition_sm
        self.topic_deletion = topic_deletion
        self._watch_isr = watch_isr
        self._unwatch_isr = unwatch_isr
        self._remove_from_zk_reassignment = remove_from_zk_reassignment
        self._send_update_metadata = send_update_metadata

    # ------------------------------------------------------------------ entry points
    def on_partition_reassignment(self, reassignments: dict[TopicPartition, ReplicaAssignment]) -> Failures:
        """Run phase U, then A or B, for each partition; {tp: error} of those that failed."""
        failed: Failures = {}
        if not reassignments:
            return failed
        self.topic_deletion.mark_topic_ineligible_for_deletion({tp[0] for tp in reassignments},
                                                               "topic reassignment in progress")
        self._update_current_reassignment(reassignments, failed)
        live = {tp: a for tp, a in reassignments.items() if tp not in failed}
        complete = self._completed(live)
        in_progress = {tp: a for tp, a in live.items() if tp not in complete}
        if in_progress:
            self._update_leader_epoch_and_send_request(in_progress, failed)
            self.replica_sm.handle_state_changes(
                [(tp, r) for tp, a in sorted(in_progress.items()) if tp not in failed for r in a.adding],
                ReplicaState.NEW)
        done = {tp: a for tp, a in live.items() if tp in complete}
        if done:
            self._complete(done, failed)
        return failed

    def maybe_complete(self, partitions: Iterable[TopicPartition]) -> Failures:
        """Finish (phase B) the reassignments among `partitions` whose target replicas are all in the ISR now."""
        items = {tp: self.ctx.partition_full_replica_assignment(tp) for tp in partitions
                 if tp in self.ctx.partitions_being_reassigned}
        complete = self._completed(items)  # one pipelined read of their states (not one per partition)
        done = {tp: a for tp, a in items.items() if tp in complete}
        for tp, a in sorted(done.items()):
            log.info("Target replicas %s have all caught up with the leader for reassigning partition %s",
                     a.target_replicas, _tp_str(tp))
        failed = self.on_partition_reassignment(done)
        for tp, exc in sorted(failed.items()):
            log.error("Error completing reassignment of partition %s: %r", _tp_str(tp), exc)
        return failed

    # ------------------------------------------------------------------ phase U
    def _update_current_reassignment(self, items: dict[TopicPartition, ReplicaAssignment], failed: Failures) -> None:
        ctx = self.ctx
        changed = {tp: (ctx.partition_full_replica_assignment(tp), a) for tp, a in items.items()
                   if ctx.partition_full_replica_assignment(tp) != a}
        if changed:
            self._update_replica_assignment({tp: a for tp, (_, a) in changed.items()}, failed)
            unneeded = []
            for tp, (current, a) in sorted(changed.items()):
                if tp in failed:
                    continue
                ctx.update_partition_full_replica_assignment(tp, a)
                unneeded += [(tp, r) for r in current.replicas if r not in a.replicas]
            if unneeded:
                self._stop_removed_replicas(unneeded)
        for tp in items:
            if tp not in failed:
                if not self.config.is_alter_partition_enabled:
                    self._watch_isr(tp)
                ctx.partitions_being_reassigned.add(tp)

    def _update_replica_assignment(self, items: dict[TopicPartition, ReplicaAssignment], failed: Failures) -> None:
        """Write the topic znodes: each topic's whole assignment with these partitions' new ones, one write per
        topic (pipelined)."""
        by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
        for (topic, p), a in items.items():
            by_topic.setdefault(topic, {})[p] = a
        writes: dict[str, TopicAssignment] = {}
        for topic, changes in by_topic.items():
            full = dict(self.ctx.assignments.get(topic, {}))
            full.update(changes)
            writes[topic] = TopicAssignment(self.ctx.topic_ids.get(topic),
                                            {p: list(x.replicas) for p, x in full.items()},
                                            {p: list(x.adding) for p, x in full.items() if x.adding},
                                            {p: list(x.removing) for p, x in full.items() if x.removing})
        errors = self.zk.set_topic_assignments(writes, self.ctx.epoch_zk_version)
        for topic, changes in sorted(by_topic.items()):
            err = errors.get(topic)
            for p, a in sorted(changes.items()):
                if err is not None:
                    failed[(topic, p)] = err
                else:
                    log.info("Successfully updated assignment of partition %s-%d to %s", topic, p, a)

    def _completed(self, items: dict[TopicPartition, ReplicaAssignment]) -> set[TopicPartition]:
        """The partitions not being reassigned, or whose target replicas are all in the ISR (read from ZooKeeper,
        as Kafka's isReassignmentComplete)."""
        done = {tp for tp, a in items.items() if not a.is_being_reassigned}
        moving = [tp for tp in items if tp not in done]
        states = self.zk.get_partition_states(moving) if moving else {}
        for tp in moving:
            s = states.get(tp)
            if s is not None and set(items[tp].target_replicas) <= set(s.isr):
                done.add(tp)
        return done

    # ------------------------------------------------------------------ phases A and B
    def _update_leader_epoch_and_send_request(self, items: dict[TopicPartition, ReplicaAssignment],
                                              failed: Failures) -> None:
        updated = self._update_leader_epoch(sorted(items), failed)
        for tp in sorted(set(items) - set(updated)):
            log.error("Failed to send LeaderAndIsr request with new replica assignment %s to leader for partition "
                      "being reassigned %s", items[tp], _tp_str(tp))
        if not updated:
            return
        self.batch.new_batch()
        try:
            for tp, state in sorted(updated.items()):
                a = items[tp]
                self.batch.add_leader_and_isr(a.origin_replicas, tp, state, a, is_new=False)
                self.batch.add_leader_and_isr(a.adding, tp, state, a, is_new=True)
            self.batch.send_requests(self.ctx.epoch)
        finally:
            self.batch.clear()

    def _update_leader_epoch(self, tps: list[TopicPartition], failed: Failures) -> dict[TopicPartition, LeaderAndIsr]:
        """Bump the leader epoch without changing leader or ISR (the replicas learn the new replica set);
        version conflicts are re-read and retried."""
        updated: dict[TopicPartition, LeaderAndIsr] = {}
        remaining = tps
        fresh = False  # the first attempt from the controller's copy (versions fence it), retries from ZooKeeper
        while remaining:
            current = (self.zk.get_partition_states(remaining) if fresh
                       else known_partition_states(self.ctx, self.zk, remaining))
            fresh = True
            to_write: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                s = current.get(tp)
                if s is None:
                    failed[tp] = StateChangeFailed(f"Cannot update leader epoch for partition {_tp_str(tp)} as "
                                                   "leaderAndIsr path is empty")
                elif s.controller_epoch > self.ctx.epoch:
                    failed[tp] = StateChangeFailed("Leader and isr path written by another controller")
                else:
                    to_write[tp] = with_new_epoch(s)
            if not to_write:
                break
            written, remaining = self.zk.update_leader_and_isr(to_write, self.ctx.epoch, self.ctx.epoch_zk_version)
            for tp, r in written.items():
                if isinstance(r, LeaderAndIsr):
                    self.ctx.leadership[tp] = r
                    updated[tp] = r
                else:
                    failed[tp] = r
        return updated

    def _complete(self, items: dict[TopicPartition, ReplicaAssignment], failed: Failures) -> None:
        ctx = self.ctx
        tps = sorted(items)
        self.replica_sm.handle_state_changes([(tp, r) for tp in tps for r in items[tp].adding],
                                             ReplicaState.ONLINE)
        completed = {tp: ReplicaAssignment.of(items[tp].target_replicas) for tp in tps}
        for tp, a in completed.items():
            ctx.update_partition_full_replica_assignment(tp, a)
        self._move_reassigned_partition_leader_if_required(completed, failed)
        completed = {tp: a for tp, a in completed.items() if tp not in failed}
        self._stop_removed_replicas([(tp, r) for tp in sorted(completed) for r in items[tp].removing])
        self._update_replica_assignment(completed, failed)
        completed = {tp: a for tp, a in completed.items() if tp not in failed}
        self._remove_partitions_from_reassigning(completed)
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, sorted(completed))
        self.topic_deletion.resume_deletion_for_topics({tp[0] for tp in completed})

    def _move_reassigned_partition_leader_if_required(self, items: dict[TopicPartition, ReplicaAssignment],
                                                      failed: Failures) -> None:
        elect: list[TopicPartition] = []
        bump: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, a in sorted(items.items()):
            leader = self.ctx.leadership[tp].leader
            if leader not in a.replicas:
                log.info("Leader %d for partition %s being reassigned, is not in the new list of replicas %s. "
                         "Re-electing leader", leader, _tp_str(tp), list(a.replicas))
                elect.append(tp)
            elif self.ctx.is_replica_online(leader, tp):
                bump[tp] = a
            else:
                elect.append(tp)
        if elect:
            self.partition_sm.handle_state_changes(elect, PartitionState.ONLINE, REASSIGN)
        if bump:
            self._update_leader_epoch_and_send_request(bump, failed)

    def _stop_removed_replicas(self, replicas: list[tuple[TopicPartition, int]]) -> None:
        if not replicas:
            return
        for state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                      ReplicaState.NON_EXISTENT):
            self.replica_sm.handle_state_changes(replicas, state)

    def _remove_partitions_from_reassigning(self, items: dict[TopicPartition, ReplicaAssignment]) -> None:
        if not items:
            return
        for tp in items:
            self._unwatch_isr(tp)
        self._remove_from_zk_reassignment(
            lambda tp, replicas: tp in items and list(replicas) == list(items[tp].replicas))
        for tp in items:
            self.ctx.partitions_being_reassigned.discard(tp)
