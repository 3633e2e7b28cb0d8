"""The broker's file-descriptor budget: raise RLIMIT_NOFILE at start-up, estimate what the logs need, and keep a
reserve that accepted connections may never take.

Why a reserve. When a process runs out of descriptors (EMFILE) every ``open``, ``socket``, ``accept``, ``dup`` and
``epoll_create`` fails, whoever calls it. For a broker the ones that matter are its own: ZooKeeper's client
reconnecting opens a new socket (stock kazoo also opens an epoll descriptor for every wait on its socket; the
broker's handler, broker/zk/handler.py, polls instead), and an EMFILE there drops the connection and, after
``zookeeper.session.timeout.ms``, the session and with it the broker's registration; a replica fetcher or the
controller channel reconnecting to a peer; a log roll creating the next segment's files; a checkpoint's temporary
file; the cleaner. A client's new connection matters least: librdkafka and the Java client retry it with backoff.
So :class:`DescriptorBudget` refuses accepted *client* connections while fewer than
``reserve`` descriptors are left, which leaves the reserve to everything else, and accepted connections on the
inter-broker listener (followers fetching, the controller) while fewer than half of it is left. Kafka's JVM has no
such guard (its Acceptor logs the IOException of a failed accept and goes on); Kafka's ConnectionQuotas are the
model for the rest (``max.connections`` exempts the inter-broker listener; with one listener for clients and
brokers the broker cannot tell them apart when it accepts, so give brokers a listener of their own).

Counting open descriptors. ``len(os.listdir('/proc/self/fd'))`` is exact but costs 1-3 ms at 20,000 descriptors, so
it runs at most once a second (:data:`RECOUNT_INTERVAL_S`), and between counts the budget adds the connections it
admitted and subtracts those that closed. Linux gives a new socket the lowest free descriptor number, so an
accepted socket's number ``fd`` proves at least ``fd + 1`` descriptors are open: a free lower bound, checked on
every accept. Near the threshold a refusal is confirmed by a fresh count (at most every 50 ms), so descriptors freed
by others (a closed segment, a finished checkpoint) are seen quickly. Once refusing, a listener kind admits again
only when :func:`resume_margin` descriptors are free above its reserve: at the threshold the exact count moves by
one or two with every checkpoint's temporary file, and without that margin the broker would flap between refusing
and admitting (one more connection taken each time) and log a recovery line for each flap.

The start-up estimate (:func:`estimate_descriptors`): one descriptor per partition directory found in
``log.dirs`` (the storage layer keeps the active segment's ``.log`` open; indexes are read or mapped on demand),
plus ``broker.storage.segment.file.cache.size`` (inactive segment files held open by its bounded cache), plus the
descriptors open when the estimate is made (log files, ZooKeeper), plus the reserve. What is left of the limit is
what client connections can use; a WARN says so when the estimate passes 80 % of the limit.

Loop affinity: :class:`DescriptorBudget` is called on the event loop only; the functions are plain blocking calls
(cheap: a directory listing per log dir) made once at start-up.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from broker.util.clock import SYSTEM_CLOCK, Clock

try:
    import resource
except ImportError:  # not on Linux/Unix: no limit to raise or read
    resource = None  # type: ignore[assignment]

__all__ = ["NofileLimit", "raise_nofile_limit", "current_nofile_limit", "count_open_descriptors",
           "count_partition_dirs", "default_reserve", "effective_reserve", "DescriptorEstimate", "estimate_descriptors",
           "DescriptorBudget", "WARN_FRACTION", "RECOUNT_INTERVAL_S", "resume_margin"]

log = logging.getLogger(__name__)

#: the start-up estimate warns above this fraction of the limit
WARN_FRACTION = 0.8
#: the smallest automatic reserve; see default_reserve
MIN_AUTO_RESERVE = 256
#: exact counts of open descriptors, at most this often when far from the threshold
RECOUNT_INTERVAL_S = 1.0
#: ... and at most this often to confirm a refusal
CONFIRM_INTERVAL_S = 0.05
#: at most one refusal line per this many seconds (with the number refused since the last one)
REFUSAL_LOG_INTERVAL_S = 10.0
#: a partition directory: Kafka's "<topic>-<partition>", and a future replica's "<topic>-<partition>.<id>-future"
_PARTITION_DIR = re.compile(r"^.+-\d+$|^.+-\d+\.[0-9a-f]+-future$")
_UNLIMITED = 2**62


@dataclass(frozen=True)
class NofileLimit:
    """RLIMIT_NOFILE: the soft limit before start-up raised it, the soft limit now, the hard limit."""

    before: int
    soft: int
    hard: int

    @property
    def raised(self) -> bool:
        return self.soft > self.before


def _as_int(value: int) -> int:
    return _UNLIMITED if resource is not None and value == resource.RLIM_INFINITY else int(value)


def current_nofile_limit() -> int:
    """The soft RLIMIT_NOFILE now (a very large number when unlimited or unknown)."""
    if resource is None:
        return _UNLIMITED
    return _as_int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def raise_nofile_limit() -> NofileLimit:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as the JVM does at start (-XX:+MaxFDLimit, its default).

    An unlimited hard limit is capped at /proc/sys/fs/nr_open, the most Linux allows. Failure leaves the limit as it
    was (the returned soft limit says so); it is never fatal.
    """
    if resource is None:
        return NofileLimit(_UNLIMITED, _UNLIMITED, _UNLIMITED)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = _as_int(soft)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read().strip())
        except (OSError, ValueError):
            return NofileLimit(before, before, _UNLIMITED)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            log.warning("Could not raise the open file limit from %d to %d: %s", before, target, exc)
    soft_now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return NofileLimit(before, _as_int(soft_now), _as_int(hard))


def count_open_descriptors() -> int:
    """Descriptors this process has open now (-1 if the platform cannot tell): ~1-3 ms at 20,000."""
    for path in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(path)) - 1  # the listing's own directory descriptor is in it
        except OSError:
            continue
    return -1


def count_partition_dirs(log_dirs: Iterable[str]) -> int:
    """Partition directories in ``log.dirs`` (names only: one cheap listing per log dir, nothing opened inside)."""
    n = 0
    for d in log_dirs:
        try:
            with os.scandir(d) as it:
                n += sum(1 for e in it if _PARTITION_DIR.match(e.name) and e.is_dir(follow_symlinks=False))
        except OSError:
            continue  # a missing or unreadable log dir: the log manager reports it
    return n


def default_reserve(limit: int) -> int:
    """broker.fd.reserve = -1: 5 % of the limit, at least 256 (never more than half the limit).

    256 covers what the broker opens for itself in a sizeable cluster: per peer broker up to about six connections
    (controller channel, to-controller, AlterPartition, transaction markers, AddPartitionsToTxn, one per replica
    fetcher), ZooKeeper's socket and a reconnect, a few files per log roll (.log, .index,
    .timeindex, .txnindex) and checkpoint, the cleaner's files, and inactive segments read beyond the segment file
    cache. 5 % keeps the margin proportionate on machines with large limits, where the exact count is older
    relative to how fast descriptors can be taken.
    """
    return min(max(MIN_AUTO_RESERVE, limit // 20), limit // 2)


def effective_reserve(setting: int, limit: int) -> int:
    """The reserve that ``broker.fd.reserve = setting`` means under ``limit`` (-1: :func:`default_reserve`)."""
    return default_reserve(limit) if setting < 0 else min(setting, limit)


@dataclass(frozen=True)
class DescriptorEstimate:
    """What the configured logs need, beside the limit (see the module docstring for what counts)."""

    limit: int
    raised_from: int
    partitions: int
    segment_file_cache: int
    open_now: int
    reserve: int

    @property
    def needed(self) -> int:
        return self.partitions + self.segment_file_cache + max(0, self.open_now) + self.reserve

    @property
    def left_for_connections(self) -> int:
        return self.limit - self.needed

    @property
    def close_to_limit(self) -> bool:
        return self.needed > WARN_FRACTION * self.limit

    def describe(self) -> str:
        raised = f"raised from {self.raised_from}" if self.raised_from < self.limit else "the hard limit"
        return (f"File descriptors: limit {self.limit} ({raised}); partitions on disk {self.partitions} need about "
                f"{self.needed} with the segment file cache of {self.segment_file_cache}, {max(0, self.open_now)} "
                f"open now and a reserve of {self.reserve} (broker.fd.reserve); {self.left_for_connections} left "
                "for connections")


def resume_margin(reserve: int) -> int:
    """Free descriptors above the reserve needed before a refusing listener admits again (an eighth of the reserve,
    1 to 64)."""
    return max(1, min(64, reserve // 8))


def estimate_descriptors(limit: NofileLimit, log_dirs: Iterable[str], segment_file_cache: int,
                         reserve: int) -> DescriptorEstimate:
    """Count partition directories and open descriptors now (before any log is loaded) into an estimate."""
    return DescriptorEstimate(limit.soft, limit.before, count_partition_dirs(log_dirs), segment_file_cache,
                              count_open_descriptors(), reserve)


class DescriptorBudget:
    """Admits or refuses each accepted socket so that the reserve of descriptors stays free (event loop only).

    ``reserve_setting`` returns ``broker.fd.reserve`` (-1: :func:`default_reserve`); it and the limit are read
    again at every exact count, so a changed limit (``prlimit`` on the running process) takes effect within a
    second. The other arguments exist for tests.
    """

    def __init__(self, reserve_setting: Callable[[], int], *, limit: Callable[[], int] = current_nofile_limit,
                 count: Callable[[], int] = count_open_descriptors, clock: Clock = SYSTEM_CLOCK,
                 logger: Optional[logging.Logger] = None) -> None:
        self._reserve_setting = reserve_setting
        self._limit_fn = limit
        self._count_fn = count
        #: the recount, confirmation and refusal-log intervals on its mono_ms() (seconds here)
        self._mono_ms = clock.mono_ms
        self._log = logger or log
        self.limit = 0
        self.reserve = 0
        self.open = 0  # exact at the last count, then kept up to date with admissions and closes
        self._counted_at = -1e18
        self._refusing = [False, False]  # per kind: client listeners, the inter-broker listener
        self._refused_since_log = 0
        self._logged_at = -1e18
        #: refusals since start (for metrics and tests)
        self.refused_total = 0
        self._recount(self._clock())

    def _clock(self) -> float:
        return self._mono_ms() / 1000.0

    def _recount(self, now: float) -> bool:
        """Read the limit, the reserve and the exact count again; False if the count failed (EMFILE: listing
        /proc/self/fd needs a descriptor too), in which case the running count stands."""
        self.limit = self._limit_fn()
        self.reserve = effective_reserve(int(self._reserve_setting()), self.limit)
        self._counted_at = now
        counted = self._count_fn()
        if counted < 0:
            return False
        self.open = counted
        return True

    def free_for(self, inter_broker: bool) -> int:
        """Descriptors an accepted connection may still take (the inter-broker listener may use half the reserve)."""
        keep = self.reserve // 2 if inter_broker else self.reserve
        return self.limit - self.open - keep

    def _admit_above(self, refusing: bool) -> int:
        return resume_margin(self.reserve) if refusing else 0

    def admit(self, fd: int, listener: str, inter_broker: bool = False) -> bool:
        """Called with each newly accepted socket's descriptor number; False: close it at once (one line logged
        per REFUSAL_LOG_INTERVAL_S). A True must later be matched by :meth:`connection_closed`."""
        now = self._clock()
        if not (now - self._counted_at >= RECOUNT_INTERVAL_S and self._recount(now)):
            self.open += 1  # (a fresh count includes the new socket)
        if fd >= self.open:
            self.open = fd + 1  # lowest free number first: descriptors 0..fd are all open
        refusing = self._refusing[inter_broker]
        if self.free_for(inter_broker) < self._admit_above(refusing) and now - self._counted_at >= CONFIRM_INTERVAL_S:
            self._recount(now)  # confirm before refusing: others may have closed descriptors since
            if fd >= self.open:
                self.open = fd + 1
        if self.free_for(inter_broker) >= self._admit_above(refusing):
            if refusing:
                self._refusing[inter_broker] = False
                self._log.info("Accepting new connections again: %d of %d file descriptors in use; %d connections "
                               "refused since the last message", self.open, self.limit, self._refused_since_log)
                self._refused_since_log = 0
            return True
        self.open -= 1  # the caller closes it now
        self.refused_total += 1
        self._refused_since_log += 1
        self._refusing[inter_broker] = True
        if now - self._logged_at >= REFUSAL_LOG_INTERVAL_S:
            keep = self.reserve // 2 if inter_broker else self.reserve
            self._log.warning(
                "Refusing new connections on listener %s: %d of %d file descriptors in use and the last %d are kept "
                "for ZooKeeper, replication, the controller and log segments (broker.fd.reserve=%d); %d refused "
                "since the last message (next message in %.0f s at the earliest)", listener, self.open + 1,
                self.limit, keep, self.reserve, self._refused_since_log, REFUSAL_LOG_INTERVAL_S)
            self._logged_at = now
            self._refused_since_log = 0
        return False

    def connection_closed(self) -> None:
        """An admitted connection's socket was closed."""
        self.open -= 1
