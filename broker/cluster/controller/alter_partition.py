"""AlterPartition (KIP-497, v3 KIP-903) validation: a pure function of the controller's view.

Order of the checks follows Kafka's ZooKeeper controller (processAlterPartition), with the leader/ISR sanity
checks of Kafka's KRaft controller added: the sender must be the leader, and the new ISR must be made of the
partition's replicas and hold the leader.
"""
from __future__ import annotations

import logging

from broker.cluster.controller.context import RECOVERED, RECOVERING, ControllerContext, TopicPartition
from broker.errors import ErrorCode
from broker.zk.paths import LeaderAndIsr

log = logging.getLogger(__name__)


def validate_alter_partition(ctx: ControllerContext, tp: TopicPartition, new: LeaderAndIsr,
                             epochs: dict[int, int], version: int) -> int | LeaderAndIsr:
    """NONE to write `new` (leader = sender, zk_version = the partition epoch it read); an error code; or the
    current state when it already equals the request (an idempotent retry).

    `epochs`: broker epoch per new ISR member (-1 = not checked; AlterPartition v3 sends them)."""
    cur = ctx.leadership.get(tp)
    if cur is None or not ctx.partition_replica_assignment(tp):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if new.zk_version > cur.zk_version or new.leader_epoch > cur.leader_epoch:
        return ErrorCode.NOT_CONTROLLER  # the leader knows newer state: we are probably not the controller
    if new.leader_epoch < cur.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if new.leader != cur.leader:
        log.info("Rejecting AlterPartition from node %d for %s because the current leader is %d", new.leader,
                 tp, cur.leader)
        return ErrorCode.INVALID_REQUEST
    if list(new.isr) == list(cur.isr) and new.leader_recovery_state == cur.leader_recovery_state:
        return cur  # idempotent retry (checked before the partition epoch, as Kafka)
    if new.zk_version < cur.zk_version:
        return ErrorCode.INVALID_UPDATE_VERSION
    replicas = ctx.partition_replica_assignment(tp)
    if not new.isr or len(set(new.isr)) != len(new.isr) or new.leader not in new.isr:
        log.info("Rejecting AlterPartition for %s: invalid ISR %s (replicas %s, leader %d)", tp, new.isr,
                 replicas, new.leader)
        return ErrorCode.INVALID_REQUEST
    if new.leader_recovery_state == RECOVERING and len(new.isr) > 1:
        return ErrorCode.INVALID_REQUEST  # a recovering leader (after an unclean election) stays alone
    if cur.leader_recovery_state == RECOVERED and new.leader_recovery_state == RECOVERING:
        return ErrorCode.INVALID_REQUEST
    # KIP-841: members that are not alive (or, v3, whose broker epoch moved on) are ineligible; so, stricter than
    # Kafka's ZooKeeper controller, is a broker that is not a replica of the partition at all.
    ineligible = [r for r in new.isr if r not in ctx.live_broker_ids or r not in replicas
                  or (epochs.get(r, -1) != -1 and epochs[r] != ctx.live_broker_epochs.get(r))]
    if ineligible:
        log.info("Rejecting AlterPartition request for %s because it specified ineligible replicas %s in the new "
                 "ISR %s.", tp, ineligible, new.isr)
        return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return ErrorCode.NONE
