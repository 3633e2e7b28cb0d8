"""The log cleaner and transactions: aborted data removed, markers kept until delete.retention.ms after their
transaction's data is gone, transaction indexes consistent, nothing cleaned at or beyond the LSO."""
from __future__ import annotations

import os

import pytest

from broker.protocol.records.builder import build_batch
from broker.protocol.records.control import ABORT, COMMIT, control_type
from broker.storage import files
from broker.storage.cleaner import Cleaner
from broker.storage.log import Log
from broker.storage.txn_index import AbortedTxn, read_aborted_txns
from broker.util.clock import ManualClock

from .cleaner_helpers import T0, append, compact_config, read_batches
from .txn_helpers import read_committed, write_marker

A, B = 100, 200
RETENTION = 1000


def txn(log: Log, pid: int, seq: int, records: list) -> int:
    return append(log, records, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)


def end(log: Log, pid: int, committed: bool) -> int:
    off = write_marker(log, pid, committed).first_offset
    log.update_high_watermark(log.log_end_offset)
    return off


def markers(log: Log) -> list[tuple[int, int, int, bool]]:
    """(offset, producer id, control type, has a delete horizon) of every marker in the log."""
    return [(b.base_offset, b.producer_id, control_type(recs[0].key), b.has_delete_horizon)
            for b, recs in read_batches(log) if b.is_control and recs]


def data_records(log: Log, pid: int) -> list[tuple[int, bytes]]:
    return [(r.offset, r.key) for b, recs in read_batches(log) if not b.is_control and b.producer_id == pid
            for r in recs]


def all_txn_entries(log: Log) -> list[AbortedTxn]:
    return [t for s in log.segments
            for t in read_aborted_txns(files.file_path(log.dir, s.base_offset, files.TXN_INDEX_SUFFIX))]


def build(log: Log) -> dict:
    """A aborts (a, b), B commits (c), plain writes, then A commits (d): every marker below the active segment."""
    offs = {}
    offs["a_data"] = txn(log, A, 0, [(b"a", b"A1"), (b"b", b"A2")])
    offs["b_data"] = txn(log, B, 0, [(b"c", b"B1")])
    append(log, [(b"a", b"plain-a"), (b"x", b"plain-x")])
    offs["a_abort"] = end(log, A, committed=False)
    offs["b_commit"] = end(log, B, committed=True)
    log.roll()
    offs["a_data2"] = txn(log, A, 2, [(b"d", b"A3")])
    offs["a_commit"] = end(log, A, committed=True)
    log.roll()
    append(log, [(b"tail", b"t")])
    return offs


def test_aborted_data_goes_and_markers_follow_after_the_delete_horizon(open_log) -> None:
    log = open_log(compact_config(delete_retention_ms=RETENTION))
    offs = build(log)
    view = read_committed(log)
    assert sorted(k for _, k, _ in view) == [b"a", b"c", b"d", b"tail", b"x"]
    assert all_txn_entries(log) == [AbortedTxn(A, offs["a_data"], offs["a_abort"], offs["b_data"])]

    first = Cleaner().clean(log, 0, now_ms=T0)
    assert data_records(log, A) == [(offs["a_data2"], b"d")]  # the aborted records are gone
    assert read_committed(log) == view
    # the abort marker stays (its transaction's data was removed in this very clean), with its index entry
    assert markers(log) == [(offs["a_abort"], A, ABORT, False), (offs["b_commit"], B, COMMIT, False),
                            (offs["a_commit"], A, COMMIT, False)]
    assert all_txn_entries(log) == [AbortedTxn(A, offs["a_data"], offs["a_abort"], offs["b_data"])]
    assert first.min_delete_horizon_ms is None

    second = Cleaner().clean(log, 0, now_ms=T0 + 10)
    # no batch of the aborted transaction left: the marker is kept with a delete horizon, its entry dropped
    assert markers(log)[0] == (offs["a_abort"], A, ABORT, True)
    assert all_txn_entries(log) == []
    assert second.min_delete_horizon_ms == T0 + 10 + RETENTION
    assert read_committed(log) == view

    Cleaner().clean(log, 0, now_ms=T0 + 10 + RETENTION - 1)
    assert markers(log)[0][:2] == (offs["a_abort"], A)  # not yet
    Cleaner().clean(log, 0, now_ms=T0 + 10 + RETENTION)
    # gone; B's commit stays while its record (the latest of key c) is there, A's commit too
    assert [m[:3] for m in markers(log)] == [(offs["b_commit"], B, COMMIT), (offs["a_commit"], A, COMMIT)]
    assert read_committed(log) == view


def test_commit_marker_goes_once_its_data_is_compacted_away(open_log) -> None:
    log = open_log(compact_config(delete_retention_ms=RETENTION))
    txn(log, B, 0, [(b"c", b"B1")])
    c1 = end(log, B, committed=True)
    txn(log, B, 1, [(b"c2", b"B2")])  # B's last data batch lies elsewhere
    end(log, B, committed=True)
    append(log, [(b"c", b"plain-c")])  # supersedes B's first record
    log.roll()
    append(log, [(b"tail", b"t")])
    Cleaner().clean(log, 0, now_ms=T0)   # B's first batch removed (its record superseded); marker seen with it
    assert (c1, B, COMMIT, False) in markers(log)
    Cleaner().clean(log, 0, now_ms=T0)   # no batch of that transaction left: horizon set
    assert (c1, B, COMMIT, True) in markers(log)
    Cleaner().clean(log, 0, now_ms=T0 + RETENTION)
    assert c1 not in [m[0] for m in markers(log)]
    assert sorted(k for _, k, _ in read_committed(log)) == [b"c", b"c2", b"tail"]


def test_producers_last_marker_is_kept_empty_for_its_epoch(open_log) -> None:
    log = open_log(compact_config(delete_retention_ms=RETENTION))
    txn(log, A, 0, [(b"a", b"1")])
    end(log, A, committed=False)
    # A's abort under a new epoch (a fencing abort): A's state has no data batch left, its marker carries the epoch
    write_marker(log, A, committed=False, epoch=1)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    append(log, [(b"tail", b"t")])
    for now in (T0, T0 + 1, T0 + 2 * RETENTION, T0 + 4 * RETENTION):
        Cleaner().clean(log, 0, now_ms=now)
    kept = [(b.producer_id, b.producer_epoch, b.is_control) for b, _ in read_batches(log) if b.producer_id == A]
    assert kept == [(A, 1, True)]  # everything else of A went; its last marker stays (empty if need be)
    assert log.producer_state.last_entry(A).producer_epoch == 1


def test_cleaning_stops_at_the_first_unstable_offset(open_log) -> None:
    log = open_log(compact_config())
    for i in range(20):
        append(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    log.roll()
    start = txn(log, A, 0, [(b"k0", b"t")])
    for i in range(20):
        append(log, [(b"k%d" % (i % 3), b"w%d" % i)])
    log.roll()
    commit = write_marker(log, A, committed=True).first_offset
    log.roll()
    log.append_as_leader(bytearray(build_batch([(b"tail", b"t", [], T0)])), 0)
    log.update_high_watermark(commit)  # the commit marker is not replicated: the transaction is still unstable
    assert log.last_stable_offset == start
    assert Cleaner().clean(log, 0, now_ms=T0).end_offset <= start
    assert [o for b, recs in read_batches(log) for o in [r.offset for r in recs] if o >= start][:1] == [start]
    log.update_high_watermark(log.log_end_offset)
    assert Cleaner().clean(log, 0, now_ms=T0).end_offset > start


CRASH_STEPS = ["after_log_swap_renamed", "after_index_swap_renamed", "after_old_deleted_0", "after_swap_renamed"]


class _Crash(Exception):
    pass


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_crash_during_the_swap_keeps_transactions_consistent(tmp_path, clock, step: str) -> None:
    path = os.path.join(str(tmp_path), "t-0")
    cfg = compact_config(segment_bytes=1 << 20, delete_retention_ms=RETENTION)
    log = Log.open(path, cfg, clock=clock)
    build(log)
    view = read_committed(log)

    def hook(name: str) -> None:
        if name == step:
            raise _Crash(name)

    with pytest.raises(_Crash):
        Cleaner(swap_hook=hook).clean(log, 0, now_ms=T0)
    reopened = Log.open(path, cfg, clock=clock, clean_shutdown=False, high_watermark=log.high_watermark)
    try:
        names = os.listdir(path)
        assert not any(n.endswith((files.CLEANED_SUFFIX, files.SWAP_SUFFIX)) for n in names)
        assert read_committed(reopened) == view
        assert data_records(reopened, A)[-1][1] == b"d"
    finally:
        reopened.close()


# ------------------------------------------------------------------------------------------------ property
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KEYS = [b"a", b"b", b"c", b"d"]
_step = st.one_of(
    st.tuples(st.just("txn"), st.sampled_from([A, B]), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.tuples(st.just("plain"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.tuples(st.just("end"), st.sampled_from([A, B]), st.booleans()),
    st.tuples(st.just("roll")),
)


def _compacted(view: list, end: int) -> list:
    latest = {}
    for off, key, _ in view:
        if off < end:
            latest[key] = off
    return [r for r in view if r[0] >= end or latest[r[1]] == r[0]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(_step, min_size=1, max_size=40))
def test_cleaning_a_transactional_log_keeps_the_read_committed_view_compacted(tmp_path_factory, steps) -> None:
    """After each clean, a read_committed consumer sees the latest committed-or-plain record of each key below the
    cleaned end and everything above it; no record of an aborted transaction is left below the end."""
    path = os.path.join(str(tmp_path_factory.mktemp("clean")), "t-0")
    log = Log.open(path, compact_config(delete_retention_ms=RETENTION), clock=ManualClock(T0))
    try:
        seq = {A: 0, B: 0}
        aborted_offsets: set[int] = set()
        open_offsets: dict[int, list[int]] = {A: [], B: []}
        n = 0
        for s in steps:
            if s[0] == "txn":
                base = txn(log, s[1], seq[s[1]], [(k, b"%d" % (n + i)) for i, k in enumerate(s[2])])
                seq[s[1]] += len(s[2])
                open_offsets[s[1]].extend(range(base, base + len(s[2])))
                n += len(s[2])
            elif s[0] == "plain":
                append(log, [(k, b"%d" % (n + i)) for i, k in enumerate(s[1])])
                n += len(s[1])
            elif s[0] == "end":
                end(log, s[1], s[2])
                if not s[2]:
                    aborted_offsets.update(open_offsets[s[1]])
                open_offsets[s[1]] = []
            else:
                log.roll()
        log.roll()
        append(log, [(b"tail", b"t")])
        view = read_committed(log)
        for now in (T0, T0 + 1, T0 + 3 * RETENTION):
            result = Cleaner().clean(log, 0, now_ms=now)
            view = _compacted(view, result.end_offset)
            assert read_committed(log) == view
            left = {r.offset for b, recs in read_batches(log) for r in recs if not b.is_control}
            assert not {o for o in aborted_offsets if o < result.end_offset} & left
    finally:
        log.close()
