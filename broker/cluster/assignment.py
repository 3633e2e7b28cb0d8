"""Replica assignment for new topics and partitions, as Kafka's rack-unaware assigner does.

Replicas of partition p start at broker ``(start + p) % n`` and the followers are spread by a
shift that grows every ``n`` partitions, so leaders and followers balance across brokers.
"""
from __future__ import annotations

import random
from typing import Dict, List, Optional, Sequence


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
