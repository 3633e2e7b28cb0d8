"""The one table of exported metrics: each Prometheus name, and the Kafka MBean it mirrors.

Names follow the Prometheus JMX exporter's Kafka example configuration (prometheus/jmx_exporter,
``example_configs/kafka-2_0_0.yml``, ``lowercaseOutputName: true``), so dashboards and alerts written for a
Kafka broker scraped through that exporter work unchanged. Each entry names the rule of that file it follows:

- ``per-second``: ``kafka.(\\w+)<type=(.+), name=(.+)PerSec\\w*[, k=v]{0,2}><>Count`` -> ``kafka_$1_$2_$3_total``
  (COUNTER), the bean's key/value pairs as labels. A meter's rate is the counter's ``rate()``.
- ``gauge``: ``kafka.(\\w+)<type=(.+), name=(.+)[, k=v]{0,2}><>Value`` -> ``kafka_$1_$2_$3`` (GAUGE).
- ``gauge (dotted domain)``: Kafka's ``kafka.log.remote`` beans, which no rule of that file matches (so it would not
  export them): its generic gauge rule with the domain's dots as underscores, as its ``kafka.coordinator.(\\w+)``
  rule does: ``kafka.log.remote<type=(.+), name=(.+)><>Value`` -> ``kafka_log_remote_$1_$2``.
- ``histogram``: ``kafka.(\\w+)<type=(.+), name=(.+)[, k=v]{0,2}><>Count`` -> ``kafka_$1_$2_$3_count`` and
  ``...><>(\\d+)thPercentile`` -> ``kafka_$1_$2_$3{quantile="0.$N"}``. Exposed here as one Prometheus summary
  family, which gives exactly those two sample names plus ``_sum`` (the file notes the exporter lacks it).

Metrics Kafka has no MBean for carry the project's own ``broker_`` prefix (consumer-group lag, which Kafka
operators get from an external lag exporter).

tests/unit/metrics/test_names.py applies the file's rules to every ``beans`` entry and checks the names here;
docs/metrics.md is this table in prose, checked against it and against what the collector exposes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

COUNTER = "counter"
GAUGE = "gauge"
SUMMARY = "summary"


@dataclass(frozen=True)
class MetricSpec:
    """One exported family. ``name`` is the family name; a counter's samples end in ``_total``, a summary's
    are ``name{quantile}``, ``name_count`` and ``name_sum``."""

    name: str
    type: str
    labels: Tuple[str, ...]
    #: Kafka's MBean (ObjectName, attribute) in the exporter's input form; {x} marks a label value
    beans: Tuple[str, ...]
    rule: str
    help: str

    @property
    def sample_names(self) -> Tuple[str, ...]:
        if self.type == COUNTER:
            return (self.name + "_total",)
        if self.type == SUMMARY:
            return (self.name, self.name + "_count", self.name + "_sum")
        return (self.name,)


_BTM = "kafka.server<type=BrokerTopicMetrics, name={}PerSec{}><>Count"
_RM = "kafka.network<type=RequestMetrics, name={}, request={{request}}><>{}"

SPECS: Tuple[MetricSpec, ...] = (
    MetricSpec("kafka_server_brokertopicmetrics_messagesin", COUNTER, ("topic",),
               (_BTM.format("MessagesIn", ""), _BTM.format("MessagesIn", ", topic={topic}")), "per-second",
               "Records appended as leader (client and coordinator appends); without the topic label: all topics"),
    MetricSpec("kafka_server_brokertopicmetrics_bytesin", COUNTER, ("topic",),
               (_BTM.format("BytesIn", ""), _BTM.format("BytesIn", ", topic={topic}")), "per-second",
               "Record bytes appended as leader; without the topic label: all topics"),
    MetricSpec("kafka_server_brokertopicmetrics_bytesout", COUNTER, ("topic",),
               (_BTM.format("BytesOut", ""), _BTM.format("BytesOut", ", topic={topic}")), "per-second",
               "Record bytes returned to consumers (follower fetches excluded); without the topic label: all topics"),
    MetricSpec("kafka_network_requestmetrics_requests", COUNTER, ("request", "version"),
               ("kafka.network<type=RequestMetrics, name=RequestsPerSec, request={request}, version={version}>"
                "<>Count",), "per-second",
               "Requests answered, per API (Kafka's name; Fetch also as FetchConsumer/FetchFollower) and version"),
    MetricSpec("kafka_network_requestmetrics_totaltimems", SUMMARY, ("request",),
               (_RM.format("TotalTimeMs", "Count"), _RM.format("TotalTimeMs", "99thPercentile")), "histogram",
               "Request time in ms, from the request's arrival to its response being handed to the socket"),
    MetricSpec("kafka_network_requestmetrics_requestqueuetimems", SUMMARY, ("request",),
               (_RM.format("RequestQueueTimeMs", "Count"), _RM.format("RequestQueueTimeMs", "99thPercentile")),
               "histogram", "Time in ms a request waited between its arrival and its handler starting"),
    MetricSpec("kafka_server_replicamanager_underreplicatedpartitions", GAUGE, (),
               ("kafka.server<type=ReplicaManager, name=UnderReplicatedPartitions><>Value",), "gauge",
               "Partitions led here whose ISR is smaller than their replica set"),
    MetricSpec("kafka_server_replicamanager_partitioncount", GAUGE, (),
               ("kafka.server<type=ReplicaManager, name=PartitionCount><>Value",), "gauge",
               "Partitions with a replica on this broker"),
    MetricSpec("kafka_server_replicamanager_leadercount", GAUGE, (),
               ("kafka.server<type=ReplicaManager, name=LeaderCount><>Value",), "gauge",
               "Partitions led by this broker"),
    MetricSpec("kafka_server_replicamanager_isrshrinks", COUNTER, (),
               ("kafka.server<type=ReplicaManager, name=IsrShrinksPerSec><>Count",), "per-second",
               "ISR shrinks of partitions led here, counted when the controller commits them"),
    MetricSpec("kafka_server_replicamanager_isrexpands", COUNTER, (),
               ("kafka.server<type=ReplicaManager, name=IsrExpandsPerSec><>Count",), "per-second",
               "ISR expansions of partitions led here, counted when the controller commits them"),
    MetricSpec("kafka_controller_kafkacontroller_activecontrollercount", GAUGE, (),
               ("kafka.controller<type=KafkaController, name=ActiveControllerCount><>Value",), "gauge",
               "1 on the broker that is the active controller, else 0"),
    MetricSpec("kafka_controller_kafkacontroller_offlinepartitionscount", GAUGE, (),
               ("kafka.controller<type=KafkaController, name=OfflinePartitionsCount><>Value",), "gauge",
               "Partitions without a live leader (topics being deleted excluded); reported by the active controller, "
               "0 elsewhere"),
    MetricSpec("kafka_log_logflushstats_logflushrateandtimems", SUMMARY, (),
               ("kafka.log<type=LogFlushStats, name=LogFlushRateAndTimeMs><>Count",
                "kafka.log<type=LogFlushStats, name=LogFlushRateAndTimeMs><>99thPercentile"), "histogram",
               "Log segment flushes (fsync of the segment and its indexes) and their time in ms"),
    MetricSpec("kafka_log_log_size", GAUGE, ("topic", "partition"),
               ("kafka.log<type=Log, name=Size, topic={topic}, partition={partition}><>Value",), "gauge",
               "Bytes of a partition's log on this broker (all segments)"),
    MetricSpec("kafka_log_logmanager_offlinelogdirectorycount", GAUGE, (),
               ("kafka.log<type=LogManager, name=OfflineLogDirectoryCount><>Value",), "gauge",
               "Log dirs of this broker taken offline after an I/O error (KIP-112)"),
    MetricSpec("kafka_log_logmanager_logdirectoryoffline", GAUGE, ("logDirectory",),
               ("kafka.log<type=LogManager, name=LogDirectoryOffline, logDirectory={logDirectory}><>Value",), "gauge",
               "1 when the log dir is offline after an I/O error, else 0; one series per dir of log.dirs"),
    *(MetricSpec(f"kafka_server_brokertopicmetrics_{meter[:-len('PerSec')].lower()}", COUNTER, ("topic",),
                 (_BTM.format(meter[:-len("PerSec")], ""), _BTM.format(meter[:-len("PerSec")], ", topic={topic}")),
                 "per-second", help_) for meter, help_ in (
        ("RemoteCopyBytesPerSec", "Tiered storage: bytes of segments copied to remote storage (counted once the copy "
         "is committed); without the topic label: all topics"),
        ("RemoteCopyRequestsPerSec", "Tiered storage: segments handed to the remote storage manager for copying"),
        ("RemoteCopyErrorsPerSec", "Tiered storage: copy runs of a partition that failed (retried at the next run)"),
        ("RemoteFetchBytesPerSec", "Tiered storage: record bytes read from remote storage for consumers"),
        ("RemoteFetchRequestsPerSec", "Tiered storage: reads of remote storage for consumers' fetches"),
        ("RemoteFetchErrorsPerSec", "Tiered storage: reads of remote storage that failed"),
        ("RemoteDeleteRequestsPerSec", "Tiered storage: remote segments deleted (retention, topic deletion)"),
        ("RemoteDeleteErrorsPerSec", "Tiered storage: remote segment deletions that failed"),
        ("BuildRemoteLogAuxStateRequestsPerSec", "Tiered storage: followers rebuilding a partition's leader epochs "
         "and producer state from remote storage"),
        ("BuildRemoteLogAuxStateErrorsPerSec", "Tiered storage: such rebuilds that failed"))),
    *(MetricSpec(f"kafka_server_brokertopicmetrics_{gauge.lower()}", GAUGE, ("topic",),
                 (f"kafka.server<type=BrokerTopicMetrics, name={gauge}><>Value",
                  f"kafka.server<type=BrokerTopicMetrics, name={gauge}, topic={{topic}}><>Value"), "gauge", help_)
      for gauge, help_ in (
        ("RemoteCopyLagBytes", "Tiered storage: bytes of rolled local segments not yet copied, on the partitions led "
         "here; without the topic label: all topics"),
        ("RemoteCopyLagSegments", "Tiered storage: rolled local segments not yet copied, on the partitions led here"),
        ("RemoteDeleteLagBytes", "Tiered storage: bytes of remote segments the last retention run of the "
         "partitions led here found to delete and has not deleted yet"),
        ("RemoteDeleteLagSegments", "Tiered storage: remote segments left to delete by that run"),
        ("RemoteLogSizeBytes", "Tiered storage: bytes of the remote segments of the partitions led here"),
        ("RemoteLogMetadataCount", "Tiered storage: remote segment metadata entries of the partitions led here"),
        ("RemoteLogSizeComputationTime", "Tiered storage: ms the last retention run took to add up the remote log's "
         "size (partitions with retention.bytes only)"))),
    MetricSpec("kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent", GAUGE, (),
               ("kafka.log.remote<type=RemoteLogManager, name=RemoteLogManagerTasksAvgIdlePercent><>Value",),
               "gauge (dotted domain)",
               "Tiered storage: fraction of the copier pool's threads not running a copy task (1 idle, 0 all busy)"),
    MetricSpec("kafka_server_delayedremotefetchmetrics_expires", COUNTER, (),
               ("kafka.server<type=DelayedRemoteFetchMetrics, name=ExpiresPerSec><>Count",), "per-second",
               "Tiered storage: consumer fetches whose remote read outlasted remote.fetch.max.wait.ms"),
    MetricSpec("kafka_server_delayedoperationpurgatory_purgatorysize", GAUGE, ("delayedOperation",),
               ("kafka.server<type=DelayedOperationPurgatory, name=PurgatorySize, "
                "delayedOperation={delayedOperation}><>Value",), "gauge",
               "Watches (operation, key) in a purgatory of the replica manager"),
    MetricSpec("kafka_server_delayedoperationpurgatory_numdelayedoperations", GAUGE, ("delayedOperation",),
               ("kafka.server<type=DelayedOperationPurgatory, name=NumDelayedOperations, "
                "delayedOperation={delayedOperation}><>Value",), "gauge",
               "Operations waiting in a purgatory of the replica manager"),
    MetricSpec("broker_consumer_group_lag", GAUGE, ("group", "topic", "partition"), (), "project's own",
               "High watermark minus the group's committed offset (0 if above it), for groups coordinated here "
               "on partitions with a replica here"),
)

BY_NAME: Dict[str, MetricSpec] = {s.name: s for s in SPECS}

__all__ = ["MetricSpec", "SPECS", "BY_NAME", "COUNTER", "GAUGE", "SUMMARY"]
