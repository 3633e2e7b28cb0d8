"""RemoteLogReader: a fetch of an offset that only remote storage holds (the Log raised
OffsetMovedToTieredStorageError). As Kafka's RemoteLogManager.read: the leader epoch of the offset, the remote
segment of that epoch holding it (RemoteLogMetadataManager), the position from the segment's offset index (through
the RemoteIndexCache: fetched once, kept on local disk), then the segment's batches from there (RemoteStorageManager,
ranged reads of only what is needed: ``RangedSegmentReader``): the first batch ending at or after the offset, and the
whole batches after it within ``max_bytes`` (the first one whatever its size with ``min_one_message``, KIP-74).
ListOffsets by timestamp starts its scan at the position the time index, then the offset index, give (Kafka's
lookupTimestamp); read_committed reads take the aborted transactions from the cached transaction indexes.

Called by the ReplicaManager's fetch on the remote reader pool (broker/replica/tiered_storage.py).
"""
from __future__ import annotations

import struct
from typing import Iterator, List, NamedTuple, Optional, Tuple

from broker.stats import RemoteStorageStats
from broker.remote_log.metadata_manager import RemoteLogMetadataManager
from broker.remote_log.remote_index_cache import RemoteIndexCache
from broker.storage.leader_epoch_file import LeaderEpochFileCache
from broker.storage.remote.metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from broker.storage.remote.storage_manager import RemoteStorageException, RemoteStorageManager
from broker.storage.txn_index import overlapping

#: a batch's header up to and including lastOffsetDelta: baseOffset(8) length(4) partitionLeaderEpoch(4) magic(1)
#: crc(4) attributes(2) lastOffsetDelta(4)
_HEADER = 27


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


#: a v2 batch's header up to and including maxTimestamp (the timestamp scan's skip decision)
_TS_HEADER = 43
#: bytes read past the first index entry above the fetch offset in the first ranged read (the batch holding the
#: offset may start after that entry, when one entry covers several batches appended together); more is fetched
#: in a second range only when needed
_WINDOW_SLACK = 16 * 1024
#: the ranges a timestamp scan fetches at a time (it starts at the time index entry below the timestamp: the record
#: sought is usually within one index interval)
_SCAN_CHUNK = 64 * 1024
#: the least a range after the first asks for (within the reader's ``limit``): a batch header read across the end of
#: a range then costs one more range, not one for the header and one for the rest of its batch
_MIN_RANGE = 64 * 1024


class RangedSegmentReader:
    """Sequential reads of one remote segment from ``start``, through ranged fetches of the RemoteStorageManager
    (``fetch_log_segment(metadata, start, end)``: a seek in a local file, an HTTP Range GET in S3), each range read
    whole into memory at once: the first range ends at ``first_end`` (exclusive); a read past the fetched range
    fetches what it needs, at least ``chunk`` bytes but not past ``limit`` (the caller's bound on what it may still
    read, the segment's end until it sets one) from there. Nothing past the segment's size is asked for."""

    def __init__(self, rsm: RemoteStorageManager, md: RemoteLogSegmentMetadata, start: int, first_end: int,
                 chunk: int = _MIN_RANGE) -> None:
        self.rsm = rsm
        self.md = md
        self.size = md.segment_size_in_bytes
        self.pos = start
        self._first_end = min(first_end, self.size)
        self._chunk = chunk
        #: no range reaches past this (exclusive) unless a read needs it
        self.limit = self.size
        #: the last range fetched: its bytes and where they start in the segment
        self._buf = b""
        self._buf_start = start
        #: ranged fetches made, and the bytes they asked for
        self.requests = 0
        self.requested_bytes = 0

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes from the current position (fewer only at the segment's end)."""
        out: Optional[bytearray] = None
        while n > 0 and self.pos < self.size:
            off = self.pos - self._buf_start
            if off < 0 or off >= len(self._buf):
                self._fetch(n)
                off = 0
            take = min(n, len(self._buf) - off)
            chunk = self._buf[off:off + take]
            self.pos += take
            n -= take
            if out is None:
                if n == 0:
                    return chunk
                out = bytearray(chunk)
            else:
                out += chunk
        return bytes(out) if out is not None else b""

    def skip(self, n: int) -> None:
        """Move ``n`` bytes on (past the fetched range nothing is fetched for them)."""
        self.pos = min(self.pos + n, self.size)

    def _fetch(self, need: int) -> None:
        if self.requests == 0:
            end = max(self._first_end, self.pos + need)
        else:
            end = max(min(self.pos + max(need, self._chunk), self.limit), self.pos + need)
        end = min(end, self.size)
        length = end - self.pos
        with self.rsm.fetch_log_segment(self.md, self.pos, end - 1) as stream:
            parts = []
            got = 0
            while got < length:
                chunk = stream.read(length - got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
        if got < length:
            raise RemoteStorageException(f"Remote segment {self.md.remote_log_segment_id.id}: {got} bytes read of "
                                         f"the range {self.pos}-{end - 1} of its {self.size}")
        self._buf = parts[0] if len(parts) == 1 else b"".join(parts)
        self._buf_start = self.pos
        self.requests += 1
        self.requested_bytes += length

    def close(self) -> None:
        self._buf = b""

    def __enter__(self) -> "RangedSegmentReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_batches_from(reader: RangedSegmentReader, offset: int, max_bytes: int, min_one_message: bool) -> bytes:
    """Kafka's RemoteLogManager.read from the stream: the first batch whose last offset is >= ``offset`` (skipping
    the ones before it), then the whole batches after it within ``max_bytes``; the first one whatever its size
    with ``min_one_message`` (KIP-74), nothing when it is larger without. Reads no further than that."""
    out = bytearray()
    found = False
    while True:
        if found and len(out) + _HEADER > max_bytes:
            break  # no batch fits any more: its header is not even read
        header = reader.read(_HEADER)
        if len(header) < _HEADER:
            break
        base, length = struct.unpack_from(">qi", header, 0)
        size = 12 + length
        if not found:
            last = base + struct.unpack_from(">i", header, 23)[0]
            if last < offset:
                reader.skip(size - _HEADER)
                continue
            found = True
            if size > max_bytes and not min_one_message:
                return b""
            reader.limit = reader.pos - _HEADER + max(size, max_bytes)
        elif len(out) + size > max_bytes:
            break
        body = reader.read(size - _HEADER)
        if len(body) < size - _HEADER:
            break  # a torn batch at the end
        out += header
        out += body
    return bytes(out)


class RemoteLogReader:
    """Reads one partition's remote batches for a fetch; the remote segments' indexes through the RemoteIndexCache
    ``index_cache``."""

    def __init__(self, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager, index_cache: RemoteIndexCache,
                 stats: Optional[RemoteStorageStats] = None) -> None:
        self.rsm = rsm
        self.rlmm = rlmm
        #: RemoteFetchRequestsPerSec / RemoteFetchBytesPerSec / RemoteFetchErrorsPerSec (Kafka's RemoteLogReader)
        self.stats = stats
        self.index_cache = index_cache

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
            position, next_position = self.index_cache.lookup_offset_and_next(md, offset)
            first_end = (next_position if next_position is not None else position) + _WINDOW_SLACK + max(max_bytes, 0)
            with RangedSegmentReader(self.rsm, md, position, first_end) as reader:
                records = read_batches_from(reader, offset, max_bytes, min_one_message)
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
        segments = sorted((m for m in self.rlmm.list_remote_log_segments(tip)
                           if m.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED), key=lambda m: m.start_offset)
        for md in segments:
            if md.max_timestamp_ms < timestamp or md.end_offset < starting_offset:
                continue
            return self.lookup_timestamp(md, timestamp, starting_offset)
        return None

    def lookup_timestamp(self, md: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int
                         ) -> Optional[Tuple[int, int, int]]:
        """Kafka's RemoteLogManager.lookupTimestamp: from the position the segment's time index then offset index
        give (RemoteIndexCache), the batches in order; in the first whose max timestamp reaches ``timestamp`` and
        whose last offset reaches ``starting_offset``, the first record at or after both. Batches passed over are
        not fetched past their headers' range."""
        from broker.accel import record_batch
        from broker.storage.cleaner_batch import iter_stored_records
        position = self.index_cache.lookup_timestamp(md, timestamp, starting_offset)
        with RangedSegmentReader(self.rsm, md, position, position + _SCAN_CHUNK, _SCAN_CHUNK) as reader:
            while True:
                header = reader.read(_TS_HEADER)
                if len(header) < _TS_HEADER:
                    return None
                base, length = struct.unpack_from(">qi", header, 0)
                last = base + struct.unpack_from(">i", header, 23)[0]
                max_ts = struct.unpack_from(">q", header, 35)[0]
                if max_ts < timestamp or last < starting_offset:
                    reader.skip(12 + length - _TS_HEADER)
                    continue
                body = reader.read(12 + length - _TS_HEADER)
                if len(body) < 12 + length - _TS_HEADER:
                    return None
                data = header + body
                infos, _ = record_batch.scan_batches(data)
                if not infos or infos[0].is_control:
                    continue
                bi = infos[0]
                for r in iter_stored_records(data):
                    if r.timestamp >= timestamp and r.offset >= starting_offset:
                        epoch = bi.partition_leader_epoch
                        return r.offset, r.timestamp, epoch if epoch >= 0 else -1

    def aborted_transactions(self, tip: TopicIdPartition, md: RemoteLogSegmentMetadata, start: int, upper: int
                             ) -> Tuple[List[Tuple[int, int]], bool]:
        """Kafka's RemoteLogManager.collectAbortedTransactions, remote part: the transaction indexes of the remote
        segments from ``md`` on, until one says the search is complete (an entry's last stable offset reaches
        ``upper``); (aborted transactions, complete). Not complete: the local log's indexes hold the rest."""
        out: List[Tuple[int, int]] = []
        for seg in self._chain_from(tip, md):
            found, complete = overlapping(self.index_cache.aborted_txns(seg), start, upper)
            out += [(t.producer_id, t.first_offset) for t in found]
            if complete:
                return out, True
        return out, False

    def _next_segment(self, tip: TopicIdPartition, md: RemoteLogSegmentMetadata) -> Optional[RemoteLogSegmentMetadata]:
        """The finished segment holding the offset after ``md``'s end (Kafka's findNextSegmentMetadata), or None."""
        chain = self._chain_from(tip, md)
        next(chain)
        return next(chain, None)

    def _chain_from(self, tip: TopicIdPartition, md: RemoteLogSegmentMetadata) -> Iterator[RemoteLogSegmentMetadata]:
        """``md``, then each finished segment holding the offset after the last one's end (Kafka's
        findNextSegmentMetadata: after a leader change that is the new leader's copy overlapping the old one's),
        until none holds it (the rest is local). The metadata is listed and sorted once per walk."""
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


__all__ = ["RemoteLogReader", "RemoteFetchResult", "RangedSegmentReader", "read_batches_from"]
