"""LogManager: every partition log on this broker, across log.dirs, plus their periodic upkeep.

Per log dir it holds an exclusive lock on ``.lock`` for its whole life (taken before any other
file of the dir is read or written, so a second broker on the same ``log.dirs`` stops at once), and owns
``meta.properties`` (Java properties text: ``version=0``, ``broker.id``,
``cluster.id``), the ``.kafka_cleanshutdown`` marker and the offset checkpoints
(recovery-point-offset-checkpoint, log-start-offset-checkpoint, replication-offset-checkpoint;
format in checkpoints.py). Partition directories are ``<topic>-<partition>``; a deleted one is
renamed ``<topic>-<partition>.<uuidhex>-delete`` and then removed.

Periodic tasks (on a storage Scheduler thread): retention (log.retention.check.interval.ms),
flush by flush.ms, producer id expiration, and checkpoints (every 60 s by default). Compaction
runs on the LogCleaner's own thread (cleaner.py), which owns cleaner-offset-checkpoint.
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
from typing import Callable, Optional

from . import files
from .checkpoints import OffsetCheckpointFile, atomic_write, write_partition_metadata
from .config import LONG_MAX, LogConfig
from .errors import InconsistentClusterIdError, KafkaStorageError
from .cleaner import CleanerConfig, LogCleaner
from .log import Log
from .scheduler import Scheduler

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class InconsistentBrokerIdError(KafkaStorageError):
    error_name = "KAFKA_STORAGE_ERROR"


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
                 time: Callable[[], float] = _time.time,
                 topic_configs: Optional[Callable[[str], Optional[LogConfig]]] = None,
                 retention_check_interval_ms: int = 300000, flush_check_interval_ms: int = LONG_MAX,
                 flush_recovery_offset_checkpoint_interval_ms: int = 60000,
                 producer_id_expiration_ms: int = 86400000,
                 producer_id_expiration_check_interval_ms: int = 600000,
                 cleaner_config: Optional[CleanerConfig] = None) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._time = time
        self._own_scheduler = scheduler is None
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self._topic_configs: dict[str, LogConfig] = {}
        self._topic_config_provider = topic_configs
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = flush_recovery_offset_checkpoint_interval_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self._lock = threading.RLock()
        #: one writer at a time per checkpoint file (this scheduler and the ReplicaManager's HW checkpoints)
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._last_flush_ms: dict[TopicPartition, int] = {}
        self._started = False
        self._shut_down = False
        self._dir_locks: list[int] = []
        try:
            for d in self.log_dirs:
                os.makedirs(d, exist_ok=True)
                self._lock_dir(d)
            for d in self.log_dirs:
                self._check_meta_properties(d)
        except BaseException:
            self._unlock_dirs()
            raise
        self._load_logs()
        self.cleaner = LogCleaner(cleaner_config if cleaner_config is not None else CleanerConfig(), self.log_dirs,
                                  self.all_logs, self.log_dir_of, time=time)

    # ------------------------------------------------------------------ startup
    def _lock_dir(self, log_dir: str) -> None:
        """Take the exclusive ``.lock`` of ``log_dir`` (released when this process ends or shuts down)."""
        path = os.path.join(log_dir, files.LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
        path = os.path.join(log_dir, files.META_PROPERTIES)
        if not os.path.exists(path):
            write_meta_properties(path, self.broker_id, self.cluster_id)
            return
        props = read_meta_properties(path)
        found_cluster = props.get("cluster.id")
        if self.cluster_id is not None and found_cluster is not None and found_cluster != self.cluster_id:
            raise InconsistentClusterIdError(
                "The Cluster ID %s doesn't match stored clusterId %s in meta.properties of %s. The broker is trying "
                "to join the wrong cluster. Configured zookeeper.connect may be wrong."
                % (self.cluster_id, found_cluster, log_dir))
        found_broker = props.get("broker.id")
        if found_broker is not None and int(found_broker) != self.broker_id:
            raise InconsistentBrokerIdError(
                "Configured broker.id %d doesn't match stored broker.id %s in meta.properties of %s"
                % (self.broker_id, found_broker, log_dir))
        if found_cluster is None and self.cluster_id is not None:
            write_meta_properties(path, self.broker_id, self.cluster_id)

    def _config_for(self, topic: str) -> LogConfig:
        cfg = self._topic_configs.get(topic)
        if cfg is None and self._topic_config_provider is not None:
            cfg = self._topic_config_provider(topic)
        return cfg if cfg is not None else self.default_config

    def _open_log(self, path: str, config: LogConfig, **kwargs: object) -> Log:
        log = Log.open(path, config, time=self._time, scheduler=self.scheduler.schedule_once,
                       producer_id_expiration_ms=self.producer_id_expiration_ms, **kwargs)  # type: ignore[arg-type]
        log.on_roll = self._on_roll
        return log

    def _load_logs(self) -> None:
        for d in self.log_dirs:
            marker = os.path.join(d, files.CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            recovery = OffsetCheckpointFile(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT)).read()
            starts = OffsetCheckpointFile(os.path.join(d, files.LOG_START_OFFSET_CHECKPOINT)).read()
            hws = OffsetCheckpointFile(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT)).read()
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith(files.DELETE_DIR_SUFFIX):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                tp = files.parse_topic_partition_dir(name)
                if tp is None:
                    continue
                if tp in self._logs:
                    raise KafkaStorageError("duplicate log directories for %s-%d: %s and %s"
                                            % (tp[0], tp[1], self._log_dir_of[tp], d))
                log = self._open_log(path, self._config_for(tp[0]), recovery_point=recovery.get(tp, 0),
                                     log_start_offset=starts.get(tp, 0), clean_shutdown=clean,
                                     high_watermark=hws.get(tp, 0))
                self._logs[tp] = log
                self._log_dir_of[tp] = d
            if clean:
                os.unlink(marker)
        logger.info("Loaded %d logs from %s", len(self._logs), ", ".join(self.log_dirs))

    def startup(self) -> None:
        """Schedule retention, flush, producer expiration and checkpoint tasks; start the log cleaner."""
        if self._started:
            return
        self._started = True
        s = self.scheduler
        s.schedule("kafka-log-retention", self.cleanup_logs, 30.0, self.retention_check_interval_ms / 1000.0)
        if self.flush_check_interval_ms < LONG_MAX // 2:
            s.schedule("kafka-log-flusher", self.flush_dirty_logs, 30.0, self.flush_check_interval_ms / 1000.0)
        s.schedule("kafka-recovery-point-checkpoint", self.checkpoint_all, 30.0, self.checkpoint_interval_ms / 1000.0)
        s.schedule("kafka-producer-id-expiration", self.remove_expired_producers,
                   self.producer_id_expiration_check_interval_ms / 1000.0,
                   self.producer_id_expiration_check_interval_ms / 1000.0)
        self.cleaner.startup()

    # ------------------------------------------------------------------ access
    def get_log(self, tp: TopicPartition) -> Optional[Log]:
        with self._lock:
            return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def log_dir_of(self, tp: TopicPartition) -> Optional[str]:
        with self._lock:
            return self._log_dir_of.get(tp)

    def get_or_create_log(self, topic: str, partition: int, config: Optional[LogConfig] = None,
                          topic_id: Optional[str] = None) -> Log:
        """The partition's log; a new one goes to the log dir holding the fewest partitions."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.get(tp)
            if log is not None:
                return log
            if config is not None:
                self._topic_configs[topic] = config
            counts = {d: 0 for d in self.log_dirs}
            for d in self._log_dir_of.values():
                counts[d] += 1
            d = min(self.log_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))
            path = os.path.join(d, files.topic_partition_dir_name(topic, partition))
            log = self._open_log(path, self._config_for(topic), clean_shutdown=True)
            if topic_id is not None:
                write_partition_metadata(path, topic_id)
            self._logs[tp] = log
            self._log_dir_of[tp] = d
            logger.info("Created log for partition %s-%d in %s", topic, partition, d)
            return log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the partition dir to ``<tp>.<uuidhex>-delete`` and remove it; False if unknown."""
        tp = (topic, partition)
        if tp in self._logs:
            self.cleaner.abort_cleaning(tp)
        with self._lock:
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
            self.scheduler.schedule("delete-log", log.delete, delay / 1000.0)
        else:
            log.delete()
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a new effective topic config to the topic's existing and future logs."""
        with self._lock:
            self._topic_configs[topic] = config
            logs = [log for (t, _), log in self._logs.items() if t == topic]
        for log in logs:
            log.update_config(config)

    # ------------------------------------------------------------------ periodic tasks
    def cleanup_logs(self) -> int:
        """Retention pass over every log; returns the number of segments deleted."""
        total = 0
        now = int(self._time() * 1000)
        for tp, log in self.all_logs().items():
            try:
                total += log.delete_old_segments(now)
            except Exception:
                logger.exception("Retention failed for %s-%d", tp[0], tp[1])
        return total

    def flush_dirty_logs(self) -> None:
        """fsync logs whose flush.ms elapsed since their last flush."""
        now = int(self._time() * 1000)
        for tp, log in self.all_logs().items():
            last = self._last_flush_ms.setdefault(tp, now)
            if now - last >= log.config.flush_ms:
                try:
                    log.flush()
                except Exception:
                    logger.exception("Flush failed for %s-%d", tp[0], tp[1])
                self._last_flush_ms[tp] = now

    def _on_roll(self, log: Log, new_base: int) -> None:
        """Kafka flushes a rolled segment in the background right after the roll."""
        self.scheduler.schedule("flush-log", lambda: log.flush(new_base), 0.0)

    def remove_expired_producers(self) -> None:
        now = int(self._time() * 1000)
        for log in self.all_logs().values():
            log.remove_expired_producers(now)

    def checkpoint_all(self) -> None:
        """Write recovery point, log start offset and HW checkpoints of every log dir."""
        for d in self.log_dirs:
            self.checkpoint_dir(d)

    def checkpoint_dir(self, log_dir: str) -> None:
        with self._lock:
            logs = {tp: log for tp, log in self._logs.items() if self._log_dir_of.get(tp) == log_dir}
        with self._checkpoint_lock:
            OffsetCheckpointFile(os.path.join(log_dir, files.RECOVERY_POINT_CHECKPOINT)).write(
                {tp: log.recovery_point for tp, log in logs.items()})
            OffsetCheckpointFile(os.path.join(log_dir, files.LOG_START_OFFSET_CHECKPOINT)).write(
                {tp: log.log_start_offset for tp, log in logs.items()
                 if log.log_start_offset > log.segments[0].base_offset})
            OffsetCheckpointFile(os.path.join(log_dir, files.REPLICATION_OFFSET_CHECKPOINT)).write(
                {tp: log.high_watermark for tp, log in logs.items()})

    def checkpoint_high_watermarks(self) -> None:
        """Write only replication-offset-checkpoint of every log dir (the ReplicaManager's frequent
        replica.high.watermark.checkpoint.interval.ms task; the other checkpoints stay on their own
        schedule)."""
        for d in self.log_dirs:
            with self._lock:
                logs = {tp: log for tp, log in self._logs.items() if self._log_dir_of.get(tp) == d}
            with self._checkpoint_lock:
                OffsetCheckpointFile(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT)).write(
                    {tp: log.high_watermark for tp, log in logs.items()})

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
        for tp, log in self.all_logs().items():
            try:
                log.flush()
                log.close()
            except Exception:
                logger.exception("Error closing log %s-%d", tp[0], tp[1])
        self.checkpoint_all()
        for d in self.log_dirs:
            atomic_write(os.path.join(d, files.CLEAN_SHUTDOWN_FILE), b"")
        self._unlock_dirs()
        logger.info("Log manager shut down")
