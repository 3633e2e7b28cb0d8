"""RemoteLogReader: a fetch of an offset that only remote storage holds (the Log raised
OffsetMovedToTieredStorageError). As Kafka's RemoteLogManager.read: the leader epoch of the offset, the remote
segment of that epoch holding it (RemoteLogMetadataManager), the position from the segment's offset index, then the
segment's batches from there (RemoteStorageManager): the first batch ending at or after the offset, and the whole
batches after it within ``max_bytes`` (the first one whatever its size with ``min_one_message``, KIP-74).

Called by the ReplicaManager's fetch on the remote reader pool (broker/replica/tiered_storage.py).
"""
from __future__ import annotations

import struct
from typing import Iterator, List, NamedTuple, Optional, Tuple

from broker.metrics.stats import RemoteStorageStats
from broker.remote_log.metadata_manager import RemoteLogMetadataManager
from broker.remote_log.remote_index_cache import RemoteIndexCache
from broker.storage.leader_epoch_file import LeaderEpochFileCache
from broker.storage.remote.metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from broker.storage.remote.storage_manager import IndexType, RemoteStorageManager
from broker.storage.txn_index import decode_entries, overlapping

#: a batch's header up to and including lastOffsetDelta: baseOffset(8) length(4) partitionLeaderEpoch(4) magic(1)
#: crc(4) attributes(2) lastOffsetDelta(4)
_HEADER = 27
_ENTRY = struct.Struct(">ii")


class RemoteFetchResult(NamedTuple):
    """The records read (whole batches) and the remote segment they came from (None: no remote data); for a
    read_committed read, the aborted transactions (producer id, first offset) overlapping them."""

    records: bytes
    segment: Optional[RemoteLogSegmentMetadata]
    aborted_transactions: Optional[List[Tuple[int, int]]] = None
    #: read_committed: the upper bound of the aborted-transaction search when the remote indexes did not complete it
    #: (the local log's transaction indexes hold the rest: Kafka's log.collectAbortedTransactions), else -1
    local_aborted_upper: int = -1


def _end_offset(records: bytes) -> int:
    """The last offset of the last whole batch of ``records``."""
    pos, last = 0, -1
    while pos + _HEADER <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        last = base + struct.unpack_from(">i", records, pos + 23)[0]
        pos += 12 + length
    return last


def lookup_position(index: bytes, base_offset: int, offset: int) -> int:
    """The position of the last offset-index entry at or below ``offset`` (0 when none): entries are 8 bytes,
    relative offset and position, as Kafka's OffsetIndex (a zero-filled tail past the entries is ignored)."""
    pos = 0
    for i in range(0, len(index) - len(index) % 8, 8):
        rel, position = _ENTRY.unpack_from(index, i)
        if i > 0 and rel == 0 and position == 0:
            break
        if base_offset + rel > offset:
            break
        pos = position
    return pos


def read_batches(data: bytes, offset: int, max_bytes: int, min_one_message: bool) -> bytes:
    """From ``data`` (whole batches from some position), the first batch whose last offset is >= ``offset`` and
    the whole batches after it within ``max_bytes``."""
    pos, start, end = 0, -1, -1
    while pos + _HEADER <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        size = 12 + length
        if pos + size > len(data):
            break
        last = base + struct.unpack_from(">i", data, pos + 23)[0]
        if start < 0:
            if last >= offset:
                start = pos
                if size > max_bytes:
                    return bytes(data[pos:pos + size]) if min_one_message else b""
                end = pos + size
        elif end - start + size <= max_bytes:
            end = pos + size
        else:
            break
        pos += size
    return bytes(data[start:end]) if start >= 0 else b""


class RemoteLogReader:
    """Reads one partition's remote batches for a fetch."""

    def __init__(self, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager,
                 stats: Optional[RemoteStorageStats] = None, index_cache: Optional[RemoteIndexCache] = None) -> None:
        self.rsm = rsm
        self.rlmm = rlmm
        #: the offset and transaction indexes fetched (Kafka's RemoteIndexCache)
        self.index_cache = index_cache if index_cache is not None else RemoteIndexCache(rsm)
        #: RemoteFetchRequestsPerSec / RemoteFetchBytesPerSec / RemoteFetchErrorsPerSec (Kafka's RemoteLogReader)
        self.stats = stats

    def read(self, tip: TopicIdPartition, epochs: LeaderEpochFileCache, offset: int, max_bytes: int,
             min_one_message: bool = True, read_committed: bool = False) -> RemoteFetchResult:
        """A consumer fetch's read of remote storage, counted as Kafka's RemoteLogReader counts it: a request,
        then the bytes read or an error."""
        stats = self.stats
        if stats is None:
            return self._read(tip, epochs, offset, max_bytes, min_one_message, read_committed)
        stats.record_fetch_request(tip.topic)
        try:
            result = self._read(tip, epochs, offset, max_bytes, min_one_message, read_committed)
        except Exception:
            stats.record_fetch_error(tip.topic)
            raise
        stats.record_fetch_bytes(tip.topic, len(result.records))
        return result

    def _read(self, tip: TopicIdPartition, epochs: LeaderEpochFileCache, offset: int, max_bytes: int,
              min_one_message: bool, read_committed: bool) -> RemoteFetchResult:
        epoch = epochs.epoch_for_offset(offset)
        if epoch is None:
            return RemoteFetchResult(b"", None)
        md = self.rlmm.remote_log_segment_metadata(tip, epoch, offset)
        while md is not None:
            position = lookup_position(self.index_cache.get(md, IndexType.OFFSET), md.start_offset, offset)
            with self.rsm.fetch_log_segment(md, position) as f:
                data = f.read()
            records = read_batches(data, offset, max_bytes, min_one_message)
            if records:
                if not read_committed:
                    return RemoteFetchResult(records, md)
                upper = _end_offset(records) + 1
                aborted, complete = self.aborted_transactions(tip, md, offset, upper)
                return RemoteFetchResult(records, md, aborted, -1 if complete else upper)
            md = self._next_segment(tip, md)  # the offset was past this segment's last batch (compacted away)
        return RemoteFetchResult(b"", None)

    def find_offset_by_timestamp(self, tip: TopicIdPartition, timestamp: int, starting_offset: int
                                 ) -> Optional[Tuple[int, int, int]]:
        """Kafka's RemoteLogManager.findOffsetByTimestamp: in the first copied segment (offset order) whose largest
        timestamp reaches ``timestamp`` and which ends at or after ``starting_offset`` (the log start), the first
        record at or after both; (offset, timestamp, leader epoch of its batch or -1), None when no remote segment
        has one (the local log is searched then)."""
        from broker.accel import record_batch
        from broker.storage.cleaner_batch import iter_stored_records
        segments = sorted((m for m in self.rlmm.list_remote_log_segments(tip)
                           if m.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED), key=lambda m: m.start_offset)
        for md in segments:
            if md.max_timestamp_ms < timestamp or md.end_offset < starting_offset:
                continue
            with self.rsm.fetch_log_segment(md, 0) as f:
                data = f.read()
            infos, _ = record_batch.scan_batches(data)
            for bi in infos:
                if bi.is_control or bi.max_timestamp < timestamp or \
                        bi.base_offset + bi.last_offset_delta < starting_offset:
                    continue
                for r in iter_stored_records(data[bi.position:bi.position + bi.size]):
                    if r.timestamp >= timestamp and r.offset >= starting_offset:
                        epoch = bi.partition_leader_epoch
                        return r.offset, r.timestamp, epoch if epoch >= 0 else -1
        return None

    def aborted_transactions(self, tip: TopicIdPartition, md: RemoteLogSegmentMetadata, start: int, upper: int
                             ) -> Tuple[List[Tuple[int, int]], bool]:
        """Kafka's RemoteLogManager.collectAbortedTransactions, remote part: the transaction indexes of the remote
        segments from ``md`` on, until one says the search is complete (an entry's last stable offset reaches
        ``upper``); (aborted transactions, complete). Not complete: the local log's indexes hold the rest. The
        indexes come from the index cache (a segment without one has an empty one), so a search that walks every
        following segment, as one with no transaction does, asks the remote store once per segment, not per fetch."""
        out: List[Tuple[int, int]] = []
        for seg in self._chain_from(tip, md):
            found, complete = overlapping(decode_entries(self.index_cache.get(seg, IndexType.TRANSACTION)), start, upper)
            out += [(t.producer_id, t.first_offset) for t in found]
            if complete:
                return out, True
        return out, False

    def _chain_from(self, tip: TopicIdPartition, md: RemoteLogSegmentMetadata) -> Iterator[RemoteLogSegmentMetadata]:
        """``md``, then each finished segment holding the offset after the last one's end (Kafka's
        findNextSegmentMetadata: after a leader change that is the new leader's copy overlapping the old one's),
        until none holds it (the rest is local)."""
        yield md
        following = sorted((m for m in self.rlmm.list_remote_log_segments(tip)
                            if m.end_offset > md.end_offset and m.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
                           key=lambda m: (m.start_offset, m.end_offset))
        end = md.end_offset
        for seg in following:
            if seg.end_offset <= end:
                continue
            if seg.start_offset > end + 1:
                return
            yield seg
            end = seg.end_offset

    def _next_segment(self, tip: TopicIdPartition, md: RemoteLogSegmentMetadata) -> Optional[RemoteLogSegmentMetadata]:
        for m in self.rlmm.list_remote_log_segments(tip):
            if m.start_offset > md.end_offset and m.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                return m
        return None


__all__ = ["RemoteLogReader", "RemoteFetchResult", "lookup_position", "read_batches"]
