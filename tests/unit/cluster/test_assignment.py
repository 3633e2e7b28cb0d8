"""Rack-unaware replica assignment, as Kafka spreads leaders and followers."""
import random
from collections import Counter

import pytest

from broker.cluster.assignment import assign_replicas


def test_known_layout() -> None:
    # start index 0, shift 0 over brokers 0..2: leaders rotate, followers follow.
    plan = assign_replicas([0, 1, 2], 6, 2, start_index=0, shift=0)
    assert plan == {0: [0, 1], 1: [1, 2], 2: [2, 0], 3: [0, 2], 4: [1, 0], 5: [2, 1]}


@pytest.mark.parametrize("brokers,parts,rf", [([1, 2, 3, 4], 12, 3), ([5], 3, 1), ([1, 2], 7, 2)])
def test_balanced_and_distinct(brokers, parts, rf) -> None:
    plan = assign_replicas(brokers, parts, rf, rng=random.Random(7))
    assert sorted(plan) == list(range(parts))
    for replicas in plan.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in plan.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1 if parts % len(brokers) == 0 else True


def test_too_few_brokers() -> None:
    with pytest.raises(ValueError, match="larger than available brokers"):
        assign_replicas([0], 1, 3)


def test_added_partitions_continue_numbering() -> None:
    plan = assign_replicas([0, 1], 2, 1, start_partition=3)
    assert sorted(plan) == [3, 4]
