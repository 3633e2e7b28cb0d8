"""BrokerCollector: builds every family of :mod:`broker.metrics.names` when Prometheus scrapes.

Counters and histograms come from the hot-path statistics (:mod:`broker.stats`); gauges (partition
counts, under-replicated partitions, log sizes, controller state, consumer-group lag) are computed here, from
the broker's own objects, at scrape time only.

Threading: ``collect`` runs on the endpoint's HTTP thread, never on the event loop. It only reads: each
dict it walks is copied first (one step under the GIL), a log's size is read without its lock (``Log.size_bytes``),
and the only lock it takes is the flush histogram's, so a scrape never holds up the loop.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Protocol, Tuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.metrics import names as n
from broker.stats import (
    LOG_FLUSH_STATS, REMOTE_GAUGES, REMOTE_METERS, BrokerTopicStats, Histogram, RemoteStorageStats, RequestMetrics,
)
from broker.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager

TopicPartition = Tuple[str, int]


class MetricsSources(Protocol):
    """Where gauges are read from (BrokerServer has these attributes; None until built)."""

    replica_manager: Optional["ReplicaManager"]
    controller: Optional[Any]
    group_coordinator: Optional[Any]


def kafka_request_name(key: Any) -> str:
    """Kafka's ApiKeys name ("Produce", "LeaderAndIsr"), the ``request`` tag of RequestMetrics; a str passes."""
    if isinstance(key, str):
        return key
    try:
        return "".join(word.capitalize() for word in ApiKey(key).name.split("_"))
    except ValueError:
        return str(key)


def _summary(spec: n.MetricSpec, rows: List[Tuple[Dict[str, str], Histogram]]) -> Metric:
    """A summary family: quantiles of the recent samples, count and sum since start."""
    family = Metric(spec.name, spec.help, n.SUMMARY)
    for labels, histogram in rows:
        snap = histogram.snapshot()
        for label, value in snap.quantiles:
            family.add_sample(spec.name, dict(labels, quantile=label), value)
        family.add_sample(spec.name + "_count", dict(labels), float(snap.count))
        family.add_sample(spec.name + "_sum", dict(labels), snap.sum)
    return family


class BrokerCollector(Collector):
    """The prometheus_client collector of one broker."""

    def __init__(self, sources: MetricsSources, requests: RequestMetrics, topics: BrokerTopicStats,
                 flush_stats: Histogram = LOG_FLUSH_STATS) -> None:
        self.sources = sources
        self.requests = requests
        self.topics = topics
        self.flush_stats = flush_stats

    def describe(self) -> List[Metric]:
        """No samples at registration time (the families are always the same)."""
        return []

    def collect(self) -> Iterator[Metric]:
        partitions = self._partitions()
        yield from self._topic_metrics(partitions)
        yield from self._remote_storage_metrics(partitions)
        yield from self._request_metrics()
        yield from self._replica_manager(partitions)
        yield from self._purgatories()
        yield from self._controller()
        yield _summary(n.BY_NAME["kafka_log_logflushstats_logflushrateandtimems"], [({}, self.flush_stats)])
        yield self._log_sizes(partitions)
        yield from self._log_dirs()
        yield self._consumer_group_lag(partitions)

    # ------------------------------------------------------------------ sources
    def _partitions(self) -> Dict[TopicPartition, Any]:
        """This broker's partitions that have a log, copied once per scrape."""
        rm = self.sources.replica_manager
        if rm is None:
            return {}
        return {tp: p for tp, p in list(rm.partitions.items()) if p.log is not None and not p.deleted}

    # ------------------------------------------------------------------ families
    def _topic_metrics(self, partitions: Dict[TopicPartition, Any]) -> Iterator[Metric]:
        hosted = {tp[0] for tp in partitions}
        per_topic = [(t, c) for t, c in self.topics.topics() if t in hosted]  # a deleted topic's series goes
        total = self.topics.all_topics
        for name, attr in (("kafka_server_brokertopicmetrics_messagesin", "messages_in"),
                           ("kafka_server_brokertopicmetrics_bytesin", "bytes_in"),
                           ("kafka_server_brokertopicmetrics_bytesout", "bytes_out")):
            spec = n.BY_NAME[name]
            family = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
            family.add_metric([], float(getattr(total, attr)))  # all topics: no label, as Kafka's bean has none
            for topic, counters in per_topic:
                family.add_metric([topic], float(getattr(counters, attr)))
            yield family

    def _rlm(self) -> Any:
        """The RemoteLogManager; None when tiered storage is off."""
        rm = self.sources.replica_manager
        tiered = getattr(rm, "tiered", None) if rm is not None else None
        return getattr(tiered, "rlm", None) if tiered is not None else None

    def _remote_storage(self) -> Optional[RemoteStorageStats]:
        """The RemoteLogManager's statistics; None when tiered storage is off (no such families, as in Kafka)."""
        rlm = self._rlm()
        stats = getattr(rlm, "stats", None) if rlm is not None else None
        return stats if isinstance(stats, RemoteStorageStats) else None

    def _remote_storage_metrics(self, partitions: Dict[TopicPartition, Any]) -> Iterator[Metric]:
        """Kafka 3.9's RemoteStorageMetrics of BrokerTopicMetrics: meters as counters, the partition gauges summed
        per topic and over all topics; a topic's series only while it has a partition here."""
        stats = self._remote_storage()
        if stats is None:
            return
        hosted = {tp[0] for tp in partitions}
        per_topic = [(t, c) for t, c in stats.topics() if t in hosted]
        for attr, meter in REMOTE_METERS:
            spec = n.BY_NAME["kafka_server_brokertopicmetrics_" + meter[:-len("PerSec")].lower()]
            family = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
            family.add_metric([], float(getattr(stats.all_topics, attr)))
            for topic, counters in per_topic:
                family.add_metric([topic], float(getattr(counters, attr)))
            yield family
        for attr, gauge in REMOTE_GAUGES:
            spec = n.BY_NAME["kafka_server_brokertopicmetrics_" + gauge.lower()]
            total, by_topic = stats.gauge(attr)
            gauge_family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
            gauge_family.add_metric([], float(total))
            for topic, value in sorted(by_topic.items()):
                if topic in hosted:
                    gauge_family.add_metric([topic], float(value))
            yield gauge_family
        spec = n.BY_NAME["kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent"]
        yield GaugeMetricFamily(spec.name, spec.help, value=float(self._rlm().tasks_avg_idle_percent()))
        rm = self.sources.replica_manager
        remote_fetch = getattr(rm, "delayed_remote_fetch_purgatory", None)
        spec = n.BY_NAME["kafka_server_delayedremotefetchmetrics_expires"]
        yield CounterMetricFamily(spec.name, spec.help,
                                  value=float(getattr(remote_fetch, "expired", 0) if remote_fetch else 0))

    #: the ReplicaManager's purgatories (attribute), each with Kafka's purgatory name as delayedOperation
    PURGATORIES = ("delayed_produce_purgatory", "delayed_fetch_purgatory", "delayed_delete_records_purgatory",
                   "delayed_elect_leader_purgatory", "delayed_remote_fetch_purgatory")

    def _purgatories(self) -> Iterator[Metric]:
        """Kafka's DelayedOperationPurgatory gauges, PurgatorySize and NumDelayedOperations, per purgatory."""
        rm = self.sources.replica_manager
        found = [p for p in (getattr(rm, a, None) for a in self.PURGATORIES) if p is not None] if rm else []
        for name, read in (("kafka_server_delayedoperationpurgatory_purgatorysize", lambda p: p.watched()),
                           ("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                            lambda p: p.num_delayed())):
            spec = n.BY_NAME[name]
            family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
            for purgatory in found:
                family.add_metric([purgatory.name], float(read(purgatory)))
            yield family

    def _request_metrics(self) -> Iterator[Metric]:
        entries = sorted((kafka_request_name(key), stats) for key, stats in self.requests.entries())
        spec = n.BY_NAME["kafka_network_requestmetrics_requests"]
        family = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
        for name, stats in entries:
            for version, count in stats.versions():
                family.add_metric([name, str(version)], float(count))
        yield family
        yield _summary(n.BY_NAME["kafka_network_requestmetrics_totaltimems"],
                       [({"request": name}, stats.total_time_ms) for name, stats in entries])
        yield _summary(n.BY_NAME["kafka_network_requestmetrics_requestqueuetimems"],
                       [({"request": name}, stats.queue_time_ms) for name, stats in entries])

    def _replica_manager(self, partitions: Dict[TopicPartition, Any]) -> Iterator[Metric]:
        rm = self.sources.replica_manager
        values = {
            "kafka_server_replicamanager_underreplicatedpartitions":
                sum(1 for p in partitions.values() if p.is_under_replicated),
            "kafka_server_replicamanager_partitioncount": len(partitions),
            "kafka_server_replicamanager_leadercount": sum(1 for p in partitions.values() if p.is_leader),
        }
        for name, value in values.items():
            spec = n.BY_NAME[name]
            yield GaugeMetricFamily(spec.name, spec.help, value=float(value))
        for name, attr in (("kafka_server_replicamanager_isrshrinks", "isr_shrinks"),
                           ("kafka_server_replicamanager_isrexpands", "isr_expands")):
            spec = n.BY_NAME[name]
            yield CounterMetricFamily(spec.name, spec.help, value=float(getattr(rm, attr, 0) if rm else 0))

    def _controller(self) -> Iterator[Metric]:
        controller = self.sources.controller
        active = controller is not None and controller.is_active
        # published by the controller's event thread after each event: its context is that thread's alone
        offline = int(getattr(controller, "offline_partitions_count", 0)) if active else 0
        spec = n.BY_NAME["kafka_controller_kafkacontroller_activecontrollercount"]
        yield GaugeMetricFamily(spec.name, spec.help, value=1.0 if active else 0.0)
        spec = n.BY_NAME["kafka_controller_kafkacontroller_offlinepartitionscount"]
        yield GaugeMetricFamily(spec.name, spec.help, value=float(offline))

    def _log_dirs(self) -> Iterator[Metric]:
        """OfflineLogDirectoryCount and, per dir of log.dirs, LogDirectoryOffline (Kafka's LogManager gauges)."""
        rm = self.sources.replica_manager
        lm = rm.log_manager if rm is not None else None
        dirs = list(lm.log_dirs) if lm is not None else []
        offline = set(lm.offline_log_dirs) if lm is not None else set()
        spec = n.BY_NAME["kafka_log_logmanager_offlinelogdirectorycount"]
        yield GaugeMetricFamily(spec.name, spec.help, value=float(len(offline)))
        spec = n.BY_NAME["kafka_log_logmanager_logdirectoryoffline"]
        family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
        for d in dirs:
            family.add_metric([d], 1.0 if d in offline else 0.0)
        yield family

    def _log_sizes(self, partitions: Dict[TopicPartition, Any]) -> Metric:
        spec = n.BY_NAME["kafka_log_log_size"]
        family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
        for (topic, partition), p in sorted(partitions.items()):
            try:
                size = p.log.size_bytes
            except (ValueError, OSError):  # closed under us (deleted or moved): no series this scrape
                continue
            family.add_metric([topic, str(partition)], float(size))
        return family

    def _consumer_group_lag(self, partitions: Dict[TopicPartition, Any]) -> Metric:
        spec = n.BY_NAME["broker_consumer_group_lag"]
        family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
        gc = self.sources.group_coordinator
        if gc is None:
            return family
        rows = []
        for group_id, tp, offset in gc.committed_offsets():
            p = partitions.get(tp)
            if p is None:
                continue
            rows.append((group_id, tp[0], tp[1], max(0, p.log.high_watermark - offset)))
        for group_id, topic, partition, lag in sorted(rows):
            family.add_metric([group_id, topic, str(partition)], float(lag))
        return family


__all__ = ["BrokerCollector", "MetricsSources", "kafka_request_name"]
