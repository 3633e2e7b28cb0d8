"""What a Log does differently when its topic is tiered (KIP-405): which rolled segments may be copied to remote
storage, and local retention, which deletes a local segment only once remote storage holds it.

Kafka keeps this in UnifiedLog; here it is apart so that log.py only calls in. The log start offset stays where
remote storage begins (the RemoteLogManager's expiration raises it); the local log start offset is the first local
segment's base (LogOffsets.local_log_start_offset), so it needs no checkpoint of its own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional

from . import files
from .leader_epoch_file import LeaderEpochFileCache

if TYPE_CHECKING:
    from .log import Log
    from .segment import LogSegment

#: local.retention.ms / local.retention.bytes value meaning "use retention.ms / retention.bytes"
USE_TOTAL_RETENTION = -2


class CopyableSegment(NamedTuple):
    """A rolled segment that may go to remote storage; its end offset is ``next_base_offset - 1``."""

    segment: "LogSegment"
    next_base_offset: int


def local_retention_ms(log: "Log") -> int:
    cfg = log.config
    return cfg.retention_ms if cfg.local_retention_ms == USE_TOTAL_RETENTION else cfg.local_retention_ms


def local_retention_bytes(log: "Log") -> int:
    cfg = log.config
    return cfg.retention_bytes if cfg.local_retention_bytes == USE_TOTAL_RETENTION else cfg.local_retention_bytes


def copyable_segments(log: "Log", from_offset: int, bound: Optional[int] = None) -> list[CopyableSegment]:
    """The rolled (never the active) segments holding offsets >= ``from_offset`` whose every offset is below
    ``bound`` (default the LSO, as Kafka's RLMCopyTask: nothing unstable or unreplicated leaves the broker), in
    offset order."""
    upper = log.last_stable_offset if bound is None else bound
    segs = log.view.segments
    out: list[CopyableSegment] = []
    for seg, nxt in zip(segs, segs[1:]):
        end = nxt.base_offset - 1
        if end < from_offset:
            continue
        if end >= upper:
            break
        out.append(CopyableSegment(seg, nxt.base_offset))
    return out


def leader_epoch_checkpoint_slice(log: "Log", next_base_offset: int) -> bytes:
    """The leader-epoch checkpoint as of a segment's end (Kafka's format: version, count, ``epoch offset`` lines):
    the entries starting below ``next_base_offset``."""
    entries = [(e, o) for e, o in log.leader_epoch_cache.entries if o < next_base_offset]
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def segment_leader_epochs(cache: LeaderEpochFileCache, base_offset: int, next_base_offset: int) -> dict[int, int]:
    """The epochs of the offsets [base, next base) with where each starts in the segment (the one in force at the
    base counts from the base); the remote segment metadata's segmentLeaderEpochs."""
    out: dict[int, int] = {}
    for epoch, start in cache.entries:
        if start >= next_base_offset:
            break
        if start <= base_offset:
            out = {epoch: base_offset}
        else:
            out[epoch] = start
    return out


def delete_local_segments(log: "Log", now_ms: int) -> int:
    """Local retention of a tiered log, under its lock (Log.delete_old_segments calls it): local.retention.ms,
    local.retention.bytes (-2: the total retention's value) and the log start offset, applied only to segments
    remote storage holds whole (end offset <= highest_offset_in_remote_storage). Total retention is the
    RemoteLogManager's expiration."""
    highest = log.highest_offset_in_remote_storage

    def copied(nxt: "LogSegment") -> bool:
        return nxt.base_offset - 1 <= highest

    deleted = 0
    ms = local_retention_ms(log)
    if log.config.delete and ms >= 0:
        deleted += log._delete_segments(lambda seg, nxt: copied(nxt) and now_ms - seg.largest_timestamp > ms)
    limit = local_retention_bytes(log)
    if log.config.delete and limit >= 0:
        excess = [log.size_bytes - limit]

        def over_size(seg: "LogSegment", nxt: "LogSegment") -> bool:
            if copied(nxt) and excess[0] - seg.size >= 0:
                excess[0] -= seg.size
                return True
            return False

        deleted += log._delete_segments(over_size)
    start = log.log_start_offset
    deleted += log._delete_segments(lambda seg, nxt: copied(nxt) and nxt.base_offset <= start)
    return deleted


def parse_leader_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """The ``epoch start-offset`` entries of a leader-epoch checkpoint (version line, count line, entries)."""
    lines = [line.strip() for line in data.decode("ascii").splitlines() if line.strip()]
    if len(lines) < 2 or lines[0] != "0":
        raise ValueError("not a leader-epoch checkpoint (version %r)" % (lines[0] if lines else None))
    entries = [(int(e), int(o)) for e, o in (line.split() for line in lines[2:])]
    if len(entries) != int(lines[1]):
        raise ValueError("leader-epoch checkpoint: %d entries, %s expected" % (len(entries), lines[1]))
    return entries


def restore_aux_state(log: "Log", next_offset: int, log_start_offset: int, epochs: list[tuple[int, int]],
                      producer_snapshot: bytes) -> None:
    """A follower's state rebuilt from remote storage, under the log's lock (Kafka's TierStateMachine
    buildRemoteLogAuxState): truncated fully to start at ``next_offset`` (the end of the remote segment holding the
    leader's local log start - 1, plus one), the log start offset at the leader's, the leader-epoch cache from the
    segment's checkpoint, the producer state from its snapshot."""
    from .checkpoints import atomic_write
    log._truncate_fully_locked(next_offset)
    if 0 <= log_start_offset < next_offset:
        log._log_start_offset = log_start_offset  # the rest is remote: local log start is next_offset
    cache = log.leader_epoch_cache
    for epoch, start in epochs:
        cache.assign(epoch, start)
    atomic_write(files.file_path(log.dir, next_offset, files.PRODUCER_SNAPSHOT_SUFFIX), producer_snapshot, True)
    log.producer_state.load_latest_snapshot_at_or_below(next_offset, next_offset, log._now_ms())
    log.highest_offset_in_remote_storage = max(log.highest_offset_in_remote_storage, next_offset - 1)
    log._publish()


__all__ = ["CopyableSegment", "parse_leader_epoch_checkpoint", "restore_aux_state", "copyable_segments", "delete_local_segments", "leader_epoch_checkpoint_slice",
           "segment_leader_epochs", "local_retention_ms", "local_retention_bytes", "USE_TOTAL_RETENTION"]
