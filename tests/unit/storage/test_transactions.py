"""The log side of transactions: markers, the last stable offset, the transaction index, restarts and truncation."""
from __future__ import annotations

import os

import pytest

from broker.storage import files
from broker.storage.config import LogConfig
from broker.storage.errors import (InvalidProducerEpochError, InvalidRecordError, InvalidTxnStateError,
                                   TransactionCoordinatorFencedError)
from broker.storage.log import Log
from broker.storage.txn_index import AbortedTxn, read_aborted_txns

from .txn_helpers import crash, marker, plain_batch, read_committed, txn_batch, write_marker

A, B, C = 1000, 2000, 3000


def txn_index_of(log: Log, base: int) -> list[AbortedTxn]:
    return read_aborted_txns(files.file_path(log.dir, base, files.TXN_INDEX_SUFFIX))


def txn_index_files(log: Log) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if n.endswith(files.TXN_INDEX_SUFFIX))


def replicated(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def test_abort_goes_to_the_index_of_the_segment_holding_the_marker_with_kafkas_lso(open_log) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(A, 0, n=2), 0)       # 0-1  A's transaction
    log.append_as_leader(txn_batch(B, 0), 0)            # 2    B's transaction
    log.append_as_leader(plain_batch(), 0)              # 3
    log.roll()
    assert write_marker(log, A, committed=False).first_offset == 4   # A aborted while B is open: LSO = 2
    log.append_as_leader(txn_batch(C, 0), 0)            # 5    C's transaction
    assert write_marker(log, B, committed=False).first_offset == 6   # B aborted while C is open: LSO = 5
    assert write_marker(log, C, committed=False).first_offset == 7   # nothing else open: marker + 1
    assert txn_index_files(log) == ["%020d.txnindex" % 4]  # created by the first abort, in the marker's segment
    assert txn_index_of(log, 4) == [AbortedTxn(A, 0, 4, 2), AbortedTxn(B, 2, 6, 5), AbortedTxn(C, 5, 7, 8)]
    with open(files.file_path(log.dir, 4, files.TXN_INDEX_SUFFIX), "rb") as f:
        data = f.read()
    assert data[:34] == bytes.fromhex("0000" "00000000000003e8" "0000000000000000" "0000000000000004"
                                      "0000000000000002")


def test_commit_and_empty_transactions_leave_no_index_entry(open_log) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(A, 0), 0)
    write_marker(log, A, committed=True)
    write_marker(log, B, committed=False)  # a marker without data (an empty transaction): no CompletedTxn
    replicated(log)
    assert txn_index_files(log) == []
    assert log.last_stable_offset == log.log_end_offset == 3
    assert [v for _, _, v in read_committed(log)] == [b"v0"]


def test_lso_is_held_until_the_hw_passes_the_marker(open_log) -> None:
    log = open_log()
    log.append_as_leader(plain_batch(), 0)            # 0
    log.append_as_leader(txn_batch(A, 0, n=3), 0)      # 1-3
    log.append_as_leader(plain_batch(), 0)            # 4
    replicated(log)
    assert log.last_stable_offset == 1                # an open transaction holds the LSO
    assert log.active_producers()[0].current_txn_start_offset == 1  # DescribeProducers
    write_marker(log, A, committed=True)              # 5
    assert log.last_stable_offset == 1                # its marker is not replicated yet (Kafka's unreplicated txns)
    log.update_high_watermark(5)
    assert log.last_stable_offset == 1
    log.update_high_watermark(6)
    assert log.last_stable_offset == 6
    assert log.active_producers()[0].current_txn_start_offset == -1
    assert [o for o, _, _ in read_committed(log)] == [0, 1, 2, 3, 4]


def test_log_start_offset_clamps_the_lso(open_log) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(A, 0, n=2), 0)     # 0-1 open
    log.append_as_leader(plain_batch(n=3), 0)         # 2-4
    replicated(log)
    assert log.last_stable_offset == 0
    assert log.delete_records_before(3) == 3
    assert log.last_stable_offset == 3                # clamped to the log start offset
    write_marker(log, A, committed=False)
    replicated(log)
    assert log.last_stable_offset == 6
    assert [o for o, _, _ in read_committed(log)] == [3, 4]


def test_marker_epoch_rules(open_log) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(A, 0, epoch=3), 0)
    write_marker(log, A, committed=True, epoch=3, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        write_marker(log, A, committed=False, epoch=3, coordinator_epoch=4)  # a zombie coordinator
    with pytest.raises(InvalidProducerEpochError):
        write_marker(log, A, committed=False, epoch=2, coordinator_epoch=5)  # an older producer epoch
    leo = log.log_end_offset
    write_marker(log, A, committed=False, epoch=4, coordinator_epoch=5)  # a newer epoch (fencing abort) is accepted
    entry = log.producer_state.last_entry(A)
    assert (entry.producer_epoch, entry.coordinator_epoch, log.log_end_offset) == (4, 5, leo + 1)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(A, 0, epoch=3), 0)  # the old producer is fenced
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(marker(A, True, epoch=4, coordinator_epoch=5), 0)  # clients never write markers


def test_non_transactional_write_during_a_transaction_is_refused(open_log) -> None:
    from broker.protocol.records.builder import build_batch
    log = open_log()
    log.append_as_leader(txn_batch(A, 0), 0)
    idem = bytearray(build_batch([(b"k", b"v", [], 1)], producer_id=A, producer_epoch=0, base_sequence=1))
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(idem, 0)


def test_read_committed_carries_the_aborted_transactions_of_the_range(open_log) -> None:
    log = open_log(LogConfig(index_interval_bytes=1))  # an index entry per batch: tight upper bounds
    log.append_as_leader(txn_batch(A, 0), 0)           # 0
    log.append_as_leader(plain_batch(), 0)             # 1
    write_marker(log, A, committed=False)              # 2
    log.append_as_leader(txn_batch(B, 0), 0)           # 3
    write_marker(log, B, committed=True)               # 4
    log.append_as_leader(txn_batch(A, 1), 0)           # 5
    write_marker(log, A, committed=False)              # 6
    replicated(log)
    one = len(plain_batch())
    head = log.read(0, one, log.last_stable_offset, True, include_aborted_txns=True)
    assert [(t.producer_id, t.first_offset) for t in head.aborted_transactions] == [(A, 0)]
    tail = log.read(3, 10_000, log.last_stable_offset, True, include_aborted_txns=True)
    assert [(t.producer_id, t.first_offset) for t in tail.aborted_transactions] == [(A, 5)]
    assert log.read(0, 10_000).aborted_transactions is None  # read_uncommitted: unset (null on the wire)
    at_end = log.read(7, 10_000, log.last_stable_offset, True, include_aborted_txns=True)
    assert at_end.records is None and at_end.aborted_transactions == []
    assert [v for _, k, v in read_committed(log) if k == b"k"] == [b"v0"]  # only B's record survives
    assert [o for o, _, _ in read_committed(log, max_bytes=1)] == [1, 3]


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_open_transaction_survives_a_restart(tmp_path, clock, how: str) -> None:
    cfg = LogConfig(segment_bytes=300)
    path = os.path.join(str(tmp_path), "t-0")
    log = Log.open(path, cfg, clock=clock)
    log.append_as_leader(plain_batch(), 0)
    log.append_as_leader(txn_batch(A, 0), 0)           # A open at 1
    for i in range(5):
        log.append_as_leader(plain_batch(), 0)
    log.append_as_leader(txn_batch(B, 0), 0)
    write_marker(log, B, committed=False)
    replicated(log)
    assert len(log.segments) > 2 and log.last_stable_offset == 1
    hw, leo = log.high_watermark, log.log_end_offset
    index_before = {n: open(os.path.join(path, n), "rb").read() for n in txn_index_files(log)}
    if how == "clean":
        log.close()
        log = Log.open(path, cfg, clock=clock, clean_shutdown=True, recovery_point=leo, high_watermark=hw)
    else:
        crash(log)
        log = Log.open(path, cfg, clock=clock, recovery_point=0, high_watermark=hw)
    try:
        assert log.last_stable_offset == 1
        assert {n: open(os.path.join(path, n), "rb").read() for n in txn_index_files(log)} == index_before
        write_marker(log, A, committed=True)
        replicated(log)
        assert log.last_stable_offset == log.log_end_offset
        assert [k for _, k, _ in read_committed(log)].count(b"k") == 1  # A's record; B's was aborted
    finally:
        log.close()


def test_recovery_rebuilds_missing_and_corrupt_txn_indexes(tmp_path, clock) -> None:
    cfg = LogConfig(segment_bytes=250)
    path = os.path.join(str(tmp_path), "t-0")
    log = Log.open(path, cfg, clock=clock)
    seq = {A: 0, B: 0}
    for round_ in range(4):
        for pid in (A, B):
            log.append_as_leader(txn_batch(pid, seq[pid]), 0)
            seq[pid] += 1
        log.append_as_leader(plain_batch(), 0)
        write_marker(log, A, committed=round_ % 2 == 0)
        write_marker(log, B, committed=False)
    replicated(log)
    names = txn_index_files(log)
    before = {n: open(os.path.join(path, n), "rb").read() for n in names}
    assert len(names) >= 2
    expected = read_committed(log)
    hw = log.high_watermark
    crash(log)
    os.unlink(os.path.join(path, names[0]))                      # lost
    with open(os.path.join(path, names[1]), "ab") as f:
        f.write(b"\x00" * 7)                                     # torn
    log = Log.open(path, cfg, clock=clock, recovery_point=0, high_watermark=hw)
    try:
        assert {n: open(os.path.join(path, n), "rb").read() for n in txn_index_files(log)} == before
        assert read_committed(log) == expected
    finally:
        log.close()
    with open(os.path.join(path, names[1]), "r+b") as f:       # a bad entry found by the sanity check on open
        f.write(AbortedTxn(A, 0, 0, 1).encode())
    log = Log.open(path, cfg, clock=clock, clean_shutdown=True, recovery_point=10**9, high_watermark=hw)
    try:
        assert open(os.path.join(path, names[1]), "rb").read() == before[names[1]]
    finally:
        log.close()


def test_truncation_drops_index_entries_and_reopens_the_transaction(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    log.append_as_leader(txn_batch(A, 0), 0)           # 0
    for _ in range(4):
        log.append_as_leader(plain_batch(), 0)         # 1-4
    log.append_as_leader(txn_batch(B, 0), 0)           # 5
    write_marker(log, B, committed=False)              # 6
    write_marker(log, A, committed=False)              # 7
    replicated(log)
    assert log.last_stable_offset == 8
    marker_seg = log.segments[-1].base_offset
    assert [t.last_offset for seg in log.segments for t in txn_index_of(log, seg.base_offset)] == [6, 7]
    log.truncate_to(7)                                 # a follower losing A's marker after a leader change
    assert [t.last_offset for seg in log.segments for t in txn_index_of(log, seg.base_offset)] == [6]
    assert log.last_stable_offset == 0                 # A's transaction is open again
    log.truncate_to(5)
    assert all(not txn_index_of(log, s.base_offset) for s in log.segments) and log.last_stable_offset == 0
    assert marker_seg >= log.segments[-1].base_offset


def test_follower_appends_build_the_same_index(open_log) -> None:
    leader = open_log(name="leader-0")
    follower = open_log(name="follower-0")
    leader.append_as_leader(txn_batch(A, 0, n=2), 3)
    leader.append_as_leader(txn_batch(B, 0), 3)
    write_marker(leader, A, committed=False, leader_epoch=3)
    write_marker(leader, B, committed=True, leader_epoch=3)
    data = leader.read(0, 1 << 20).records.read()
    follower.append_as_follower(data)
    follower.update_high_watermark(follower.log_end_offset)
    replicated(leader)
    assert txn_index_of(follower, 0) == txn_index_of(leader, 0) == [AbortedTxn(A, 0, 3, 2)]
    assert follower.last_stable_offset == leader.last_stable_offset == 5
    assert read_committed(follower) == read_committed(leader)


def test_txn_index_follows_its_segment_through_retention(tmp_path, clock) -> None:
    pending: list = []
    cfg = LogConfig(segment_bytes=250, retention_bytes=0, file_delete_delay_ms=1000)
    log = Log.open(os.path.join(str(tmp_path), "t-0"), cfg, clock=clock, scheduler=lambda d, fn: pending.append(fn))
    try:
        log.append_as_leader(txn_batch(A, 0), 0)
        write_marker(log, A, committed=False)
        first = log.segments[0].base_offset
        log.roll()
        log.append_as_leader(plain_batch(), 0)
        replicated(log)
        assert os.path.exists(files.file_path(log.dir, first, files.TXN_INDEX_SUFFIX))
        assert log.delete_old_segments() >= 1
        name = files.file_path(log.dir, first, files.TXN_INDEX_SUFFIX)
        assert not os.path.exists(name) and os.path.exists(name + files.DELETED_SUFFIX)
        for fn in pending:
            fn()
        assert not os.path.exists(name + files.DELETED_SUFFIX)
    finally:
        log.close()


def test_alter_replica_log_dirs_moves_the_transaction_state(tmp_path, clock) -> None:
    """The future log is built by follower appends (its own .txnindex); after the swap the partition's Log
    serves the same LSO, index and read_committed view from the new dir."""
    from broker.storage.log_manager import LogManager
    from broker.storage.scheduler import Scheduler
    sched = Scheduler(threaded=False)  # no thread: the test runs what is due
    a, b = tmp_path / "a", tmp_path / "b"
    m = LogManager([str(a), str(b)], LogConfig(file_delete_delay_ms=0, segment_bytes=300), broker_id=1,
                   cluster_id="c1", scheduler=sched, clock=clock)
    try:
        cur = m.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
        cur.append_as_leader(txn_batch(A, 0, n=2), 0)
        cur.append_as_leader(txn_batch(B, 0), 0)
        for _ in range(3):
            cur.append_as_leader(plain_batch(), 0)
        write_marker(cur, A, committed=False)
        cur.append_as_leader(plain_batch(), 0)
        replicated(cur)
        fut = m.create_future_log(("t", 0), str(b))
        while fut.log_end_offset < cur.log_end_offset:  # what the mover does, one segment's read at a time
            fut.append_as_follower(cur.read(fut.log_end_offset, 1 << 20, None, True).records.read())
        fut.update_high_watermark(cur.high_watermark)
        names, index = txn_index_files(cur), _all_index(cur)
        view, lso = read_committed(cur), cur.last_stable_offset
        assert lso == 2 and index == [AbortedTxn(A, 0, 6, 2)]
        m.replace_current_with_future(("t", 0))
        assert cur.dir.startswith(str(b)) and txn_index_files(cur) == names
        assert (_all_index(cur), read_committed(cur), cur.last_stable_offset) == (index, view, lso)
        write_marker(cur, B, committed=True)
        replicated(cur)
        assert cur.last_stable_offset == cur.log_end_offset
    finally:
        m.shutdown()
        sched.shutdown()


def _all_index(log: Log) -> list[AbortedTxn]:
    return [t for s in log.segments for t in txn_index_of(log, s.base_offset)]
