"""The broker's hot-path statistics: plain counters and sample windows, read at scrape time.

Kafka keeps Yammer meters and histograms; a Python broker cannot afford a metrics library call per request,
so the hot paths here only bump ints and store one sample in a ring (a few hundred nanoseconds per request),
and everything derived (quantiles, per-name totals, Prometheus families) is computed when a scrape asks for it
(:mod:`broker.metrics.collector`). Nothing here imports prometheus_client, so storage, replica and api code can
record without pulling it in, and a broker with the endpoint off pays one ``is None`` test per request.

Threading: :class:`RequestMetrics` and :class:`BrokerTopicStats` are written on the event loop only;
:data:`LOG_FLUSH_STATS` is written by the disk worker threads under its own lock; :class:`RemoteStorageStats`
(tiered storage) by the threads its docstring names, one per field group. Scrapes read from the
endpoint's thread: each reader copies what it reads (``list(...)`` of a dict or list is one step under the GIL),
so a scrape sees a slightly stale but consistent-enough view and never blocks the loop.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Sequence, Tuple, Union

#: how many recent samples a histogram keeps for its quantiles (a power of two; Kafka's reservoir holds 1028,
#: biased towards the last five minutes; this keeps the last SAMPLES values)
SAMPLES = 1024
_MASK = SAMPLES - 1

#: the quantiles Kafka's histograms publish (attribute NNthPercentile) with the label value the JMX exporter's
#: rule gives them: quantile="0.$N" (so 50thPercentile -> "0.50", 999thPercentile -> "0.999")
PERCENTILES: Tuple[Tuple[str, float], ...] = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))

#: highest request version a counter slot exists for (every Kafka 3.9 API stays below it)
MAX_VERSION = 31


class HistogramSnapshot:
    """What a scrape reads from a histogram: the count and sum since start, and quantiles of recent samples."""

    __slots__ = ("count", "sum", "quantiles")

    def __init__(self, count: int, total: float, quantiles: Sequence[Tuple[str, float]]) -> None:
        self.count = count
        self.sum = total
        self.quantiles = tuple(quantiles)


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted samples, interpolated between neighbours as a uniform reservoir does."""
    n = len(ordered)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return float(ordered[0])
    if pos >= n:
        return float(ordered[-1])
    below = ordered[int(pos) - 1]
    above = ordered[int(pos)]
    return float(below + (pos - int(pos)) * (above - below))


class Histogram:
    """Count and sum of every value recorded, plus the last :data:`SAMPLES` values (Kafka's Histogram/Timer).

    :meth:`update` is the hot path: one list store and two additions, no lock (single writer). Values are
    stored as given (request times in integer ns, to spare the hot path a division) and multiplied by ``scale``
    when read (ns -> ms: 1e-6).
    """

    __slots__ = ("count", "sum", "_samples", "scale")

    def __init__(self, scale: float = 1.0) -> None:
        self.count = 0
        self.sum: float = 0
        self._samples: List[float] = [0] * SAMPLES
        self.scale = scale

    def update(self, value: float) -> None:
        n = self.count
        self._samples[n & _MASK] = value
        self.count = n + 1
        self.sum += value

    def snapshot(self) -> HistogramSnapshot:
        count, total, scale = self.count, self.sum, self.scale
        recent = sorted(self._samples[:count] if count < SAMPLES else list(self._samples))
        return HistogramSnapshot(count, total * scale,
                                 [(label, quantile(recent, q) * scale) for label, q in PERCENTILES])


class LockedHistogram(Histogram):
    """A :class:`Histogram` several threads record into (log flushes run on any disk worker)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def update(self, value: float) -> None:
        with self._lock:
            Histogram.update(self, value)

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            return Histogram.snapshot(self)


#: kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs: every segment fsync, in ms (LogSegment.flush)
LOG_FLUSH_STATS = LockedHistogram()


#: the extra RequestMetrics names Kafka gives a Fetch, besides "Fetch" itself, by who sent it
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"


def _fetch_replica_id(request: Any, api_version: int) -> int:
    """The replica id of a decoded Fetch (v15+ carries it in replica_state); -1 for a consumer."""
    if api_version >= 15:
        state = getattr(request, "replica_state", None)
        return int(getattr(state, "replica_id", -1)) if state is not None else -1
    return int(getattr(request, "replica_id", -1))


class RequestStats:
    """One RequestMetrics name: requests per version, total time and queue time (recorded in ns, read in ms)."""

    __slots__ = ("by_version", "total_time_ms", "queue_time_ms")

    def __init__(self) -> None:
        self.by_version: List[int] = [0] * (MAX_VERSION + 1)
        self.total_time_ms = Histogram(scale=1e-6)
        self.queue_time_ms = Histogram(scale=1e-6)

    def record(self, version: int, queue_ns: int, total_ns: int) -> None:
        self.by_version[version & MAX_VERSION] += 1
        # Histogram.update twice, inlined: this runs once per request
        h = self.queue_time_ms
        n = h.count
        h._samples[n & _MASK] = queue_ns
        h.count = n + 1
        h.sum += queue_ns
        h = self.total_time_ms
        n = h.count
        h._samples[n & _MASK] = total_ns
        h.count = n + 1
        h.sum += total_ns

    def versions(self) -> List[Tuple[int, int]]:
        """(version, requests) of every version that saw a request."""
        return [(v, n) for v, n in enumerate(list(self.by_version)) if n]


class RequestMetrics:
    """kafka.network:type=RequestMetrics: per request name, RequestsPerSec{version}, TotalTimeMs and
    RequestQueueTimeMs. Written by the dispatcher once per answered request, on the event loop."""

    def __init__(self) -> None:
        self._by_key: Dict[int, RequestStats] = {}
        self._fetch_consumer = RequestStats()
        self._fetch_follower = RequestStats()

    def record(self, api_key: int, api_version: int, queue_ns: int, total_ns: int, request: Any = None) -> None:
        """One request done: ``queue_ns`` from its arrival to its handler starting, ``total_ns`` to its answer."""
        stats = self._by_key.get(api_key)
        if stats is None:
            stats = self._by_key[api_key] = RequestStats()
        stats.record(api_version, queue_ns, total_ns)
        if api_key == 1:  # Fetch: also FetchConsumer or FetchFollower, as Kafka's RequestChannel names it
            side = self._fetch_follower if _fetch_replica_id(request, api_version) >= 0 else self._fetch_consumer
            side.record(api_version, queue_ns, total_ns)

    def entries(self) -> List[Tuple[Union[int, str], "RequestStats"]]:
        """(API key, or FETCH_CONSUMER / FETCH_FOLLOWER, stats) of everything that saw a request."""
        out: List[Tuple[Union[int, str], RequestStats]] = list(self._by_key.items())
        for name, stats in ((FETCH_CONSUMER, self._fetch_consumer), (FETCH_FOLLOWER, self._fetch_follower)):
            if stats.total_time_ms.count:
                out.append((name, stats))
        return out


class TopicCounters:
    """kafka.server:type=BrokerTopicMetrics for one topic (or all topics): the counts behind its meters."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.messages_in = 0


class BrokerTopicStats:
    """Kafka's BrokerTopicStats: BytesInPerSec / MessagesInPerSec (leader appends, client and coordinator
    origin), BytesOutPerSec (reads for consumers, not followers), per topic and for all topics."""

    def __init__(self) -> None:
        self.all_topics = TopicCounters()
        self._topics: Dict[str, TopicCounters] = {}

    def topic(self, topic: str) -> TopicCounters:
        counters = self._topics.get(topic)
        if counters is None:
            counters = self._topics[topic] = TopicCounters()
        return counters

    def record_append(self, topic: str, size_bytes: int, messages: int) -> None:
        counters = self.topic(topic)
        counters.bytes_in += size_bytes
        counters.messages_in += messages
        total = self.all_topics
        total.bytes_in += size_bytes
        total.messages_in += messages

    def record_bytes_out(self, topic: str, size_bytes: int) -> None:
        self.topic(topic).bytes_out += size_bytes
        self.all_topics.bytes_out += size_bytes

    def topics(self) -> List[Tuple[str, TopicCounters]]:
        return sorted(list(self._topics.items()))


#: the tiered-storage meters of kafka.server:type=BrokerTopicMetrics (Kafka 3.9's RemoteStorageMetrics):
#: (attribute of RemoteTopicCounters, Kafka's meter name)
REMOTE_METERS: Tuple[Tuple[str, str], ...] = (
    ("copy_bytes", "RemoteCopyBytesPerSec"), ("copy_requests", "RemoteCopyRequestsPerSec"),
    ("copy_errors", "RemoteCopyErrorsPerSec"), ("fetch_bytes", "RemoteFetchBytesPerSec"),
    ("fetch_requests", "RemoteFetchRequestsPerSec"), ("fetch_errors", "RemoteFetchErrorsPerSec"),
    ("delete_requests", "RemoteDeleteRequestsPerSec"), ("delete_errors", "RemoteDeleteErrorsPerSec"),
    ("build_aux_requests", "BuildRemoteLogAuxStateRequestsPerSec"),
    ("build_aux_errors", "BuildRemoteLogAuxStateErrorsPerSec"))
#: its per-partition gauges, summed per topic and over all topics (Kafka's BrokerTopicAggregatedMetric)
REMOTE_GAUGES: Tuple[Tuple[str, str], ...] = (
    ("copy_lag_bytes", "RemoteCopyLagBytes"), ("copy_lag_segments", "RemoteCopyLagSegments"),
    ("delete_lag_bytes", "RemoteDeleteLagBytes"), ("delete_lag_segments", "RemoteDeleteLagSegments"),
    ("log_size_bytes", "RemoteLogSizeBytes"), ("metadata_count", "RemoteLogMetadataCount"),
    ("log_size_computation_time", "RemoteLogSizeComputationTime"))


class RemoteTopicCounters:
    """The tiered-storage meters of one topic (or all topics): counts since start, see :data:`REMOTE_METERS`."""

    __slots__ = tuple(attr for attr, _ in REMOTE_METERS)

    def __init__(self) -> None:
        for attr, _ in REMOTE_METERS:
            setattr(self, attr, 0)


class RemoteStorageStats:
    """Kafka 3.9's RemoteStorageMetrics of one broker (those of kafka.server:type=BrokerTopicMetrics), marked where
    Kafka marks them. Owned by the RemoteLogManager; the collector reads it only when tiered storage is on (Kafka
    registers these metrics only with remote.log.storage.system.enable=true).

    Writers: copies on the RemoteLogManager's copier pool and deletes on its expiration pool and leadership thread
    (several threads: under ``_rlm_lock``); remote fetches on the remote reader pool's threads (under
    ``_fetch_lock``); BuildRemoteLogAuxState on the event loop (the replica fetchers); each gauge value is one dict
    store, by the partition's task. Scrapes copy what they read, as for :class:`BrokerTopicStats`."""

    def __init__(self) -> None:
        self.all_topics = RemoteTopicCounters()
        self._topics: Dict[str, RemoteTopicCounters] = {}
        self._fetch_lock = threading.Lock()
        self._rlm_lock = threading.Lock()
        #: gauge attribute -> (topic, partition) -> value, for the partitions this broker leads
        self.gauges: Dict[str, Dict[Tuple[str, int], int]] = {attr: {} for attr, _ in REMOTE_GAUGES}

    def topic(self, topic: str) -> RemoteTopicCounters:
        counters = self._topics.get(topic)
        if counters is None:  # setdefault: two writer threads may create it at once, one object wins
            counters = self._topics.setdefault(topic, RemoteTopicCounters())
        return counters

    def _mark(self, topic: str, attr: str, n: int = 1) -> None:
        for counters in (self.topic(topic), self.all_topics):
            setattr(counters, attr, getattr(counters, attr) + n)

    # the RemoteLogManager's pools
    def record_copy_request(self, topic: str) -> None:
        """A segment handed to the RemoteStorageManager (after COPY_SEGMENT_STARTED)."""
        with self._rlm_lock:
            self._mark(topic, "copy_requests")

    def record_copy_bytes(self, topic: str, size: int) -> None:
        """A segment's bytes, once its COPY_SEGMENT_FINISHED is recorded."""
        with self._rlm_lock:
            self._mark(topic, "copy_bytes", size)

    def record_copy_error(self, topic: str) -> None:
        """A copy run that failed (not one cancelled by a leadership change)."""
        with self._rlm_lock:
            self._mark(topic, "copy_errors")

    def record_delete_request(self, topic: str) -> None:
        with self._rlm_lock:
            self._mark(topic, "delete_requests")

    def record_delete_error(self, topic: str) -> None:
        with self._rlm_lock:
            self._mark(topic, "delete_errors")

    def set_gauge(self, attr: str, topic: str, partition: int, value: int) -> None:
        self.gauges[attr][(topic, partition)] = value

    def remove_partition(self, topic: str, partition: int) -> None:
        """The partition is no longer led here: its gauges go (Kafka's removeRemoteTopicPartitionMetrics)."""
        for values in self.gauges.values():
            values.pop((topic, partition), None)

    # the remote reader pool
    def record_fetch_request(self, topic: str) -> None:
        with self._fetch_lock:
            self._mark(topic, "fetch_requests")

    def record_fetch_bytes(self, topic: str, size: int) -> None:
        with self._fetch_lock:
            self._mark(topic, "fetch_bytes", size)

    def record_fetch_error(self, topic: str) -> None:
        with self._fetch_lock:
            self._mark(topic, "fetch_errors")

    # the event loop (replica fetchers)
    def record_build_aux_state_request(self, topic: str) -> None:
        self._mark(topic, "build_aux_requests")

    def record_build_aux_state_error(self, topic: str) -> None:
        self._mark(topic, "build_aux_errors")

    # scrapes
    def topics(self) -> List[Tuple[str, RemoteTopicCounters]]:
        return sorted(list(self._topics.items()), key=lambda kv: kv[0])

    def gauge(self, attr: str) -> Tuple[int, Dict[str, int]]:
        """(sum over all partitions, topic -> sum over its partitions) of one gauge."""
        per_topic: Dict[str, int] = {}
        for (topic, _), value in list(self.gauges[attr].items()):
            per_topic[topic] = per_topic.get(topic, 0) + value
        return sum(per_topic.values()), per_topic


__all__ = ["Histogram", "LockedHistogram", "HistogramSnapshot", "RequestMetrics", "BrokerTopicStats",
           "TopicCounters", "LOG_FLUSH_STATS", "PERCENTILES", "SAMPLES", "quantile",
           "FETCH_CONSUMER", "FETCH_FOLLOWER", "RemoteStorageStats", "RemoteTopicCounters", "REMOTE_METERS",
           "REMOTE_GAUGES"]
