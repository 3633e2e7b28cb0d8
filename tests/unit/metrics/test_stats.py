"""The hot-path statistics: histogram count/sum/quantiles over a ring of recent samples, request metrics per
Kafka request name (Fetch split by consumer/follower), BrokerTopicStats per topic and for all topics."""
from __future__ import annotations

import threading
from types import SimpleNamespace as NS

from broker.stats import (FETCH_CONSUMER, FETCH_FOLLOWER, PERCENTILES, SAMPLES, BrokerTopicStats, Histogram,
                                  LockedHistogram, RequestMetrics, quantile)


def test_histogram_counts_sums_and_interpolates_quantiles() -> None:
    h = Histogram()
    for v in range(1, 101):
        h.update(float(v))
    snap = h.snapshot()
    assert snap.count == 100 and snap.sum == 5050.0
    q = dict(snap.quantiles)
    assert [label for label, _ in PERCENTILES] == list(q)
    assert q["0.50"] == 50.5  # pos 0.5 * 101 = 50.5: halfway between the 50th and 51st values
    assert q["0.99"] == 99.99
    assert q["0.999"] == 100.0  # past the last position: the largest value


def test_quantiles_cover_only_the_last_samples_while_count_and_sum_cover_all() -> None:
    h = Histogram()
    for _ in range(SAMPLES):
        h.update(1000.0)
    for _ in range(SAMPLES):
        h.update(1.0)  # the ring now holds only these
    snap = h.snapshot()
    assert snap.count == 2 * SAMPLES and snap.sum == SAMPLES * 1001.0
    assert all(v == 1.0 for _, v in snap.quantiles)


def test_empty_histogram_and_quantile_edges() -> None:
    snap = Histogram().snapshot()
    assert snap.count == 0 and all(v == 0.0 for _, v in snap.quantiles)
    assert quantile([], 0.5) == 0.0
    assert quantile([7.0], 0.5) == 7.0
    assert quantile([1.0, 2.0], 0.1) == 1.0  # before the first position: the smallest value


def test_locked_histogram_loses_no_update_across_threads() -> None:
    h = LockedHistogram()

    def work() -> None:
        for _ in range(5000):
            h.update(1.0)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert h.snapshot().count == 20000 and h.snapshot().sum == 20000.0


def test_request_metrics_per_version_and_fetch_by_sender() -> None:
    m = RequestMetrics()
    m.record(0, 9, 1_000_000, 5_000_000)
    m.record(0, 9, 0, 3_000_000)
    m.record(0, 7, 0, 1_000_000)
    m.record(1, 12, 0, 2_000_000, NS(replica_id=-1))   # consumer (replica_id in the body before v15)
    m.record(1, 15, 0, 2_000_000, NS(replica_state=NS(replica_id=2)))  # follower (v15+: replica_state)
    m.record(1, 11, 0, 2_000_000, NS(replica_id=3))
    entries = dict(m.entries())
    assert set(entries) == {0, 1, FETCH_CONSUMER, FETCH_FOLLOWER}
    produce = entries[0]
    assert produce.versions() == [(7, 1), (9, 2)]
    assert produce.total_time_ms.count == 3 and produce.total_time_ms.snapshot().sum == 9.0
    assert produce.queue_time_ms.snapshot().sum == 1.0
    assert entries[1].versions() == [(11, 1), (12, 1), (15, 1)]
    assert entries[FETCH_CONSUMER].versions() == [(12, 1)]
    assert entries[FETCH_FOLLOWER].versions() == [(11, 1), (15, 1)]


def test_request_metrics_leave_out_fetch_sides_never_seen() -> None:
    m = RequestMetrics()
    m.record(3, 12, 0, 1)
    assert [k for k, _ in m.entries()] == [3]


def test_broker_topic_stats_per_topic_and_all_topics() -> None:
    s = BrokerTopicStats()
    s.record_append("a", 100, 3)
    s.record_append("b", 50, 1)
    s.record_append("a", 10, 1)
    s.record_bytes_out("b", 70)
    topics = dict(s.topics())
    assert (topics["a"].bytes_in, topics["a"].messages_in, topics["a"].bytes_out) == (110, 4, 0)
    assert (topics["b"].bytes_in, topics["b"].messages_in, topics["b"].bytes_out) == (50, 1, 70)
    assert (s.all_topics.bytes_in, s.all_topics.messages_in, s.all_topics.bytes_out) == (160, 5, 70)
