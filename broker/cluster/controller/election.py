"""Leader election rules (Kafka's Election / PartitionLeaderElectionAlgorithms): pure functions.

Every election bumps the leader epoch (a broker only applies a LeaderAndIsr whose leader epoch is newer than
the one it has). The znode version (partition epoch) is kept: the write is a compare-and-set on it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from broker.cluster.controller.context import RECOVERING, ControllerContext, TopicPartition
from broker.zk.paths import LeaderAndIsr


# ------------------------------------------------------------------------------------------- algorithms
def offline_partition_leader(assignment: Sequence[int], isr: Sequence[int], live: set[int],
                             unclean_enabled: bool) -> int | None:
    """First assigned replica that is live and in the ISR; failing that (and only if unclean election is
    enabled) the first live assigned replica."""
    for r in assignment:
        if r in live and r in isr:
            return r
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return r
    return None


def reassign_partition_leader(target: Sequence[int], isr: Sequence[int], live: set[int]) -> int | None:
    """First target replica that is live and in the ISR."""
    return next((r for r in target if r in live and r in isr), None)


def preferred_replica_leader(assignment: Sequence[int], isr: Sequence[int], live: set[int]) -> int | None:
    """The first assigned replica, if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int], live: set[int],
                               shutting_down: set[int]) -> int | None:
    """First assigned replica that is live, in the ISR and not shutting down."""
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)


# ------------------------------------------------------------------------------------------- new states
def with_new_leader(state: LeaderAndIsr, leader: int, isr: Sequence[int] | None = None,
                    recovering: bool = False) -> LeaderAndIsr:
    """`state` with another leader (and optionally ISR), leader epoch + 1."""
    return replace(state, leader=leader, leader_epoch=state.leader_epoch + 1,
                   isr=list(state.isr if isr is None else isr),
                   leader_recovery_state=RECOVERING if recovering else state.leader_recovery_state)


def with_new_epoch(state: LeaderAndIsr) -> LeaderAndIsr:
    """Same leader and ISR, leader epoch + 1 (e.g. so the leader picks up a changed replica set)."""
    return replace(state, leader_epoch=state.leader_epoch + 1)


@dataclass(frozen=True)
class ElectionResult:
    """The new state (None: no eligible leader) and the brokers to send it to."""

    tp: TopicPartition
    state: LeaderAndIsr | None
    recipients: list[int]


def leader_for_offline(ctx: ControllerContext, tp: TopicPartition, state: LeaderAndIsr, unclean_enabled: bool,
                       leader_recovery_supported: bool) -> ElectionResult:
    """New or offline partition. A clean leader keeps the ISR minus offline replicas; an unclean one gets
    ISR = [itself] and (IBP >= 3.2) leader_recovery_state RECOVERING."""
    assignment = ctx.partition_replica_assignment(tp)
    live = [r for r in assignment if ctx.is_replica_online(r, tp)]
    leader = offline_partition_leader(assignment, state.isr, set(live), unclean_enabled)
    if leader is None:
        return ElectionResult(tp, None, live)
    if leader in state.isr:
        new = with_new_leader(state, leader, [r for r in state.isr if ctx.is_replica_online(r, tp)])
    else:
        new = with_new_leader(state, leader, [leader], recovering=leader_recovery_supported)
    return ElectionResult(tp, new, live)


def leader_for_reassign(ctx: ControllerContext, tp: TopicPartition, state: LeaderAndIsr) -> ElectionResult:
    target = ctx.partition_full_replica_assignment(tp).target_replicas
    live = {r for r in target if ctx.is_replica_online(r, tp)}
    leader = reassign_partition_leader(target, state.isr, live)
    return ElectionResult(tp, None if leader is None else with_new_leader(state, leader), target)


def leader_for_preferred(ctx: ControllerContext, tp: TopicPartition, state: LeaderAndIsr) -> ElectionResult:
    assignment = ctx.partition_replica_assignment(tp)
    live = {r for r in assignment if ctx.is_replica_online(r, tp)}
    leader = preferred_replica_leader(assignment, state.isr, live)
    return ElectionResult(tp, None if leader is None else with_new_leader(state, leader), assignment)


def leader_for_controlled_shutdown(ctx: ControllerContext, tp: TopicPartition,
                                   state: LeaderAndIsr) -> ElectionResult:
    """The leader is shutting down: move leadership to a live ISR member that is not shutting down, and drop
    every shutting-down broker from the ISR."""
    assignment = ctx.partition_replica_assignment(tp)
    live = [r for r in assignment if ctx.is_replica_online(r, tp, include_shutting_down=True)]
    shutting = set(ctx.shutting_down_broker_ids)
    leader = controlled_shutdown_leader(assignment, state.isr, set(live), shutting)
    if leader is None:
        return ElectionResult(tp, None, live)
    return ElectionResult(tp, with_new_leader(state, leader, [r for r in state.isr if r not in shutting]), live)
