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
