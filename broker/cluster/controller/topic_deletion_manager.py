"""TopicDeletionManager: carries out /admin/delete_topics requests, as Kafka's.

For a topic queued for deletion: its partitions go Offline then NonExistent, every broker gets UpdateMetadata
with leader -2 (LeaderDuringDelete) so clients stop using it, each live replica gets StopReplica delete=false
(Offline) then delete=true (DeletionStarted). When every replica reported success the topic's znodes are
removed. A replica on a dead broker makes the topic ineligible (its replicas DeletionIneligible) until that
broker comes back; a failed StopReplica likewise, retried on the next resume. A topic with a reassignment in
progress waits for it to finish.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from broker.cluster.controller.context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from broker.cluster.controller.partition_state_machine import PartitionStateMachine
from broker.cluster.controller.replica_state_machine import ReplicaStateMachine

log = logging.getLogger(__name__)


class DeletionClient:
    """What the manager needs from the controller (ZooKeeper writes and requests)."""

    def __init__(self, delete_topic: Callable[[str], None], delete_topic_deletions: Callable[[list[str]], None],
                 mute_partition_modifications: Callable[[str], None],
                 send_metadata_update: Callable[[list], None]) -> None:
        self.delete_topic = delete_topic
        self.delete_topic_deletions = delete_topic_deletions
        self.mute_partition_modifications = mute_partition_modifications
        self.send_metadata_update = send_metadata_update


class TopicDeletionManager:
    def __init__(self, enabled: bool, ctx: ControllerContext, replica_sm: ReplicaStateMachine,
                 partition_sm: PartitionStateMachine, client: DeletionClient) -> None:
        self.enabled = enabled
        self.ctx = ctx
        self.replica_sm = replica_sm
        self.partition_sm = partition_sm
        self.client = client

    def init(self, to_delete: set[str], ineligible: set[str]) -> None:
        if self.enabled:
            self.ctx.topics_to_be_deleted |= to_delete
            self.ctx.topics_ineligible_for_deletion |= ineligible & self.ctx.topics_to_be_deleted
        elif to_delete:
            log.info("Removing %s since delete topic is disabled", sorted(to_delete))
            self.client.delete_topic_deletions(sorted(to_delete))

    def try_topic_deletion(self) -> None:
        if self.enabled:
            self._resume_deletions()

    def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        if self.enabled:
            self.ctx.topics_to_be_deleted |= topics
            self._resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        if not self.enabled:
            return
        resume = set(topics) & self.ctx.topics_to_be_deleted
        if resume:
            self.ctx.topics_ineligible_for_deletion -= resume
            self._resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        if not self.enabled:
            return
        failed = [r for r in replicas if self.is_topic_queued_for_deletion(r[0][0])]
        if failed:
            topics = {r[0][0] for r in failed}
            log.debug("Deletion failed for replicas %s. Halting deletion for topics %s", failed, topics)
            self.replica_sm.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
            self.mark_topic_ineligible_for_deletion(topics, "replica deletion failure")
            self._resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str) -> None:
        if not self.enabled:
            return
        halted = set(topics) & self.ctx.topics_to_be_deleted
        self.ctx.topics_ineligible_for_deletion |= halted
        if halted:
            log.info("Halted deletion of topics %s due to %s", sorted(halted), reason)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return self.enabled and self.ctx.is_topic_queued_for_deletion(topic)

    def complete_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        done = [r for r in replicas if self.is_topic_queued_for_deletion(r[0][0])]
        log.debug("Deletion successfully completed for replicas %s", done)
        self.replica_sm.handle_state_changes(done, ReplicaState.DELETION_SUCCESSFUL)
        self._resume_deletions()

    # ------------------------------------------------------------------ internals
    def _is_ineligible(self, topic: str) -> bool:
        return (not self.enabled) or topic in self.ctx.topics_ineligible_for_deletion

    def _is_deletion_in_progress(self, topic: str) -> bool:
        return self.enabled and self.ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)

    def _is_eligible(self, topic: str) -> bool:
        return (self.ctx.is_topic_queued_for_deletion(topic) and not self._is_deletion_in_progress(topic)
                and not self._is_ineligible(topic))

    def _retry_deletion_for_ineligible_replicas(self, topics: set[str]) -> None:
        failed = [r for t in sorted(topics) for r in self.ctx.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)]
        log.debug("Retrying deletion of topics %s since replicas %s were not successfully deleted",
                  sorted(topics), failed)
        self.replica_sm.handle_state_changes(failed, ReplicaState.OFFLINE)

    def _complete_delete_topic(self, topic: str) -> None:
        self.client.mute_partition_modifications(topic)
        done = self.ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL)
        self.replica_sm.handle_state_changes(done, ReplicaState.NON_EXISTENT)
        self.client.delete_topic(topic)
        self.ctx.remove_topic(topic)

    def _on_topic_deletion(self, topics: set[str]) -> None:
        unseen = topics - self.ctx.topics_with_deletion_started
        if unseen:
            partitions = [tp for t in sorted(unseen) for tp in self.ctx.partitions_for_topic(t)]
            self.partition_sm.handle_state_changes(partitions, PartitionState.OFFLINE)
            self.partition_sm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            self.ctx.topics_with_deletion_started |= unseen
        self.client.send_metadata_update([tp for t in sorted(topics) for tp in self.ctx.partitions_for_topic(t)])
        self._on_partition_deletion(topics)

    def _on_partition_deletion(self, topics: set[str]) -> None:
        dead_replicas: list[PartitionReplica] = []
        retry: list[PartitionReplica] = []
        ineligible: set[str] = set()
        for t in sorted(topics):
            replicas = self.ctx.replicas_for_topic(t)
            alive = [r for r in replicas if self.ctx.is_replica_online(r[1], r[0])]
            dead = [r for r in replicas if not self.ctx.is_replica_online(r[1], r[0])]
            succeeded = set(self.ctx.replicas_in_state(t, ReplicaState.DELETION_SUCCESSFUL))
            dead_replicas += dead
            retry += [r for r in alive if r not in succeeded]
            if dead:
                log.debug("Dead Replicas (%s) found for topic %s", dead, t)
                ineligible.add(t)
        self.replica_sm.handle_state_changes(dead_replicas, ReplicaState.DELETION_INELIGIBLE)
        self.replica_sm.handle_state_changes(retry, ReplicaState.OFFLINE)
        self.replica_sm.handle_state_changes(retry, ReplicaState.DELETION_STARTED)
        if ineligible:
            self.mark_topic_ineligible_for_deletion(ineligible, "offline replicas")

    def _resume_deletions(self) -> None:
        queued = set(self.ctx.topics_to_be_deleted)
        retry: set[str] = set()
        eligible: set[str] = set()
        if queued:
            log.info("Handling deletion for topics %s", sorted(queued))
        for t in sorted(queued):
            if self.ctx.are_all_replicas_in_state(t, ReplicaState.DELETION_SUCCESSFUL):
                self._complete_delete_topic(t)
                log.info("Deletion of topic %s successfully completed", t)
                continue
            if not self.ctx.is_any_replica_in_state(t, ReplicaState.DELETION_STARTED):
                if self.ctx.is_any_replica_in_state(t, ReplicaState.DELETION_INELIGIBLE):
                    retry.add(t)
            if self._is_eligible(t):
                log.info("Deletion of topic %s (re)started", t)
                eligible.add(t)
        if retry:
            self._retry_deletion_for_ineligible_replicas(retry)
        if eligible:
            self._on_topic_deletion(eligible)
