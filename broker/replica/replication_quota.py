"""Replication throttling (Kafka's ReplicationQuotaManager, with its SimpleRate sensor semantics).

Three instances live on a broker (:class:`ReplicationQuotas`):

- ``leader``: a leader leaves a throttled partition's data out of a follower's Fetch response while
  the bytes it served for throttled partitions exceed ``leader.replication.throttled.rate``;
- ``follower``: a follower's replica fetcher leaves throttled partitions out of its Fetch requests while
  the bytes it fetched for them exceed ``follower.replication.throttled.rate``;
- ``alter_log_dirs``: moving a replica between log dirs copies at most
  ``replica.alter.log.dirs.io.max.bytes.per.second``.

Which partitions are throttled comes from the topic configs ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas``: ``"*"`` (every replica of the topic) or
``"partition:broker,..."``, of which a broker keeps the partitions listed with its own id
(:func:`parse_throttled_replicas`, Kafka's TopicConfigHandler.parseThrottledPartitions). A replica in
the ISR is never throttled (Kafka's shouldLeaderThrottle / shouldFollowerThrottle).

The rate is measured as Kafka's ``SimpleRate`` over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds`` each: the bytes recorded in the retained samples divided by
the time since the oldest sample started, but never by less than one window. The quota is exceeded
while that rate is above the bound; a bound of Long.MAX_VALUE (the default) never is.

Loop affinity: event loop only (the fetchers, the Fetch path and the log dir mover all run there).
"""
from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from broker.util import clock as _clock_mod

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]

LONG_MAX = 9223372036854775807
#: Kafka's QuotaConfigs.QUOTA_BYTES_PER_SECOND_DEFAULT: unthrottled
UNLIMITED = LONG_MAX
#: Kafka's Constants.AllReplicas: every partition of the topic ("*")
ALL_REPLICAS: Tuple[int, ...] = (-1,)
#: ReplicationQuotaManagerConfig.INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS: an idle sensor starts afresh
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def _mono_ms() -> int:
    """The rate windows' clock: monotonic. Kafka's sensors use time.milliseconds(), where a wall-clock jump back
    stops the windows rolling (throttling on old bytes for as long as the jump) and one forward empties them; the
    windows are never stored or sent, so the monotonic clock is only safer."""
    return _clock_mod.mono_ms()


class _Sample:
    __slots__ = ("value", "event_count", "start_ms", "last_event_ms")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SimpleRate:
    """Kafka's ``SimpleRate`` over a ``WindowedSum`` (SampledStat with ``samples + 1`` slots), in units/second."""

    def __init__(self, num_samples: int, window_ms: int) -> None:
        self.num_samples = max(1, int(num_samples))
        self.window_ms = max(1, int(window_ms))
        self._samples: List[_Sample] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.num_samples + 1)
        if self._current >= len(self._samples):
            s = _Sample(now_ms)
            self._samples.append(s)
            return s
        s = self._samples[self._current]
        s.reset(now_ms)
        return s

    def record(self, value: float, now_ms: int) -> None:
        s = self._current_sample(now_ms)
        if now_ms - s.start_ms >= self.window_ms:
            s = self._advance(now_ms)
        s.value += value
        s.event_count += 1
        s.last_event_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire_age = self.num_samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire_age:
                s.reset(now_ms)

    def _oldest_start(self, now_ms: int) -> int:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(s.start_ms for s in self._samples)

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        return max(now_ms - self._oldest_start(now_ms), self.window_ms)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def measure(self, now_ms: int) -> float:
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def validate_throttled_replicas(name: str, value: str) -> None:
    """Kafka's ThrottledReplicaListValidator: ``"*"`` or ``[partitionId]:[brokerId],...`` (ValueError otherwise)."""
    items = [s.strip() for s in str(value).split(",")]
    if "".join(items) == "*":
        return
    for s in items:
        if s == "":
            continue
        part, sep, broker = s.partition(":")
        if not (sep and part.isdigit() and broker.isdigit() and part.isascii() and broker.isascii()):
            raise ValueError("%s must be the literal '*' or a list of replicas in the following format: "
                             "[partitionId]:[brokerId],[partitionId]:[brokerId],..." % name)


def parse_throttled_replicas(value: Optional[str], broker_id: int, name: str = "throttled replicas"
                             ) -> Tuple[int, ...]:
    """The partitions this broker throttles: () for none, :data:`ALL_REPLICAS` for ``"*"``."""
    text = (value or "").strip()
    if not text:
        return ()
    validate_throttled_replicas(name, text)
    if "".join(s.strip() for s in text.split(",")) == "*":
        return ALL_REPLICAS
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        part, _, broker = item.partition(":")
        if int(broker) == broker_id:
            out.append(int(part))
    return tuple(out)


class ReplicationQuotaManager:
    """One replication quota (leader, follower or alter-log-dirs): which partitions it throttles and the byte rate."""

    def __init__(self, name: str, num_samples: int = 11, window_size_seconds: int = 1,
                 clock: Optional[Callable[[], int]] = None, bound: Optional[float] = None) -> None:
        """``clock``: monotonic milliseconds. ``bound``: bytes/s; None (Kafka's unset quota) or Long.MAX_VALUE =
        unthrottled."""
        self.name = name
        self.num_samples = max(1, int(num_samples))
        self.window_ms = max(1, int(window_size_seconds)) * 1000
        self._clock = clock if clock is not None else _mono_ms
        self._bound: Optional[float] = None
        self._throttled: Dict[str, Tuple[int, ...]] = {}
        self._rate = SimpleRate(self.num_samples, self.window_ms)
        self._last_record_ms: Optional[int] = None
        if bound is not None:
            self.update_quota(bound)

    # ------------------------------------------------------------------ quota
    def update_quota(self, bound: Optional[float]) -> None:
        """Set the upper bound in bytes/s (None: no quota)."""
        new = None if bound is None else float(bound)
        if new != self._bound:
            log.info("%s replication quota set to %s bytes/s", self.name,
                     "unlimited" if new is None or new >= UNLIMITED else "%d" % new)
        self._bound = new

    @property
    def upper_bound(self) -> int:
        """The configured bound (Long.MAX_VALUE when none)."""
        return UNLIMITED if self._bound is None else int(min(self._bound, UNLIMITED))

    @property
    def is_unlimited(self) -> bool:
        return self._bound is None or self._bound >= UNLIMITED

    def _sensor(self, now_ms: int) -> SimpleRate:
        last = self._last_record_ms
        if last is not None and now_ms - last > INACTIVE_SENSOR_EXPIRATION_MS:
            self._rate = SimpleRate(self.num_samples, self.window_ms)  # Kafka's expired sensor is recreated
            self._last_record_ms = None
        return self._rate

    def record(self, value: int) -> None:
        """Count ``value`` bytes against the rate (never refused: the check is :meth:`is_quota_exceeded`)."""
        if value <= 0:
            return
        now = self._clock()
        self._sensor(now).record(float(value), now)
        self._last_record_ms = now

    def rate(self) -> float:
        """The current measured rate (bytes/s)."""
        now = self._clock()
        return self._sensor(now).measure(now)

    def is_quota_exceeded(self) -> bool:
        if self._bound is None:
            return False
        now = self._clock()
        return self._sensor(now).measure(now) > self._bound

    # ------------------------------------------------------------------ throttled partitions
    def is_throttled(self, tp: TopicPartition) -> bool:
        parts = self._throttled.get(tp[0])
        if parts is None:
            return False
        return parts == ALL_REPLICAS or tp[1] in parts

    def mark_throttled(self, topic: str, partitions: Sequence[int] = ALL_REPLICAS) -> None:
        self._throttled[topic] = tuple(partitions)

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    def throttled_topics(self) -> Dict[str, Tuple[int, ...]]:
        return dict(self._throttled)


def dynamic_rate_getter(config: object) -> Callable[[str], object]:
    """``get(key)`` over a KafkaConfig's dynamic layers only: the throttled rates are dynamic-only configs in Kafka
    (a value in server.properties is not applied), per broker over the cluster default."""
    def get(key: str) -> object:
        for layer in (getattr(config, "dynamic_per_broker", {}), getattr(config, "dynamic_cluster_default", {})):
            if key in layer:
                return config.get(key)  # type: ignore[attr-defined]
        return None
    return get


class ReplicationQuotas:
    """The broker's leader, follower and alter-log-dirs quotas (Kafka's QuotaManagers.leader/follower/alterLogDirs)."""

    def __init__(self, broker_id: int, *, num_samples: int = 11, window_size_seconds: int = 1,
                 alter_log_dirs_num_samples: int = 11, alter_log_dirs_window_size_seconds: int = 1,
                 clock: Optional[Callable[[], int]] = None) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuotaManager("Leader", num_samples, window_size_seconds, clock)
        self.follower = ReplicationQuotaManager("Follower", num_samples, window_size_seconds, clock)
        self.alter_log_dirs = ReplicationQuotaManager("AlterLogDirs", alter_log_dirs_num_samples,
                                                      alter_log_dirs_window_size_seconds, clock)

    @classmethod
    def from_config(cls, broker_id: int, get: Callable[[str], object],
                    rates: Optional[Callable[[str], object]] = None,
                    clock: Optional[Callable[[], int]] = None) -> "ReplicationQuotas":
        """Windows from ``get`` (``replication.quota.window.*``, ``alter.log.dirs.replication.quota.window.*``),
        rates from ``rates`` (default ``get``; the broker passes :func:`dynamic_rate_getter`)."""
        def num(key: str, default: int) -> int:
            try:
                v = get(key)
            except KeyError:
                return default
            return default if v is None else int(v)  # type: ignore[call-overload]

        q = cls(broker_id, num_samples=num("replication.quota.window.num", 11),
                window_size_seconds=num("replication.quota.window.size.seconds", 1),
                alter_log_dirs_num_samples=num("alter.log.dirs.replication.quota.window.num", 11),
                alter_log_dirs_window_size_seconds=num("alter.log.dirs.replication.quota.window.size.seconds", 1),
                clock=clock)
        q.update_rates(rates if rates is not None else get)
        return q

    def update_rates(self, get: Callable[[str], object]) -> None:
        """Apply the dynamic rates (Kafka's BrokerConfigHandler: per broker > cluster default > unlimited)."""
        for key, mgr in ((LEADER_THROTTLED_RATE, self.leader), (FOLLOWER_THROTTLED_RATE, self.follower),
                         (ALTER_LOG_DIRS_RATE, self.alter_log_dirs)):
            try:
                v = get(key)
            except KeyError:
                v = None
            mgr.update_quota(float(UNLIMITED if v is None else int(v)))  # type: ignore[call-overload]

    def update_topic(self, topic: str, leader_replicas: Optional[str], follower_replicas: Optional[str]) -> None:
        """A topic's throttled replica lists changed (Kafka's TopicConfigHandler.updateThrottledList)."""
        for value, mgr, name in ((leader_replicas, self.leader, LEADER_THROTTLED_REPLICAS),
                                 (follower_replicas, self.follower, FOLLOWER_THROTTLED_REPLICAS)):
            try:
                parts = parse_throttled_replicas(value, self.broker_id, name)
            except ValueError as exc:
                log.warning("Ignoring %s of topic %s: %s", name, topic, exc)
                parts = ()
            if value is not None and value.strip():
                mgr.mark_throttled(topic, parts)
            else:
                mgr.remove_throttle(topic)


__all__ = ["ReplicationQuotaManager", "ReplicationQuotas", "SimpleRate", "parse_throttled_replicas",
           "validate_throttled_replicas", "dynamic_rate_getter", "ALL_REPLICAS", "UNLIMITED",
           "LEADER_THROTTLED_REPLICAS", "FOLLOWER_THROTTLED_REPLICAS", "LEADER_THROTTLED_RATE",
           "FOLLOWER_THROTTLED_RATE", "ALTER_LOG_DIRS_RATE"]
