"""BrokerCollector over fake broker objects: every family of names.py and nothing else, the values it reads
(partitions, controller context, group offsets), and docs/metrics.md describing exactly those families."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any, Dict, List, Optional, Tuple

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.coordinator.group.state import OffsetAndMetadata
from broker.metrics import names as n
from broker.metrics.collector import BrokerCollector
from broker.stats import BrokerTopicStats, Histogram, RemoteStorageStats, RequestMetrics

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


class FakeLog:
    def __init__(self, size_bytes: int, high_watermark: int) -> None:
        self.size_bytes = size_bytes
        self.high_watermark = high_watermark


class FakePurgatory:
    def __init__(self, name: str, watched: int, delayed: int, expired: int = 0) -> None:
        self.name, self._watched, self._delayed, self.expired = name, watched, delayed, expired

    def watched(self) -> int:
        return self._watched

    def num_delayed(self) -> int:
        return self._delayed


def partition(topic: str, index: int, *, leader: bool = True, urp: bool = False, size: int = 0, hw: int = 0) -> Any:
    return NS(topic=topic, partition=index, log=FakeLog(size, hw), deleted=False, is_leader=leader,
              is_under_replicated=urp)


def sources(parts: List[Any], *, controller: Any = None, groups: Any = None, shrinks: int = 0, expands: int = 0,
            remote: Optional[RemoteStorageStats] = None) -> Any:
    """``remote``: tiered storage on, with these statistics (its RemoteLogManager's)."""
    tiered = NS(rlm=NS(stats=remote, tasks_avg_idle_percent=lambda: 0.75)) if remote is not None else None
    rm = NS(partitions={(p.topic, p.partition): p for p in parts}, isr_shrinks=shrinks, isr_expands=expands,
            log_manager=NS(log_dirs=["/data/a", "/data/b"], offline_log_dirs=["/data/b"]), tiered=tiered,
            delayed_fetch_purgatory=FakePurgatory("Fetch", 3, 2),
            delayed_remote_fetch_purgatory=FakePurgatory("RemoteFetch", 1, 1, expired=4))
    gc = NS(committed_offsets=lambda: [(g, tp, om.offset) for g, group in (groups or {}).items()
                                       for tp, om in group.offsets.items()])
    return NS(replica_manager=rm, controller=controller, group_coordinator=gc)


def scrape(src: Any, requests: RequestMetrics = None, topics: BrokerTopicStats = None,  # type: ignore[assignment]
           flush: Histogram = None) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:  # type: ignore
    """Samples of one scrape in the text format, as Prometheus parses them: {(name, labels): value}."""
    registry = CollectorRegistry()
    registry.register(BrokerCollector(src, requests or RequestMetrics(), topics or BrokerTopicStats(),
                                      flush or Histogram()))
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_exposes_every_family_of_the_table_with_its_type_and_labels() -> None:
    requests = RequestMetrics()
    requests.record(0, 9, 0, 1_000_000)
    topics = BrokerTopicStats()
    topics.record_append("t", 10, 1)
    group = NS(offsets={("t", 0): OffsetAndMetadata(1)})
    remote = RemoteStorageStats()
    remote.record_copy_request("t")
    collector = BrokerCollector(sources([partition("t", 0, hw=2)], groups={"g": group}, remote=remote), requests,
                                topics, Histogram())
    families = {f.name: f for f in collector.collect()}
    assert set(families) == {s.name for s in n.SPECS}
    for spec in n.SPECS:
        family = families[spec.name]
        assert family.type == spec.type, spec.name
        assert family.samples, spec.name
        for s in family.samples:
            assert s.name in spec.sample_names, s.name
            keys = set(s.labels) - {"quantile"}
            assert keys <= set(spec.labels), (spec.name, s.labels)


def test_partition_gauges_log_sizes_and_isr_counters() -> None:
    parts = [partition("a", 0, size=100), partition("a", 1, urp=True, size=50),
             partition("b", 0, leader=False, size=7)]
    samples = scrape(sources(parts, shrinks=2, expands=5))
    assert samples[("kafka_server_replicamanager_partitioncount", ())] == 3
    assert samples[("kafka_server_replicamanager_leadercount", ())] == 2
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
    assert samples[("kafka_server_replicamanager_isrshrinks_total", ())] == 2
    assert samples[("kafka_server_replicamanager_isrexpands_total", ())] == 5
    sizes = {k[1]: v for k, v in samples.items() if k[0] == "kafka_log_log_size"}
    assert sizes == {(("partition", "0"), ("topic", "a")): 100, (("partition", "1"), ("topic", "a")): 50,
                     (("partition", "0"), ("topic", "b")): 7}


def test_deleted_partitions_and_partitions_without_a_log_are_left_out() -> None:
    gone = partition("a", 0)
    gone.deleted = True
    no_log = partition("a", 1)
    no_log.log = None
    samples = scrape(sources([gone, no_log, partition("a", 2)]))
    assert samples[("kafka_server_replicamanager_partitioncount", ())] == 1


def test_controller_gauges_only_on_the_active_controller() -> None:
    # the count the controller's event thread published (tests/unit/cluster/test_controller_metrics.py)
    active = scrape(sources([], controller=NS(is_active=True, offline_partitions_count=2)))
    assert active[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert active[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 2
    other = scrape(sources([], controller=NS(is_active=False, offline_partitions_count=2)))
    assert other[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
    assert other[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0


def test_consumer_group_lag_from_the_high_watermark_and_the_committed_offset() -> None:
    parts = [partition("t", 0, hw=10), partition("t", 1, hw=4)]
    groups = {"g1": NS(offsets={("t", 0): OffsetAndMetadata(7), ("t", 1): OffsetAndMetadata(6),
                                ("elsewhere", 0): OffsetAndMetadata(1)}),
              "g2": NS(offsets={("t", 0): OffsetAndMetadata(10)})}
    samples = scrape(sources(parts, groups=groups))
    lag = {k[1]: v for k, v in samples.items() if k[0] == "broker_consumer_group_lag"}
    assert lag == {
        (("group", "g1"), ("partition", "0"), ("topic", "t")): 3,
        (("group", "g1"), ("partition", "1"), ("topic", "t")): 0,  # committed past the HW: no negative lag
        (("group", "g2"), ("partition", "0"), ("topic", "t")): 0,
    }  # ("elsewhere", 0) has no replica here: no series


def test_topic_counters_with_and_without_the_topic_label() -> None:
    topics = BrokerTopicStats()
    topics.record_append("a", 100, 4)
    topics.record_append("deleted", 5, 1)  # no partition here any more: only in the all-topics total
    topics.record_bytes_out("a", 60)
    samples = scrape(sources([partition("a", 0)]), topics=topics)
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", ())] == 105
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "a"),))] == 100
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 5
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "a"),))] == 4
    assert samples[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "a"),))] == 60
    assert not any(dict(k[1]).get("topic") == "deleted" for k in samples)


def test_request_metrics_and_flush_stats_as_summaries() -> None:
    requests = RequestMetrics()
    for ms in (1, 2, 3, 4):
        requests.record(0, 9, 500_000, ms * 1_000_000)
    requests.record(1, 16, 0, 9_000_000, NS(replica_state=NS(replica_id=1)))
    flush = Histogram()
    flush.update(4.0)
    samples = scrape(sources([]), requests=requests, flush=flush)
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9")))] == 4
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "FetchFollower"),
                                                                    ("version", "16")))] == 1
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 4
    assert samples[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))] == 10
    assert samples[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.50"), ("request", "Produce")))] \
        == 2.5
    assert samples[("kafka_network_requestmetrics_requestqueuetimems", (("quantile", "0.99"),
                                                                        ("request", "Produce")))] == 0.5
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "Fetch"),))] == 1
    assert ("kafka_network_requestmetrics_totaltimems_count", (("request", "FetchConsumer"),)) not in samples
    assert samples[("kafka_log_logflushstats_logflushrateandtimems_count", ())] == 1
    assert samples[("kafka_log_logflushstats_logflushrateandtimems", (("quantile", "0.999"),))] == 4


def test_a_broker_still_starting_exposes_the_families_empty() -> None:
    samples = scrape(NS(replica_manager=None, controller=None, group_coordinator=None))
    assert samples[("kafka_server_replicamanager_partitioncount", ())] == 0
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0


def _doc_rows() -> List[List[str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        if line.startswith("| `"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_docs_metrics_md_lists_every_family_with_its_type_labels_and_mbean() -> None:
    rows = _doc_rows()
    assert len(rows) == len(n.SPECS)
    by_sample = {}
    for name, type_, labels, _meaning, mbean in rows:
        by_sample[name.strip("`")] = (type_, re.findall(r"`([^`]+)`", labels), mbean)
    for spec in n.SPECS:
        listed = spec.sample_names[0]
        assert listed in by_sample, f"docs/metrics.md lacks {listed}"
        type_, labels, mbean = by_sample[listed]
        assert type_ == spec.type, listed
        assert tuple(labels) == spec.labels, listed
        for bean in spec.beans:  # the MBean column names the bean's domain, type and name
            m = re.match(r"([\w.]+)<type=(\w+), name=(\w+)", bean)
            assert m is not None and "{}:type={},name={}".format(*m.groups()) in mbean, (listed, mbean)


def test_offline_log_dirs_are_counted_and_flagged_per_dir() -> None:
    out = scrape(sources([]))
    assert out[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 1.0
    assert out[("kafka_log_logmanager_logdirectoryoffline", (("logDirectory", "/data/a"),))] == 0.0
    assert out[("kafka_log_logmanager_logdirectoryoffline", (("logDirectory", "/data/b"),))] == 1.0


def test_remote_log_manager_and_purgatory_metrics() -> None:
    remote = RemoteStorageStats()
    remote.set_gauge("delete_lag_bytes", "t", 0, 300)
    remote.set_gauge("delete_lag_segments", "t", 0, 3)
    remote.set_gauge("delete_lag_segments", "t", 1, 2)
    remote.set_gauge("log_size_computation_time", "t", 0, 7)
    out = scrape(sources([partition("t", 0), partition("t", 1)], remote=remote))
    assert out[("kafka_server_brokertopicmetrics_remotedeletelagbytes", (("topic", "t"),))] == 300
    assert out[("kafka_server_brokertopicmetrics_remotedeletelagsegments", ())] == 5
    assert out[("kafka_server_brokertopicmetrics_remotelogsizecomputationtime", (("topic", "t"),))] == 7
    assert out[("kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent", ())] == 0.75
    assert out[("kafka_server_delayedremotefetchmetrics_expires_total", ())] == 4
    assert out[("kafka_server_delayedoperationpurgatory_purgatorysize", (("delayedOperation", "Fetch"),))] == 3
    assert out[("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                (("delayedOperation", "RemoteFetch"),))] == 1
    off = scrape(sources([partition("t", 0)]))  # tiered storage off: its families are absent, the purgatories not
    assert not any(k[0].startswith("kafka_log_remote_") or "delayedremotefetch" in k[0] for k in off)
    assert off[("kafka_server_delayedoperationpurgatory_purgatorysize", (("delayedOperation", "RemoteFetch"),))] == 1
