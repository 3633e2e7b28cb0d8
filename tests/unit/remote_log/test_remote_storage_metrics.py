"""Kafka 3.9's RemoteStorageMetrics (kafka.server:type=BrokerTopicMetrics) as the RemoteLogManager, the remote reader
and the collector count and export them: copies (requests, bytes once committed, errors), deletes, remote fetches,
the copy lag and the remote size/count gauges per partition, summed per topic and over all topics, gone with
leadership; absent from a scrape when tiered storage is off."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import pytest

from broker.stats import REMOTE_GAUGES, REMOTE_METERS, RemoteStorageStats
from broker.remote_log.remote_index_cache import RemoteIndexCache
from broker.remote_log.remote_log_reader import RemoteLogReader
from broker.storage.config import LogConfig
from broker.storage.remote.storage_manager import RemoteStorageException
from tests.unit.metrics.test_collector import partition, scrape, sources

from .test_remote_log_manager import ONE, TIP, Env

Samples = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]
BTM = "kafka_server_brokertopicmetrics_"


def meters(stats: RemoteStorageStats, topic: str) -> Dict[str, int]:
    c = stats.topic(topic)
    return {attr: getattr(c, attr) for attr, _ in REMOTE_METERS if getattr(c, attr)}


def test_copies_count_requests_bytes_lag_and_remote_size(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=-2))
    try:
        e.append(5)  # [0,1] [2,3] [4 active]
        e.log.update_high_watermark(3)  # [2,3] is not below the HW yet: it stays behind
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        st = rlm.stats
        seg = e.log.segments[0].size
        assert meters(st, "tiered") == {"copy_requests": 1, "copy_bytes": seg}
        assert st.all_topics.copy_requests == 1 and st.all_topics.copy_bytes == seg
        assert st.gauges["copy_lag_segments"] == {("tiered", 0): 1}
        assert st.gauges["copy_lag_bytes"] == {("tiered", 0): e.log.segments[1].size}
        assert st.gauges["metadata_count"] == {("tiered", 0): 1}
        assert st.gauges["log_size_bytes"] == {("tiered", 0): seg}
        e.log.update_high_watermark(5)
        rlm.run_once()
        assert meters(st, "tiered") == {"copy_requests": 2, "copy_bytes": seg + e.log.segments[1].size}
        assert st.gauges["copy_lag_segments"] == {("tiered", 0): 0}
        assert st.gauges["copy_lag_bytes"] == {("tiered", 0): 0}
        assert st.gauges["metadata_count"] == {("tiered", 0): 2}
        # losing leadership: the partition's gauges go (the meters keep counting from start)
        rlm.on_leadership_change({}, {TIP})
        assert all(not values for values in st.gauges.values())
        assert st.all_topics.copy_requests == 2
    finally:
        e.log.close()


def test_a_failed_copy_counts_an_error_and_the_lag_grows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=-2))
    try:
        e.append(5)
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())

        def fail(*a: object) -> None:
            raise RemoteStorageException("down")
        monkeypatch.setattr(e.rsm, "copy_log_segment_data", fail)
        rlm.run_once()
        rlm.run_once()
        st = rlm.stats
        assert meters(st, "tiered") == {"copy_requests": 2, "copy_errors": 2}  # each run: the first segment
        assert st.gauges["copy_lag_segments"] == {("tiered", 0): 2}  # recorded though nothing was copied
        # the COPY_SEGMENT_STARTED entries left by the failures are metadata too (Kafka counts every listed one)
        assert st.gauges["metadata_count"] == {("tiered", 0): 2}
        monkeypatch.undo()
        rlm.run_once()
        assert meters(st, "tiered")["copy_requests"] == 4 and st.topic("tiered").copy_errors == 2
        assert st.gauges["copy_lag_segments"] == {("tiered", 0): 0}
        # a cancelled task's failure is not an error (Kafka's !isCancelled())
        task = rlm.leader_copy_tasks[TIP]
        task.cancelled = True

        def boom(log: object) -> None:
            raise RemoteStorageException("down")
        monkeypatch.setattr(task, "_copy_segments", boom)
        with pytest.raises(RemoteStorageException):
            task.execute(e.log)
        assert st.topic("tiered").copy_errors == 2
    finally:
        e.log.close()


def test_deletes_count_requests_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=1000, local_retention_ms=0))
    try:
        e.append(4, ts=e.clock.now_ms - 5000)
        e.append(1)  # [0,1] [2,3] expired; [4] active
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())

        def fail(*a: object) -> None:
            raise RemoteStorageException("down")
        monkeypatch.setattr(e.rsm, "delete_log_segment_data", fail)
        rlm.run_once()  # copies both, then the first delete fails
        st = rlm.stats
        assert st.topic("tiered").delete_requests == 1 and st.topic("tiered").delete_errors == 1
        monkeypatch.undo()
        rlm.run_once()
        assert st.topic("tiered").delete_requests == 3 and st.topic("tiered").delete_errors == 1
        assert st.all_topics.delete_requests == 3
        rlm.run_once()  # the next sweep sees no remote segment left
        assert st.gauges["metadata_count"] == {("tiered", 0): 0}
        assert st.gauges["log_size_bytes"] == {("tiered", 0): 0}
    finally:
        e.log.close()


def test_remote_fetches_count_requests_bytes_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=0))
    try:
        e.append(5)
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        reader = RemoteLogReader(e.rsm, rlm.rlmm, RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs")), rlm.stats)
        epochs = e.log.leader_epoch_cache
        got = reader.read(TIP, epochs, 0, 1 << 20).records
        assert len(got) == 2 * ONE
        st = rlm.stats
        assert (st.topic("tiered").fetch_requests, st.topic("tiered").fetch_bytes) == (1, 2 * ONE)

        def fail(*a: object) -> None:
            raise RemoteStorageException("down")
        monkeypatch.setattr(e.rsm, "fetch_log_segment", fail)
        with pytest.raises(RemoteStorageException):
            reader.read(TIP, epochs, 0, 1 << 20)
        assert meters(st, "tiered") == {"copy_requests": 2, "copy_bytes": st.topic("tiered").copy_bytes,
                                        "fetch_requests": 2, "fetch_bytes": 2 * ONE, "fetch_errors": 1}
        assert st.all_topics.fetch_errors == 1
    finally:
        e.log.close()


def test_gauges_are_summed_per_topic_and_over_all_topics() -> None:
    st = RemoteStorageStats()
    st.set_gauge("copy_lag_bytes", "a", 0, 10)
    st.set_gauge("copy_lag_bytes", "a", 1, 5)
    st.set_gauge("copy_lag_bytes", "b", 0, 1)
    assert st.gauge("copy_lag_bytes") == (16, {"a": 15, "b": 1})
    st.remove_partition("a", 1)
    assert st.gauge("copy_lag_bytes") == (11, {"a": 10, "b": 1})
    assert st.gauge("metadata_count") == (0, {})


def test_scrape_exports_kafkas_names_with_and_without_the_topic_label() -> None:
    st = RemoteStorageStats()
    st.record_copy_request("a")
    st.record_copy_bytes("a", 1000)
    st.record_copy_error("gone")  # no partition here any more: only in the all-topics series
    st.record_fetch_request("a")
    st.record_fetch_bytes("a", 300)
    st.record_fetch_error("a")
    st.record_delete_request("a")
    st.record_delete_error("a")
    st.record_build_aux_state_request("a")
    st.record_build_aux_state_error("a")
    st.set_gauge("copy_lag_segments", "a", 0, 2)
    st.set_gauge("copy_lag_segments", "a", 1, 3)
    st.set_gauge("log_size_bytes", "a", 0, 4096)
    out: Samples = scrape(sources([partition("a", 0), partition("a", 1)], remote=st))
    a = (("topic", "a"),)
    assert out[(BTM + "remotecopybytes_total", ())] == 1000 and out[(BTM + "remotecopybytes_total", a)] == 1000
    assert out[(BTM + "remotecopyrequests_total", a)] == 1
    assert out[(BTM + "remotecopyerrors_total", ())] == 1
    assert (BTM + "remotecopyerrors_total", (("topic", "gone"),)) not in out
    assert out[(BTM + "remotefetchbytes_total", a)] == 300
    assert out[(BTM + "remotefetchrequests_total", a)] == 1
    assert out[(BTM + "remotefetcherrors_total", a)] == 1
    assert out[(BTM + "remotedeleterequests_total", a)] == 1
    assert out[(BTM + "remotedeleteerrors_total", a)] == 1
    assert out[(BTM + "buildremotelogauxstaterequests_total", a)] == 1
    assert out[(BTM + "buildremotelogauxstateerrors_total", a)] == 1
    assert out[(BTM + "remotecopylagsegments", a)] == 5 and out[(BTM + "remotecopylagsegments", ())] == 5
    assert out[(BTM + "remotelogsizebytes", a)] == 4096
    assert out[(BTM + "remotelogmetadatacount", ())] == 0
    assert out[(BTM + "remotecopylagbytes", ())] == 0


def test_no_remote_storage_family_when_tiered_storage_is_off() -> None:
    out = scrape(sources([partition("a", 0)]))
    names = {name for name, _ in out}
    for _, meter in REMOTE_METERS:
        assert BTM + meter[:-len("PerSec")].lower() + "_total" not in names
    for _, gauge in REMOTE_GAUGES:
        assert BTM + gauge.lower() not in names
    assert BTM + "bytesin_total" in names


def test_delete_lag_and_size_computation_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RemoteDeleteLagSegments/Bytes: what the retention run found to delete, lowered after each deletion (a failed
    one leaves it); RemoteLogSizeComputationTime: the ms the listing and the size took, for retention.bytes only."""
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=1000, retention_bytes=1 << 30,
                                local_retention_ms=0))
    try:
        e.append(4, ts=e.clock.now_ms - 5000)
        e.append(1)  # [0,1] [2,3] expired; [4] active
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        st = rlm.stats
        rlm.leader_copy_tasks[TIP].run()  # both copied, nothing deleted yet
        sizes = [s.size for s in e.log.segments[:2]]
        listing = rlm.rlmm.list_remote_log_segments

        def slow_listing(*a: object) -> object:
            e.clock.advance(7)
            return listing(*a)  # type: ignore[arg-type]
        monkeypatch.setattr(rlm.rlmm, "list_remote_log_segments", slow_listing)
        calls = []

        def fail_second(md: object) -> None:
            calls.append(md)
            if len(calls) == 2:
                raise RemoteStorageException("down")
        monkeypatch.setattr(e.rsm, "delete_log_segment_data", fail_second)
        rlm.leader_expiration_tasks[TIP].run()  # the first delete goes through, the second fails
        assert st.gauges["delete_lag_segments"] == {("tiered", 0): 1}
        assert st.gauges["delete_lag_bytes"] == {("tiered", 0): sizes[1]}
        assert st.gauges["log_size_computation_time"] == {("tiered", 0): 7}
        rlm.leader_expiration_tasks[TIP].run()  # the interrupted deletion is retried
        assert st.gauges["delete_lag_segments"] == {("tiered", 0): 0}
        assert st.gauges["delete_lag_bytes"] == {("tiered", 0): 0}
        samples = scrape(sources([partition("tiered", 0)], remote=st))
        assert samples[(BTM + "remotedeletelagsegments", (("topic", "tiered"),))] == 0
        assert samples[(BTM + "remotelogsizecomputationtime", ())] == 7
        rlm.on_leadership_change({}, {TIP})  # the partition's gauges go with its leadership
        assert not st.gauges["delete_lag_bytes"] and not st.gauges["log_size_computation_time"]
    finally:
        e.log.close()


def test_size_computation_time_only_with_retention_bytes(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=-2))
    try:
        e.append(3)
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        assert rlm.stats.gauges["log_size_computation_time"] == {}
        assert rlm.stats.gauges["delete_lag_segments"] == {("tiered", 0): 0}
        assert rlm.tasks_avg_idle_percent() == 1.0  # nothing running on the copier pool
    finally:
        e.log.close()
