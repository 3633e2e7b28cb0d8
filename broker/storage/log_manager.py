"""LogManager: every partition log on this broker, across log.dirs, plus their periodic upkeep.

Per log dir it holds an exclusive lock on ``.lock`` for its whole life (taken before any other
file of the dir is read or written, so a second broker on the same ``log.dirs`` stops at once), and owns
``meta.properties`` (Java properties text: ``version=0``, ``broker.id``,
``cluster.id``), the ``.kafka_cleanshutdown`` marker and the offset checkpoints
(recovery-point-offset-checkpoint, log-start-offset-checkpoint, replication-offset-checkpoint;
format in checkpoints.py). Partition directories are ``<topic>-<partition>``; a deleted one is
renamed ``<topic>-<partition>.<uuidhex>-delete`` and then removed.

Future logs (AlterReplicaLogDirs, KIP-113): a partition moving to another log dir of this broker gets
``<topic>-<partition>.<uuidhex>-future`` there, filled from the current log; once caught up the current
log continues from the future's files (``Log.replace_with_future``: the current dir is renamed
``-delete`` first, then the future dir takes the real name). At start-up a future dir next to its
partition's current log is loaded as the future log (the move resumes); one without a current log is
what a crash between those two renames leaves, and becomes the current log. So one partition never
loads two current logs.

Periodic tasks (on a storage Scheduler thread): retention (log.retention.check.interval.ms),
flush by flush.ms, producer id expiration, and checkpoints (every 60 s by default). Compaction
runs on the LogCleaner's own thread (cleaner.py), which owns cleaner-offset-checkpoint.
Log dir failure (KIP-112, JBOD): an I/O error on a dir is reported to the LogDirFailureChannel
(log_dir_failure_channel.py), which marks every Log of the dir offline at once; the ReplicaManager then calls
:meth:`LogManager.handle_log_dir_failure`, which forgets the dir's logs. New logs go only to live dirs, checkpoints
are written only there, and a clean shutdown marks only them clean (an offline dir is recovered at the next start).
Thread-safety: the log map is guarded by one lock; each Log has its own.
"""
from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time as _time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

from broker.config.tiered_storage import remote_log_enabled
from broker.util.clock import SYSTEM_CLOCK, Clock

from . import file_cache, files
from .checkpoints import (OffsetCheckpointFile, atomic_write, fsync_dir, fsync_file, read_partition_metadata,
                          sync_filesystem, write_partition_metadata)
from .config import LONG_MAX, LogConfig
from .errors import InconsistentClusterIdError, KafkaStorageError
from .log_dir_check import LogDirsError
from .cleaner import CleanerConfig, LogCleaner
from .log import NOT_DIR_FAILURES, Log
from .log_dir_failure_channel import LogDirFailureChannel, describe_cause
from .log_owner import InlineLogOwners, LogOwners, run_each
from .partition_log import PartitionLog
from .scheduler import Scheduler

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: more small partition files than this waiting for their fsync: one syncfs per log dir instead
SYNCFS_ABOVE_FILES = 256


class InconsistentBrokerIdError(KafkaStorageError):
    error_name = "KAFKA_STORAGE_ERROR"


def future_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuidhex>-future``, as Kafka's UnifiedLog.logFutureDirName."""
    return "%s.%s%s" % (files.topic_partition_dir_name(topic, partition), uuid.uuid4().hex, files.FUTURE_DIR_SUFFIX)


def parse_future_dir(name: str) -> Optional[TopicPartition]:
    """The partition of a ``<topic>-<partition>.<uuidhex>-future`` dir name; None for anything else."""
    if not name.endswith(files.FUTURE_DIR_SUFFIX):
        return None
    base, dot, unique = name[:-len(files.FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32 or any(c not in "0123456789abcdef" for c in unique):
        return None
    return files.parse_topic_partition_dir(base)


def read_meta_properties(path: str) -> dict[str, str]:
    """Parse a Java properties file of ``key=value`` lines (``#`` comments skipped)."""
    props: dict[str, str] = {}
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def write_meta_properties(path: str, broker_id: int, cluster_id: Optional[str]) -> None:
    """Write meta.properties as Kafka 3.9 does in ZooKeeper mode (version 0)."""
    stamp = _time.strftime("%a %b %d %H:%M:%S UTC %Y", _time.gmtime())
    lines = ["#", "#" + stamp]
    if cluster_id is not None:
        lines.append("cluster.id=" + cluster_id)
    lines += ["version=0", "broker.id=%d" % broker_id]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))


class LogManager:
    """Creates, loads, deletes and maintains every partition Log in ``log_dirs``."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig, *, broker_id: int,
                 cluster_id: Optional[str] = None, scheduler: Optional[Scheduler] = None,
                 clock: Clock = SYSTEM_CLOCK,
                 topic_configs: Optional[Callable[[str], Optional[LogConfig]]] = None,
                 retention_check_interval_ms: int = 300000, flush_check_interval_ms: int = LONG_MAX,
                 flush_recovery_offset_checkpoint_interval_ms: int = 60000,
                 flush_start_offset_checkpoint_interval_ms: int = 60000,
                 producer_id_expiration_ms: int = 86400000,
                 producer_id_expiration_check_interval_ms: int = 600000,
                 cleaner_config: Optional[CleanerConfig] = None, initial_task_delay_ms: int = 30000,
                 recovery_threads_per_data_dir: int = 1,
                 segment_file_cache_size: int = file_cache.DEFAULT_SEGMENT_FILE_CACHE_SIZE,
                 log_dir_failure_channel: Optional[LogDirFailureChannel] = None,
                 initial_offline_dirs: Optional[dict[str, str]] = None,
                 remote_storage_system_enable: bool = False) -> None:
        """``initial_offline_dirs``: {dir: why} of the dirs of ``log_dirs`` found unusable at start-up: they start
        offline (reported to the channel in Kafka's words), never locked, read or loaded."""
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        #: where I/O errors on the log dirs are reported (shared with the ReplicaManager)
        self.failure_channel = log_dir_failure_channel if log_dir_failure_channel is not None \
            else LogDirFailureChannel()
        #: dirs whose logs handle_log_dir_failure removed
        self._failed_dirs: set[str] = set()
        self.failure_channel.add_offline_listener(self._on_dir_offline)
        self.default_config = default_config
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        #: wall time for the logs, retention and producer expiration; the monotonic reading for the flush intervals
        #: and this manager's own scheduler
        self.clock = clock
        self._own_scheduler = scheduler is None
        self.scheduler = scheduler if scheduler is not None else Scheduler(clock=clock)
        self._topic_configs: dict[str, LogConfig] = {}
        self._topic_config_provider = topic_configs
        self.retention_check_interval_ms = retention_check_interval_ms
        #: log.initial.task.delay.ms: before the first retention, flush and checkpoint runs (Kafka's InitialTaskDelayMs)
        self.initial_task_delay_ms = initial_task_delay_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = flush_recovery_offset_checkpoint_interval_ms
        self.log_start_offset_checkpoint_interval_ms = flush_start_offset_checkpoint_interval_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        #: remote.log.storage.system.enable: a topic with remote.storage.enable=true is tiered (KIP-405)
        self.remote_storage_system_enable = remote_storage_system_enable
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        #: num.recovery.threads.per.data.dir: threads loading (and recovering) the logs of each dir at start-up
        self.recovery_threads_per_data_dir = recovery_threads_per_data_dir
        file_cache.SEGMENT_FILES.set_capacity(segment_file_cache_size)
        self._lock = threading.RLock()
        #: who runs each log's commands (``attach_owners``; until then whoever calls, as at start-up)
        self.owners: LogOwners = InlineLogOwners()
        #: one writer at a time per checkpoint file (this scheduler and the ReplicaManager's HW checkpoints)
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        #: future logs of partitions moving between log dirs, and the dir each is in
        self._future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        #: where the next log of a partition goes (AlterReplicaLogDirs before the replica exists)
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self._last_flush_ms: dict[TopicPartition, int] = {}
        #: partitions whose log is being created, with their creation lock and the dir chosen for each
        self._creating: dict[TopicPartition, threading.Lock] = {}
        self._dirs_in_creation: dict[TopicPartition, str] = {}
        for d, why in (initial_offline_dirs or {}).items():
            d = os.path.abspath(d)
            self.failure_channel.maybe_add_offline_log_dir(
                d, "Failed to create or validate data directory %s (log.dirs): %s" % (d, why))
        self._started = False
        self._shut_down = False
        self._dir_locks: list[int] = []
        try:
            for d in self.live_log_dirs:
                try:
                    os.makedirs(d, exist_ok=True)
                except OSError as exc:
                    raise LogDirsError([(d, f"cannot create it: {exc.strerror or exc}")], self.log_dirs) from None
                self._lock_dir(d)
            for d in self.live_log_dirs:
                self._check_meta_properties(d)
        except BaseException:
            self._unlock_dirs()
            raise
        self._load_logs()
        self.cleaner = LogCleaner(cleaner_config if cleaner_config is not None else CleanerConfig(),
                                  self.live_log_dirs, self._current_logs, self.log_dir_of, clock=clock)
        self.cleaner.failure_channel = self.failure_channel
        for tp in self._future_logs:  # a moving partition is not cleaned (Kafka's abortAndPauseCleaning)
            self.cleaner.abort_and_pause_cleaning(tp)

    # ------------------------------------------------------------------ startup
    def _lock_dir(self, log_dir: str) -> None:
        """Take the exclusive ``.lock`` of ``log_dir`` (released when this process ends or shuts down)."""
        path = os.path.join(log_dir, files.LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # Kafka: "Disk error while locking directory <dir>", then the dir is unusable
            raise LogDirsError([(log_dir, f"cannot create or open {files.LOCK_FILE} in it: "
                                          f"{exc.strerror or exc}")], self.log_dirs) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageError(
                "Failed to acquire lock on file .lock in %s. A Kafka instance in another process or thread is "
                "using this directory." % log_dir) from None
        self._dir_locks.append(fd)

    def _unlock_dirs(self) -> None:
        for fd in self._dir_locks:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            except OSError:
                pass
        self._dir_locks = []

    def _check_meta_properties(self, log_dir: str) -> None:
        """Kafka 3.9's MetaPropertiesEnsemble checks, with its messages; an unreadable or unwritable meta.properties
        makes the dir unusable (Kafka: "Error while reading meta.properties file", "Error while writing
        meta.properties to")."""
        path = os.path.join(log_dir, files.META_PROPERTIES)
        if not os.path.exists(path):
            self._write_meta_properties(log_dir, path)
            return
        try:
            props = read_meta_properties(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise LogDirsError([(log_dir, f"Error while reading meta.properties file {path}: "
                                          f"{getattr(exc, 'strerror', None) or exc}")], self.log_dirs) from None
        found_cluster = props.get("cluster.id")
        if self.cluster_id is not None and found_cluster is not None and found_cluster != self.cluster_id:
            raise InconsistentClusterIdError(  # Kafka 3.9's MetaPropertiesEnsemble.verify, and what it means
                "Invalid cluster.id in: %s. Expected %s, but read %s (the log dir belongs to another cluster: check "
                "zookeeper.connect and log.dirs)" % (path, self.cluster_id, found_cluster))
        found_broker = props.get("broker.id")
        if found_broker is not None:
            try:
                stored = int(found_broker)
            except ValueError:
                raise LogDirsError([(log_dir, "Error while reading meta.properties file %s: invalid broker.id %r"
                                     % (path, found_broker))], self.log_dirs) from None
            if stored != self.broker_id:
                raise InconsistentBrokerIdError(  # Kafka 3.9's MetaPropertiesEnsemble.verify
                    "Stored node id %d doesn't match previous node id %d in %s. If you moved your data, make sure "
                    "your configured node id matches. If you intend to create a new node, you should remove all "
                    "data in your data directories. (broker.id=%d)" % (stored, self.broker_id, path, self.broker_id))
        if found_cluster is None and self.cluster_id is not None:
            self._write_meta_properties(log_dir, path)

    def _write_meta_properties(self, log_dir: str, path: str) -> None:
        try:
            write_meta_properties(path, self.broker_id, self.cluster_id)
        except OSError as exc:
            raise LogDirsError([(log_dir, f"Error while writing meta.properties to {log_dir}: "
                                          f"{exc.strerror or exc}")], self.log_dirs) from None

    def _config_for(self, topic: str) -> LogConfig:
        cfg = self._topic_configs.get(topic)
        if cfg is None and self._topic_config_provider is not None:
            cfg = self._topic_config_provider(topic)
        return cfg if cfg is not None else self.default_config

    def remote_log_enabled(self, topic: str, config: LogConfig) -> bool:
        """Whether ``topic``'s logs are tiered (Kafka's UnifiedLog.remoteLogEnabled): the broker's
        remote.log.storage.system.enable, the topic's remote.storage.enable, and neither internal nor compacted."""
        return remote_log_enabled(topic, self.remote_storage_system_enable, config.remote_storage_enable,
                                  config.compact)

    def tiered_log(self, tp: TopicPartition) -> Optional[Log]:
        """The log itself, for the RemoteLogManager (broker/remote_log, the storage side of tiered storage), when
        it is tiered."""
        with self._lock:
            log = self._logs.get(tp)
        return log if log is not None and log.remote_log_enabled else None

    def _open_log(self, path: str, config: LogConfig, **kwargs: object) -> Log:
        name = os.path.basename(path)
        parsed = parse_future_dir(name) or files.parse_topic_partition_dir(name)
        tiered = parsed is not None and self.remote_log_enabled(parsed[0], config)
        log = Log.open(path, config, clock=self.clock, scheduler=self.scheduler.schedule_once,
                       producer_id_expiration_ms=self.producer_id_expiration_ms,
                       log_dir_failure_channel=self.failure_channel, remote_log_enabled=tiered,
                       **kwargs)  # type: ignore[arg-type]
        log.on_roll = self._on_roll
        log.owners = self.owners
        if log.topic_partition[1] < 0:  # a future log: its partition's owner runs it too
            tp = parse_future_dir(os.path.basename(path))
            if tp is not None:
                log.owner_key = tp
        return log

    def attach_owners(self, owners: LogOwners) -> None:
        """From now on each log's commands run on its partition's owner in ``owners`` (the ReplicaManager's I/O
        workers); the periodic tasks and the cleaner hand theirs over."""
        with self._lock:
            self.owners = owners
            for log in list(self._logs.values()) + list(self._future_logs.values()):
                log.owners = owners

    def _load_logs(self) -> None:
        """Load every partition dir of every log dir, ``num.recovery.threads.per.data.dir`` threads per dir as
        Kafka's LogManager.loadLogs (threads overlap the disk reads of recovery and the directory listings;
        a closed segment costs no read at all, see segment.py)."""
        start = self.clock.mono_ms()
        futures: list[tuple[str, str, TopicPartition, dict[str, object]]] = []
        jobs: list[tuple[str, str, TopicPartition, dict[str, object]]] = []
        markers = []
        live = self.live_log_dirs
        for d in live:
            marker = os.path.join(d, files.CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            if clean:
                markers.append(marker)
            recovery = OffsetCheckpointFile(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT)).read()
            starts = OffsetCheckpointFile(os.path.join(d, files.LOG_START_OFFSET_CHECKPOINT)).read()
            hws = OffsetCheckpointFile(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT)).read()
            with os.scandir(d) as it:
                entries = sorted((e.name, e.path) for e in it if e.is_dir())
            seen: set[TopicPartition] = set()
            for name, path in entries:
                if name.endswith(files.DELETE_DIR_SUFFIX):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                ftp = parse_future_dir(name)
                if ftp is not None:
                    futures.append((d, path, ftp, dict(recovery_point=recovery.get(ftp, 0),
                                                       log_start_offset=starts.get(ftp, 0), clean_shutdown=clean,
                                                       high_watermark=hws.get(ftp, 0))))
                    continue
                tp = files.parse_topic_partition_dir(name)
                if tp is None:
                    continue
                if tp in seen or tp in self._logs:
                    raise KafkaStorageError("duplicate log directories for %s-%d: %s and %s"
                                            % (tp[0], tp[1], self._log_dir_of.get(tp, d), d))
                seen.add(tp)
                self._log_dir_of[tp] = d
                jobs.append((d, path, tp, dict(recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp, 0),
                                               clean_shutdown=clean, high_watermark=hws.get(tp, 0))))
        threads = max(1, self.recovery_threads_per_data_dir) * len(live)

        def load(job: tuple[str, str, TopicPartition, dict[str, object]]) -> tuple[TopicPartition, Log]:
            _, path, tp, kwargs = job
            return tp, self._open_log(path, self._config_for(tp[0]), existing=True, **kwargs)

        if threads > 1 and len(jobs) > 1:
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-recovery") as pool:
                loaded = list(pool.map(load, jobs))
        else:
            loaded = [load(job) for job in jobs]
        for tp, log in loaded:
            self._logs[tp] = log
        for marker in markers:
            os.unlink(marker)
        for d, path, tp, kwargs in futures:
            self._load_future_dir(d, path, tp, kwargs)
        logger.info("Loaded %d logs from %s in %d ms", len(self._logs), ", ".join(live),
                    self.clock.mono_ms() - start)

    def _load_future_dir(self, d: str, path: str, tp: TopicPartition, kwargs: dict[str, object]) -> None:
        """A ``-future`` dir found at start-up: resume the move, or finish one a crash interrupted."""
        if tp in self._future_logs or self._log_dir_of.get(tp) == d:
            logger.warning("Discarding %s: %s-%d already has a future log or its log is in the same dir", path, *tp)
            self._discard_dir(path)
        elif tp in self._logs:
            log = self._open_log(path, self._config_for(tp[0]), **kwargs)
            self._future_logs[tp] = log
            self._future_dir_of[tp] = d
            logger.info("Loaded the future log of %s-%d in %s: the move from %s resumes", *tp, d, self._log_dir_of[tp])
        else:
            # The move had retired the current log (renamed it -delete) when it stopped: the future is complete.
            target = os.path.join(d, files.topic_partition_dir_name(*tp))
            os.rename(path, target)
            fsync_dir(d)
            self._logs[tp] = self._open_log(target, self._config_for(tp[0]), **kwargs)
            self._log_dir_of[tp] = d
            logger.info("Completed the interrupted move of %s-%d to %s", *tp, d)

    @staticmethod
    def _discard_dir(path: str) -> None:
        target = "%s.%s%s" % (path.rsplit(".", 1)[0], uuid.uuid4().hex, files.DELETE_DIR_SUFFIX)
        os.rename(path, target)
        shutil.rmtree(target, ignore_errors=True)

    def startup(self) -> None:
        """Schedule retention, flush, producer expiration and checkpoint tasks; start the log cleaner."""
        if self._started:
            return
        self._started = True
        s = self.scheduler
        first = self.initial_task_delay_ms / 1000.0
        s.schedule("kafka-log-retention", self.cleanup_logs, first, self.retention_check_interval_ms / 1000.0)
        if self.flush_check_interval_ms < LONG_MAX // 2:
            s.schedule("kafka-log-flusher", self.flush_dirty_logs, first, self.flush_check_interval_ms / 1000.0)
        s.schedule("kafka-recovery-point-checkpoint", self.checkpoint_all, first, self.checkpoint_interval_ms / 1000.0)
        s.schedule("kafka-log-start-offset-checkpoint", self.checkpoint_log_start_offsets, first,
                   self.log_start_offset_checkpoint_interval_ms / 1000.0)
        s.schedule("kafka-producer-id-expiration", self.remove_expired_producers,
                   self.producer_id_expiration_check_interval_ms / 1000.0,
                   self.producer_id_expiration_check_interval_ms / 1000.0)
        self.cleaner.startup()

    # ------------------------------------------------------------------ access
    def get_log(self, tp: TopicPartition) -> Optional[PartitionLog]:
        with self._lock:
            return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._current_logs())

    def _current_logs(self) -> dict[TopicPartition, Log]:
        """The logs themselves, for storage's own tasks and the cleaner (the layers above get PartitionLogs)."""
        with self._lock:
            return dict(self._logs)

    def log_dir_of(self, tp: TopicPartition) -> Optional[str]:
        with self._lock:
            return self._log_dir_of.get(tp)

    def get_or_create_log(self, topic: str, partition: int, config: Optional[LogConfig] = None,
                          topic_id: Optional[str] = None, is_new: bool = True) -> PartitionLog:
        """The partition's log; a new one goes to the live log dir holding the fewest partitions.

        ``is_new`` False (LeaderAndIsr for a replica that existed before) while a log dir is offline: the log may
        be in that dir, so none is created (KafkaStorageError, as Kafka): an empty log in another dir would make a
        restarted leader come back empty.

        The files of a new log are made outside the manager's lock (under one lock per partition), so the disk
        I/O workers create thousands of partitions side by side rather than one at a time."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.get(tp)
            if log is not None:
                return log
            creating = self._creating.setdefault(tp, threading.Lock())
        with creating:
            with self._lock:
                log = self._logs.get(tp)
                if log is not None:
                    return log
                offline = self.offline_log_dirs
                if not is_new and offline:
                    self._creating.pop(tp, None)
                    raise KafkaStorageError("Can not create log for %s-%d because log directories %s are offline"
                                            % (topic, partition, ",".join(offline)))
                live = [x for x in self.log_dirs if x not in offline]
                if not live:
                    self._creating.pop(tp, None)
                    raise KafkaStorageError("No log directories available. Tried %s" % ", ".join(self.log_dirs))
                if config is not None:
                    self._topic_configs[topic] = config
                counts = self._partitions_per_dir()
                d = min(live, key=lambda x: (counts[x], self.log_dirs.index(x)))
                preferred = self._preferred_dirs.pop(tp, None)
                if preferred in counts and preferred in live:
                    d = preferred
                self._dirs_in_creation[tp] = d
                cfg = self._config_for(topic)
            try:
                path = os.path.join(d, files.topic_partition_dir_name(topic, partition))
                log = self._open_log(path, cfg, clean_shutdown=True)
                if topic_id is not None:
                    # fsynced with the log's next flush or by the periodic checkpoint task (Kafka's
                    # flush-metadata-file)
                    log.note_unsynced_file(write_partition_metadata(path, topic_id, sync=False))
            except BaseException:
                with self._lock:
                    self._dirs_in_creation.pop(tp, None)
                    self._creating.pop(tp, None)
                raise
            with self._lock:  # one step: whoever finds no creation lock finds the log
                self._logs[tp] = log
                self._log_dir_of[tp] = d
                self._dirs_in_creation.pop(tp, None)
                self._creating.pop(tp, None)
        logger.info("Created log for partition %s-%d in %s", topic, partition, d)
        return log

    def _partitions_per_dir(self) -> dict[str, int]:
        """Partitions per log dir, those being created included (under the lock; with one dir, nothing to count)."""
        if len(self.log_dirs) == 1:
            return {self.log_dirs[0]: 0}
        counts = dict.fromkeys(self.log_dirs, 0)
        counts.update(Counter(self._log_dir_of.values()))
        for d in self._dirs_in_creation.values():
            counts[d] += 1
        return counts

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the partition dir to ``<tp>.<uuidhex>-delete`` and remove it; False if unknown."""
        tp = (topic, partition)
        self.remove_future_log(tp)
        if tp in self._logs:
            self.cleaner.abort_cleaning(tp)
        with self._lock:
            self._preferred_dirs.pop(tp, None)
            log = self._logs.pop(tp, None)
            self._log_dir_of.pop(tp, None)
            self._last_flush_ms.pop(tp, None)
        if log is None:
            return False
        target = os.path.join(os.path.dirname(log.dir), "%s.%s%s" % (
            files.topic_partition_dir_name(topic, partition), uuid.uuid4().hex, files.DELETE_DIR_SUFFIX))
        log.rename_dir(target)
        delay = log.config.file_delete_delay_ms
        if delay > 0 and not self._shut_down:
            self.scheduler.schedule("delete-log", lambda: self.owners.call(tp, log.delete), delay / 1000.0)
        else:
            log.delete()
        return True

    # ------------------------------------------------------------------ moves between log dirs (KIP-113)
    def get_future_log(self, tp: TopicPartition) -> Optional[PartitionLog]:
        with self._lock:
            return self._future_logs.get(tp)

    def future_log_dir_of(self, tp: TopicPartition) -> Optional[str]:
        with self._lock:
            return self._future_dir_of.get(tp)

    def all_future_logs(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._future_logs)

    # ------------------------------------------------------------------ log dir failure (KIP-112)
    @property
    def offline_log_dirs(self) -> list[str]:
        """Log dirs that had an I/O error (reported or already handled), in log.dirs order."""
        channel = self.failure_channel
        return [d for d in self.log_dirs if d in self._failed_dirs or channel.has_offline_log_dir(d)]

    @property
    def live_log_dirs(self) -> list[str]:
        """Log dirs still in use (Kafka's liveLogDirs)."""
        offline = self.offline_log_dirs
        return [d for d in self.log_dirs if d not in offline]

    def is_log_dir_online(self, log_dir: str) -> bool:
        return os.path.normpath(log_dir) in self.live_log_dirs

    def _on_dir_offline(self, log_dir: str) -> None:
        """The channel's first report of ``log_dir``: its logs refuse I/O from now on (on the reporting thread)."""
        for log in self._logs_in_dir(log_dir).values():
            log.mark_dir_offline()

    def report_io_error(self, log_dir: str, msg: str, exc: OSError) -> None:
        """Hand an I/O error on ``log_dir`` to the channel (errors that are not the disk's are only logged)."""
        if exc.errno in NOT_DIR_FAILURES:
            logger.error("%s: %s", msg, describe_cause(exc))
            return
        self.failure_channel.maybe_add_offline_log_dir(log_dir, msg, exc)

    def handle_log_dir_failure(self, log_dir: str) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Stop using ``log_dir`` (Kafka's LogManager.handleLogDirFailure): forget every log and future log in it,
        closing their files without writing anything, and stop the cleaner's work there. Returns (partitions
        whose log was there, partitions whose future log was there). Runs on any thread; no I/O on the dir."""
        d = os.path.normpath(os.path.abspath(log_dir))
        logger.warning("Stopping serving logs in dir %s", d)
        with self._lock:
            self._failed_dirs.add(d)
            current = sorted(tp for tp, x in self._log_dir_of.items() if x == d and tp in self._logs)
            future = sorted(tp for tp, x in self._future_dir_of.items() if x == d)
            logs = [self._logs.pop(tp) for tp in current] + [self._future_logs.pop(tp) for tp in future]
            for tp in current:
                self._log_dir_of.pop(tp, None)
                self._last_flush_ms.pop(tp, None)
            for tp in future:
                self._future_dir_of.pop(tp, None)
            for tp in [tp for tp, x in self._preferred_dirs.items() if x == d]:
                del self._preferred_dirs[tp]
        for log in logs:
            log.mark_dir_offline()
        self.cleaner.handle_log_dir_failure(d, current)
        for log in logs:
            log.close_handlers()
        logger.warning("Logs for partitions %s are offline and logs for future partitions %s are offline due to "
                       "failure on log directory %s", ",".join("%s-%d" % tp for tp in current),
                       ",".join("%s-%d" % tp for tp in future), d)
        return current, future

    def is_log_dir(self, path: str) -> bool:
        """``path`` names one of log.dirs (absolute, as Kafka's isLogDirOnline requires)."""
        return os.path.isabs(path) and os.path.normpath(path) in self.log_dirs

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: str) -> None:
        """The partition's next log goes to ``log_dir`` unless its current or future log is already there."""
        d = os.path.normpath(log_dir)
        with self._lock:
            if self._log_dir_of.get(tp) != d and self._future_dir_of.get(tp) != d:
                self._preferred_dirs[tp] = d

    def create_future_log(self, tp: TopicPartition, log_dir: str, topic_id: Optional[str] = None) -> PartitionLog:
        """The future log of ``tp`` in ``log_dir`` (created empty at the current log's start offset if needed)."""
        d = os.path.normpath(log_dir)
        if d not in self.log_dirs:
            raise KafkaStorageError("%s is not a log dir of this broker" % log_dir)
        if d in self.offline_log_dirs:
            raise KafkaStorageError("The log dir %s is offline" % d)
        with self._lock:
            self._preferred_dirs.pop(tp, None)
            fut = self._future_logs.get(tp)
            if fut is not None:
                if self._future_dir_of[tp] != d:
                    raise KafkaStorageError("%s-%d already has a future log in %s" % (tp[0], tp[1],
                                                                                     self._future_dir_of[tp]))
                return fut
            cur = self._logs.get(tp)
            if cur is None:
                raise KafkaStorageError("%s-%d has no log on this broker" % tp)
            if self._log_dir_of[tp] == d:
                raise KafkaStorageError("the log of %s-%d is already in %s" % (tp[0], tp[1], d))
            path = os.path.join(d, future_dir_name(*tp))
            fut = self._open_log(path, cur.config, log_start_offset=cur.log_start_offset, clean_shutdown=True)
            try:
                tid = topic_id if topic_id is not None else read_partition_metadata(cur.dir)
            except (OSError, ValueError):
                tid = None
            if tid:
                write_partition_metadata(path, tid)
            self._future_logs[tp] = fut
            self._future_dir_of[tp] = d
        self.cleaner.abort_and_pause_cleaning(tp)
        logger.info("Created the future log of %s-%d in %s (moving from %s)", tp[0], tp[1], d, self._log_dir_of[tp])
        return fut

    def remove_future_log(self, tp: TopicPartition) -> bool:
        """Cancel a move: delete the future log of ``tp``; False if there was none."""
        with self._lock:
            fut = self._future_logs.pop(tp, None)
            self._future_dir_of.pop(tp, None)
        if fut is None:
            return False
        fut.rename_dir(os.path.join(os.path.dirname(fut.dir), "%s.%s%s" % (
            files.topic_partition_dir_name(*tp), uuid.uuid4().hex, files.DELETE_DIR_SUFFIX)))
        fut.delete()
        self.cleaner.resume_cleaning(tp)
        logger.info("Removed the future log of %s-%d", *tp)
        return True

    def replace_current_with_future(self, tp: TopicPartition, hook: Optional[Callable[[str], None]] = None) -> None:
        """The future log caught up: the partition's log continues in the future's dir (Kafka's
        replaceCurrentWithFutureLog). Call on the partition's I/O worker, so no append interleaves."""
        with self._lock:
            cur, fut = self._logs.get(tp), self._future_logs.get(tp)
            src, dst = self._log_dir_of.get(tp), self._future_dir_of.get(tp)
        if cur is None or fut is None or src is None or dst is None:
            raise KafkaStorageError("no current and future log of %s-%d to swap" % tp)
        name = files.topic_partition_dir_name(*tp)
        retired_dir = os.path.join(src, "%s.%s%s" % (name, uuid.uuid4().hex, files.DELETE_DIR_SUFFIX))
        cleaner_offset = self.cleaner.checkpoint_offset(tp)

        def reopen(path: str, recovery_point: int, log_start_offset: int, hw: int) -> Log:
            return self._open_log(path, cur.config, recovery_point=recovery_point, log_start_offset=log_start_offset,
                                  clean_shutdown=True, high_watermark=hw)

        retired = cur.replace_with_future(fut, os.path.join(dst, name), retired_dir, reopen, hook)
        if cleaner_offset is not None:
            self.cleaner._update_checkpoint(tp, None)
        with self._lock:
            self._future_logs.pop(tp, None)
            self._future_dir_of.pop(tp, None)
            self._log_dir_of[tp] = dst
        if cleaner_offset is not None:
            self.cleaner._update_checkpoint(tp, cleaner_offset)
        self.cleaner.resume_cleaning(tp)

        def remove() -> None:
            for seg in retired:
                seg.close_handlers()
            shutil.rmtree(retired_dir, ignore_errors=True)

        delay = cur.config.file_delete_delay_ms
        if delay > 0 and not self._shut_down:
            self.scheduler.schedule("delete-log", remove, delay / 1000.0)
        else:
            remove()
        for d in (src, dst):
            self.checkpoint_dir(d)
        logger.info("The log of %s-%d moved from %s to %s", tp[0], tp[1], src, dst)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a new effective topic config to the topic's existing and future logs."""
        with self._lock:
            self._topic_configs[topic] = config
            logs = [log for (t, _), log in self._logs.items() if t == topic]
            logs += [log for (t, _), log in self._future_logs.items() if t == topic]
        tiered = self.remote_log_enabled(topic, config)
        for log in logs:
            log.update_config(config)
            if tiered and not log.remote_log_enabled:  # tiering turned on for an existing topic (never off in ZK mode)
                log.remote_log_enabled = True

    # ------------------------------------------------------------------ periodic tasks
    def cleanup_logs(self) -> int:
        """Retention pass over every log; returns the number of segments deleted."""
        total = 0
        now = self.clock.wall_ms()
        logs = self._current_logs()
        tps = list(logs)
        for tp, (n, exc) in zip(tps, self.owners.call_each(tps, lambda tp: logs[tp].delete_old_segments(now))):
            if exc is None:
                total += n or 0
            elif not isinstance(exc, KafkaStorageError):  # a failed log dir was reported to the channel
                logger.error("Retention failed for %s-%d", tp[0], tp[1], exc_info=exc)
        return total

    def flush_dirty_logs(self) -> None:
        """fsync logs whose flush.ms elapsed since their last flush (a monotonic interval: a wall-clock jump back
        must not delay the fsyncs; Kafka uses the wall clock here)."""
        now = self.clock.mono_ms()
        for tp, log in self._current_logs().items():
            last = self._last_flush_ms.setdefault(tp, now)
            if now - last >= log.config.flush_ms:
                try:
                    self._flush(tp, log, None)
                except KafkaStorageError:
                    pass  # the log dir failed: reported to the LogDirFailureChannel
                except Exception:
                    logger.exception("Flush failed for %s-%d", tp[0], tp[1])
                self._last_flush_ms[tp] = now

    def _flush(self, tp: TopicPartition, log: Log, up_to: Optional[int]) -> None:
        """Flush ``log`` from this thread: the owner says what to fsync and moves the recovery point; the fsyncs run
        here, so the partition's appends do not wait for the disk (Kafka's flush holds no log lock either)."""
        plan = self.owners.call(tp, lambda: log.begin_flush(up_to))
        if plan is not None:
            log.flush_files(plan)
            self.owners.call(tp, lambda: log.end_flush(plan))

    def _on_roll(self, log: Log, new_base: int) -> None:
        """Kafka flushes a rolled segment in the background right after the roll."""
        def flush() -> None:
            try:
                self._flush(log.owner_key, log, new_base)
            except KafkaStorageError:
                pass  # the log dir failed: reported to the LogDirFailureChannel

        self.scheduler.schedule("flush-log", flush, 0.0)

    def remove_expired_producers(self) -> None:
        now = self.clock.wall_ms()
        logs = self._current_logs()
        tps = list(logs)
        for tp, (_, exc) in zip(tps, self.owners.call_each(tps, lambda tp: logs[tp].remove_expired_producers(now))):
            if exc is not None and not isinstance(exc, KafkaStorageError):
                logger.error("Producer expiration failed for %s-%d", tp[0], tp[1], exc_info=exc)

    def checkpoint_all(self) -> None:
        """Write recovery point, log start offset and HW checkpoints of every log dir; first make durable the
        small partition files written without fsync (partition.metadata, leader epochs) of logs not flushed
        since."""
        self.sync_metadata_files()
        for d in self.live_log_dirs:
            self.checkpoint_dir(d)

    def sync_metadata_files(self) -> None:
        """fsync every partition's small files written without fsync; past ``SYNCFS_ABOVE_FILES`` of them (after
        thousands of partitions were created or changed leader) one syncfs per log dir does it at once."""
        pending: list[tuple[Log, list[str]]] = []
        logs = self._current_logs()
        tps = list(logs)
        for tp, (paths, exc) in zip(tps, self.owners.call_each(tps, lambda tp: logs[tp].take_unsynced_files())):
            if exc is not None:
                if not isinstance(exc, KafkaStorageError):  # a failed log dir was reported to the channel
                    logger.error("Taking the unsynced files of %s-%d failed", tp[0], tp[1], exc_info=exc)
                continue
            if paths:
                pending.append((logs[tp], paths))
        if sum(len(p) for _, p in pending) > SYNCFS_ABOVE_FILES:
            for d in self.live_log_dirs:
                try:
                    sync_filesystem(d)
                except OSError as exc:
                    self.report_io_error(d, "Error while flushing the partition metadata files in dir %s" % d, exc)
            return
        for log, paths in pending:
            try:
                for path in paths:
                    fsync_file(path)
                fsync_dir(log.dir)
            except OSError as exc:
                self.report_io_error(log.parent_dir, "Error while flushing the metadata files of %s-%d in dir %s"
                                     % (*log.topic_partition, log.parent_dir), exc)

    def _each_log(self, logs: list[Log], fn: Callable[[Log], object]) -> list[tuple[object, Optional[Exception]]]:
        """``fn(log)`` for each of ``logs`` (a current and a future log of one partition may both be there) on its
        owner, a few hand-offs in all."""
        out: list[tuple[object, Optional[Exception]]] = []
        by_key: dict[TopicPartition, list[Log]] = {}
        for log in logs:
            by_key.setdefault(log.owner_key, []).append(log)
        keys = list(by_key)
        results = dict(zip(keys, self.owners.call_each(keys, lambda tp: run_each(fn, by_key[tp]))))
        pos: dict[TopicPartition, int] = {}
        for log in logs:
            res, exc = results[log.owner_key]
            if exc is not None:
                out.append((None, exc))
                continue
            i = pos.get(log.owner_key, 0)
            pos[log.owner_key] = i + 1
            out.append(res[i])  # type: ignore[index]
        return out

    def _logs_in_dir(self, log_dir: str) -> dict[TopicPartition, Log]:
        """Current and future logs in ``log_dir`` (one partition has at most one log per dir)."""
        with self._lock:
            logs = {tp: log for tp, log in self._future_logs.items() if self._future_dir_of.get(tp) == log_dir}
            logs.update({tp: log for tp, log in self._logs.items() if self._log_dir_of.get(tp) == log_dir})
            return logs

    def _write_checkpoint(self, log_dir: str, name: str, offsets: dict[TopicPartition, int], what: str) -> bool:
        """Write one checkpoint file of ``log_dir``; an I/O error takes the dir offline (Kafka's messages: ``what``
        names the file as Kafka's LogManager / ReplicaManager do). False when the dir is (now) offline."""
        if log_dir in self.offline_log_dirs:
            return False
        try:
            OffsetCheckpointFile(os.path.join(log_dir, name)).write(offsets)
            return True
        except OSError as exc:
            self.report_io_error(log_dir, "%s in directory %s: %s" % (what, log_dir, describe_cause(exc)), exc)
            return False

    def checkpoint_dir(self, log_dir: str) -> None:
        logs = self._logs_in_dir(log_dir)
        with self._checkpoint_lock:
            if not self._write_checkpoint(log_dir, files.RECOVERY_POINT_CHECKPOINT,
                                          {tp: log.recovery_point for tp, log in logs.items()},
                                          "Disk error while writing recovery offsets checkpoint"):
                return
            if not self._write_checkpoint(log_dir, files.LOG_START_OFFSET_CHECKPOINT,
                                          {tp: log.log_start_offset for tp, log in logs.items()
                                           if log.remote_log_enabled
                                           or log.log_start_offset > log.segments[0].base_offset},
                                          "Disk error while writing log start offsets checkpoint"):
                return
            self._write_checkpoint(log_dir, files.REPLICATION_OFFSET_CHECKPOINT,
                                   {tp: log.high_watermark for tp, log in logs.items()},
                                   "Error while writing to highwatermark file")

    def checkpoint_log_start_offsets(self) -> None:
        """Write only log-start-offset-checkpoint of every live log dir (log.flush.start.offset.checkpoint.interval.ms),
        so a log start offset moved by DeleteRecords or retention survives a crash."""
        for d in self.live_log_dirs:
            logs = self._logs_in_dir(d)
            with self._checkpoint_lock:
                self._write_checkpoint(d, files.LOG_START_OFFSET_CHECKPOINT,
                                       {tp: log.log_start_offset for tp, log in logs.items()
                                        if log.remote_log_enabled
                                        or log.log_start_offset > log.segments[0].base_offset},
                                       "Disk error while writing log start offsets checkpoint")

    def checkpoint_high_watermarks(self) -> None:
        """Write only replication-offset-checkpoint of every live log dir (the ReplicaManager's frequent
        replica.high.watermark.checkpoint.interval.ms task; the other checkpoints stay on their own
        schedule)."""
        for d in self.live_log_dirs:
            logs = self._logs_in_dir(d)
            with self._checkpoint_lock:
                self._write_checkpoint(d, files.REPLICATION_OFFSET_CHECKPOINT,
                                       {tp: log.high_watermark for tp, log in logs.items()},
                                       "Error while writing to highwatermark file")

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Stop tasks, flush and close every log, write checkpoints and the clean shutdown markers."""
        if self._shut_down:
            return
        self._shut_down = True
        self.cleaner.shutdown()
        if self._own_scheduler:
            self.scheduler.shutdown()
        self.scheduler.run_pending_now()
        with self._lock:
            everything = list(self._future_logs.values()) + list(self._logs.values())
        closed = []
        for log, (_, exc) in zip(everything, self._each_log(everything, lambda log: log.close(sync=False))):
            if exc is None:
                closed.append(log)
            elif not isinstance(exc, KafkaStorageError):  # a failed log dir was reported to the channel
                logger.error("Error closing log %s-%d", log.owner_key[0], log.owner_key[1], exc_info=exc)
        # One syncfs per log dir instead of an fsync per segment, index and snapshot of every partition (at
        # 10,000 partitions that is tens of thousands of fsyncs); only then do recovery points reach the LEO.
        # An offline dir gets nothing: no checkpoint, no clean shutdown marker (its logs are recovered at the next
        # start, so a half-written batch is cut off).
        synced = set()
        for d in self.live_log_dirs:
            try:
                sync_filesystem(d)
                synced.add(d)
            except OSError as exc:
                self.report_io_error(d, "Error while flushing log dir %s at shutdown" % d, exc)
        self._each_log([log for log in closed if log.parent_dir in synced], lambda log: log.mark_flushed())
        self.checkpoint_all()
        for d in self.live_log_dirs:
            try:
                atomic_write(os.path.join(d, files.CLEAN_SHUTDOWN_FILE), b"")
            except OSError as exc:
                self.report_io_error(d, "Error while writing the clean shutdown marker in dir %s" % d, exc)
        self._unlock_dirs()
        logger.info("Log manager shut down")
