"""Replica assignment for new topics and partitions, as Kafka's AdminUtils does.

Rack-unaware: replicas of partition p start at broker ``(start + p) % n`` and the followers are
spread by a shift that grows every ``n`` partitions, so leaders and followers balance across brokers.
Rack-aware (every broker has broker.rack): the same round robin over a broker list that alternates
racks, each follower skipping brokers on racks that already hold a replica (until all racks do).
"""
from __future__ import annotations

import random
from typing import Dict, List, Mapping, Optional, Sequence


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(brokers: Sequence[int], num_partitions: int, replication_factor: int,
                    start_partition: int = 0, start_index: Optional[int] = None,
                    shift: Optional[int] = None, rng: Optional[random.Random] = None) -> Dict[int, List[int]]:
    """Partition id -> replica list (first = preferred leader). ``brokers`` must hold >= RF ids."""
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise ValueError(f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index
    next_shift = rng.randrange(n) if shift is None else shift
    out: Dict[int, List[int]] = {}
    current = start_partition
    for _ in range(num_partitions):
        if current > 0 and current % n == 0:
            next_shift += 1
        first = (current + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, next_shift, j, n)])
        out[current] = replicas
        current += 1
    return out


class RackInfoMissingError(ValueError):
    """Some brokers have a rack and some do not (Kafka: AdminOperationException, INVALID_REPLICA_ASSIGNMENT)."""


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> List[int]:
    """Brokers ordered by taking one from each rack in turn (racks sorted by name, brokers by id within a rack):
    rack1: 0,1,2 / rack2: 3,4,5 / rack3: 6,7,8 -> 0,3,6,1,4,7,2,5,8."""
    by_rack: Dict[str, List[int]] = {}
    for b, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(b)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out: List[int] = []
    i = 0
    while len(out) < len(broker_racks):
        q = queues[i]
        if q:
            out.append(q.pop(0))
        i = (i + 1) % len(queues)
    return out


def assign_replicas_rack_aware(broker_racks: Mapping[int, str], num_partitions: int, replication_factor: int,
                               start_partition: int = 0, start_index: Optional[int] = None,
                               shift: Optional[int] = None,
                               rng: Optional[random.Random] = None) -> Dict[int, List[int]]:
    """Kafka's rack-aware assignment: leaders round-robin over the rack-alternated broker list; each follower
    is the next broker (shifted as in the rack-unaware case, by shift * number of racks) that is on a rack
    without a replica yet, and not already holding one - unless every rack (broker) already has one."""
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    if replication_factor > n:
        raise ValueError(f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    num_racks = len(set(broker_racks.values()))
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index
    next_shift = rng.randrange(n) if shift is None else shift
    out: Dict[int, List[int]] = {}
    current = max(0, start_partition)
    for _ in range(num_partitions):
        if current > 0 and current % n == 0:
            next_shift += 1
        first = (current + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, next_shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                if ((rack not in racks_used or len(racks_used) == num_racks)
                        and (broker not in brokers_used or len(brokers_used) == n)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[current] = replicas
        current += 1
    return out


def assign_replicas_to_brokers(broker_racks: Mapping[int, Optional[str]], num_partitions: int,
                               replication_factor: int, start_partition: int = 0,
                               start_index: Optional[int] = None, shift: Optional[int] = None,
                               rng: Optional[random.Random] = None) -> Dict[int, List[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokers: {broker id: rack or None} -> plan. Rack-aware when every
    broker has a rack, rack-unaware when none has; a mix raises RackInfoMissingError."""
    if num_partitions <= 0:
        raise ValueError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ValueError("Replication factor must be larger than 0.")
    if replication_factor > len(broker_racks):
        raise ValueError(f"Replication factor: {replication_factor} larger than available brokers: "
                         f"{len(broker_racks)}.")
    racks = {b: r for b, r in broker_racks.items() if r is not None}
    if not racks:
        return assign_replicas(sorted(broker_racks), num_partitions, replication_factor, start_partition,
                               start_index, shift, rng)
    if len(racks) != len(broker_racks):
        raise RackInfoMissingError("Not all brokers have rack information for replica rack aware assignment.")
    return assign_replicas_rack_aware(racks, num_partitions, replication_factor, start_partition, start_index,
                                      shift, rng)
