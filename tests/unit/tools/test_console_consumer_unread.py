"""UnreadPartitions: a group console consumer commits the partitions it printed nothing from at the offset it
started from, as Kafka's consumer commits every assigned partition (a fake consumer stands in for librdkafka)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tools.cli.console_consumer import UnreadPartitions

INVALID = -1001


class FakeConsumer:
    def __init__(self, starts: Dict[Tuple[str, int], int], positions: Dict[Tuple[str, int], int],
                 committed: Dict[Tuple[str, int], int], fail_lookup: bool = False) -> None:
        self.starts, self.positions, self.committed_offsets = starts, positions, committed
        self.fail_lookup = fail_lookup
        self.assigned: List[TopicPartition] = []
        self.commits: List[List[Tuple[str, int, int]]] = []
        self.lookups: List[List[int]] = []

    def offsets_for_times(self, parts: List[TopicPartition], timeout: float) -> List[TopicPartition]:
        if self.fail_lookup:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        self.lookups.append([tp.offset for tp in parts])
        return [TopicPartition(tp.topic, tp.partition, self.starts[(tp.topic, tp.partition)]) for tp in parts]

    def assignment(self) -> List[TopicPartition]:
        return list(self.assigned)

    def position(self, parts: List[TopicPartition]) -> List[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), INVALID))
                for tp in parts]

    def committed(self, parts: List[TopicPartition], timeout: float) -> List[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets.get((tp.topic, tp.partition), INVALID))
                for tp in parts]

    def commit(self, offsets: Optional[List[TopicPartition]] = None, asynchronous: bool = True) -> None:
        assert offsets is not None and not asynchronous
        self.commits.append(sorted((tp.topic, tp.partition, tp.offset) for tp in offsets))


def _assign(unread: UnreadPartitions, consumer: FakeConsumer, n: int) -> List[TopicPartition]:
    parts = [TopicPartition("t", p) for p in range(n)]
    unread.on_assign(consumer, parts)
    consumer.assigned = parts
    return parts


def test_only_partitions_without_records_or_offsets_are_committed_at_their_start() -> None:
    c = FakeConsumer(starts={("t", 0): 0, ("t", 1): 4, ("t", 2): 7, ("t", 3): 2},
                     positions={("t", 0): 5}, committed={("t", 2): 7})
    unread = UnreadPartitions(-2)
    _assign(unread, c, 4)
    assert c.lookups == [[-2, -2, -2, -2]]  # earliest, by ListOffsets timestamp -2
    unread.commit(c)
    # 0 was read from (librdkafka commits it), 2 had an offset: 1 and 3 are committed where the consumer started
    assert c.commits == [[("t", 1, 4), ("t", 3, 2)]]


def test_latest_looks_up_by_timestamp_minus_one_and_nothing_to_do_commits_nothing() -> None:
    c = FakeConsumer(starts={("t", 0): 9}, positions={("t", 0): 12}, committed={})
    unread = UnreadPartitions(-1)
    _assign(unread, c, 1)
    assert c.lookups == [[-1]]
    unread.commit(c)
    assert c.commits == []


def test_revoked_partitions_are_committed_then_forgotten() -> None:
    c = FakeConsumer(starts={("t", 0): 3, ("t", 1): 6}, positions={}, committed={})
    unread = UnreadPartitions(-2)
    parts = _assign(unread, c, 2)
    unread.on_revoke(c, parts[1:])
    c.assigned = parts[:1]
    assert c.commits == [[("t", 1, 6)]]
    unread.commit(c)
    assert c.commits == [[("t", 1, 6)], [("t", 0, 3)]]
    assert set(unread.start) == {("t", 0)}


def test_a_failed_lookup_leaves_the_commit_to_librdkafka() -> None:
    c = FakeConsumer(starts={}, positions={}, committed={}, fail_lookup=True)
    unread = UnreadPartitions(-2)
    _assign(unread, c, 2)
    unread.commit(c)
    assert c.commits == [] and unread.start == {}
