"""Rack-aware replica assignment, as Kafka's AdminUtils places replicas across racks."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from broker.cluster.assignment import (RackInfoMissingError, assign_replicas, assign_replicas_rack_aware,
                                       assign_replicas_to_brokers, rack_alternated_brokers)


def test_rack_alternated_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({k: v for k, v in racks.items() if k != 5}) == [0, 3, 1, 4, 2]
    nine = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_brokers(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_known_rack_aware_layout() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    plan = assign_replicas_to_brokers(racks, 7, 3, start_index=0, shift=0)
    assert plan == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
                    6: [0, 4, 2]}


@pytest.mark.parametrize("seed", range(5))
def test_every_partition_spans_all_racks_when_rf_equals_racks(seed: int) -> None:
    racks = {b: f"r{b % 3}" for b in range(9)}
    plan = assign_replicas_rack_aware(racks, 18, 3, rng=random.Random(seed))
    for replicas in plan.values():
        assert len(set(replicas)) == 3 and {racks[r] for r in replicas} == {"r0", "r1", "r2"}
    # even leader and replica counts per broker (equal-size racks, RF = number of racks)
    leaders = Counter(r[0] for r in plan.values())
    assert set(leaders.values()) == {2}
    assert set(Counter(b for r in plan.values() for b in r).values()) == {6}


def test_more_replicas_than_racks_reuses_racks_but_never_brokers() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    plan = assign_replicas_rack_aware(racks, 8, 3, rng=random.Random(1))
    for replicas in plan.values():
        assert len(set(replicas)) == 3 and {racks[r] for r in replicas} == {"a", "b"}


def test_unbalanced_racks() -> None:
    racks = {1: "a", 2: "b", 3: "b", 4: "b"}
    plan = assign_replicas_rack_aware(racks, 4, 2, start_index=0, shift=0)
    for replicas in plan.values():
        assert {racks[r] for r in replicas} == {"a", "b"}


def test_dispatch_and_validation() -> None:
    assert assign_replicas_to_brokers({0: None, 1: None, 2: None}, 6, 2, start_index=0, shift=0) == \
        assign_replicas([0, 1, 2], 6, 2, start_index=0, shift=0)
    with pytest.raises(RackInfoMissingError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers({0: "a", 1: None}, 1, 1)
    with pytest.raises(ValueError, match="larger than available brokers: 2"):
        assign_replicas_to_brokers({0: "a", 1: "b"}, 1, 3)
    with pytest.raises(ValueError, match="Number of partitions must be larger than 0"):
        assign_replicas_to_brokers({0: "a"}, 0, 1)
    with pytest.raises(ValueError, match="Replication factor must be larger than 0"):
        assign_replicas_to_brokers({0: "a"}, 1, 0)


def test_added_partitions_continue_the_rack_aware_numbering() -> None:
    racks = {0: "a", 1: "b", 2: "c"}
    full = assign_replicas_rack_aware(racks, 6, 2, start_index=1, shift=2)
    tail = assign_replicas_rack_aware(racks, 3, 2, start_partition=3, start_index=1, shift=2)
    assert sorted(tail) == [3, 4, 5]
    assert all(tail[p][0] == full[p][0] for p in tail)  # the leader rotation continues
