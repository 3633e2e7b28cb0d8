"""File names of the log directory, as Kafka's LogFileUtils spells them.

Segment files are named by their base offset zero-padded to 20 digits:
``00000000000000000000.log``, ``.index``, ``.timeindex``, ``.snapshot`` (producer state).
Suffixes ``.deleted``, ``.cleaned`` and ``.swap`` mark files in transition; partitions being
deleted are renamed ``<topic>-<partition>.<uuidhex>-delete``.
"""
from __future__ import annotations

import os

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded offset Kafka uses as every segment file's stem."""
    return "%020d" % offset


def file_path(dir_path: str, offset: int, suffix: str) -> str:
    return os.path.join(dir_path, filename_prefix(offset) + suffix)


def offset_from_file_name(name: str) -> int:
    """The base offset encoded in a segment file name (``00000000000000000042.log`` -> 42)."""
    return int(os.path.basename(name).split(".", 1)[0])


def is_segment_stem(name: str) -> bool:
    stem = name.split(".", 1)[0]
    return len(stem) == 20 and stem.isdigit()


def parse_topic_partition_dir(name: str) -> tuple[str, int] | None:
    """Split ``<topic>-<partition>`` at the last dash; None for anything else (delete/future dirs)."""
    if name.endswith(DELETE_DIR_SUFFIX) or name.endswith(FUTURE_DIR_SUFFIX):
        return None
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def topic_partition_dir_name(topic: str, partition: int) -> str:
    return "%s-%d" % (topic, partition)
