"""RemoteLogReader over what the RemoteLogManager copied, once local retention deleted it: the batches come back
byte for byte from remote storage."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.remote_log.remote_index_cache import RemoteIndexCache
from broker.remote_log.remote_log_reader import RemoteLogReader
from broker.storage.config import LogConfig
from broker.storage.errors import OffsetMovedToTieredStorageError

from .test_remote_log_manager import ONE, TIP, Env


def test_reads_remote_batches_after_local_deletion(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=0))
    try:
        e.append(5)  # [0,1] [2,3] [4]
        local = Path(e.log.segments[0].path).read_bytes() + Path(e.log.segments[1].path).read_bytes()
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        e.clock.advance(10)
        assert e.log.delete_old_segments() == 2
        with pytest.raises(OffsetMovedToTieredStorageError):
            e.log.read(1, 1 << 20)
        reader = RemoteLogReader(e.rsm, rlm.rlmm, RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs")))
        epochs = e.log.leader_epoch_cache
        assert reader.read(TIP, epochs, 0, 1 << 20).records == local[:2 * ONE]  # one segment per read
        assert reader.read(TIP, epochs, 1, ONE).records == local[ONE:2 * ONE]
        assert reader.read(TIP, epochs, 3, 1 << 20).records == local[3 * ONE:]
        assert reader.read(TIP, epochs, 2, 1).records == local[2 * ONE:3 * ONE]  # KIP-74: one batch anyway
        assert reader.read(TIP, epochs, 2, 1, min_one_message=False).records == b""
        assert reader.read(TIP, epochs, 4, 1 << 20).segment is None  # local, not remote
    finally:
        e.log.close()


def test_read_committed_gets_the_aborted_transactions_from_remote_transaction_indexes(tmp_path: Path) -> None:
    """Kafka's RemoteLogManager.collectAbortedTransactions: the remote segments' transaction indexes from the one read
    on; the search ends where an entry's last stable offset reaches the upper bound, else the local log goes on."""
    from broker.protocol.records.builder import build_batch
    from broker.protocol.records.control import end_txn_marker_batch

    from .test_remote_log_manager import TS, batch
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=0))
    try:
        txn = bytearray(build_batch([(b"k", b"v" * 20, [], TS)], producer_id=7, producer_epoch=0, base_sequence=0,
                                    is_transactional=True))
        e.log.append_as_leader(txn, 3)  # offset 0
        e.log.append_as_leader(batch(TS), 3)  # 1
        e.log.append_as_leader(bytearray(end_txn_marker_batch(7, 0, 0, False)), 3, is_from_client=False)  # 2
        e.log.append_as_leader(batch(TS), 3)  # 3
        e.log.append_as_leader(batch(TS), 3)  # 4
        e.log.update_high_watermark(e.log.log_end_offset)
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        assert e.log.highest_offset_in_remote_storage >= 1
        reader = RemoteLogReader(e.rsm, rlm.rlmm, RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs")))
        res = reader.read(TIP, e.log.leader_epoch_cache, 0, 1 << 20, read_committed=True)
        assert res.segment is not None and res.segment.start_offset == 0
        # the abort marker is in the next remote segment: its index completes the search
        assert res.aborted_transactions == [(7, 0)] and res.local_aborted_upper == -1
        assert reader.read(TIP, e.log.leader_epoch_cache, 0, 1 << 20).aborted_transactions is None
    finally:
        e.log.close()


def test_read_committed_walk_fetches_each_remote_index_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read_committed fetch with no transaction walks the transaction indexes of every following remote segment
    (Kafka's collectAbortedTransactions finds no entry completing the search); Kafka's RemoteIndexCache makes that a
    walk in memory after the first fetch. Without a cache each fetch asked the store once per following segment (the
    200 MB run on S3: a consumer at offset 0 took 0.75 s per fetch). Missing transaction indexes count as empty."""
    from broker.remote_log.remote_index_cache import RemoteIndexCache
    from broker.storage.remote.storage_manager import IndexType
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=0))
    try:
        e.append(11)  # [0,1] [2,3] ... [8,9] [10]: five remote segments, no transaction
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        e.clock.advance(10)
        assert e.log.delete_old_segments() == 5
        calls: list[IndexType] = []
        fetch_index = e.rsm.fetch_index

        def counted(md, index_type):  # type: ignore[no-untyped-def]
            calls.append(index_type)
            return fetch_index(md, index_type)
        monkeypatch.setattr(e.rsm, "fetch_index", counted)
        reader = RemoteLogReader(e.rsm, rlm.rlmm, RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "cache")))
        epochs = e.log.leader_epoch_cache
        res = reader.read(TIP, epochs, 0, 1 << 20, read_committed=True)
        assert res.aborted_transactions == [] and res.local_aborted_upper == 2  # the rest is in the local log
        assert calls.count(IndexType.TRANSACTION) == 5  # each remote segment's indexes fetched once
        fetched = len(calls)
        for offset in range(10):  # every later fetch: no request for an index
            res = reader.read(TIP, epochs, offset, ONE, read_committed=True)
            assert res.records and res.aborted_transactions == []
        assert len(calls) == fetched and len(reader.index_cache) == 5
    finally:
        e.log.close()


def test_read_committed_walk_follows_a_new_leaders_overlapping_copy(tmp_path: Path) -> None:
    """After a leader change the next remote segment may start inside the one read (the new leader copied its whole
    segment holding the first offset not copied): the walk goes on with it, as Kafka's findNextSegmentMetadata (the
    segment holding the offset after the last one's end), not past it."""
    import uuid as _uuid

    from broker.storage.remote.metadata import (RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                                RemoteLogSegmentState as St)

    def seg(start: int, end: int) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, _uuid.uuid4()), start, end, 0, 0, 0, 10, {0: start},
                                        state=St.COPY_SEGMENT_FINISHED)
    a, b, c, d = seg(0, 9), seg(5, 19), seg(8, 12), seg(20, 29)

    class Rlmm:
        def list_remote_log_segments(self, tip: object) -> object:
            return iter([c, a, d, b])
    reader = RemoteLogReader(None, Rlmm(), None)  # type: ignore[arg-type]
    assert [m.start_offset for m in reader._chain_from(TIP, a)] == [0, 5, 20]
    assert [m.start_offset for m in reader._chain_from(TIP, d)] == [20]
    gap = seg(31, 40)
    reader.rlmm.list_remote_log_segments = lambda tip: iter([a, gap])  # type: ignore[method-assign]
    assert [m.start_offset for m in reader._chain_from(TIP, a)] == [0]  # 10 is not remote: the local log goes on
