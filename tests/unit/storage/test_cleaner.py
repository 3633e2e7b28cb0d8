"""Log cleaner: compaction rules, batch rewriting, swap atomicity, selection and the cleaner thread."""
from __future__ import annotations

import os
import threading

import pytest

from broker.protocol.records.batch_info import DELETE_HORIZON_MASK
from broker.storage import files
from broker.storage.checkpoints import OffsetCheckpointFile
from broker.storage.cleaner import Cleaner, CleanerConfig, LogCleaner, log_to_clean
from broker.storage.cleaner_pass import group_segments_by_size
from broker.storage.errors import InvalidRecordError
from broker.storage.log import Log
from broker.storage.log_manager import LogManager

from .cleaner_helpers import T0, append, compact_config, latest_by_key, read_batches, read_records


def _fill(log: Log, n: int, keys: int = 10, start: int = 0) -> None:
    for i in range(start, start + n):
        append(log, [(b"k%d" % (i % keys), b"v%d" % i)], T0 + i)


def test_keeps_latest_value_per_key_and_offsets(open_log) -> None:
    log = open_log(compact_config())
    _fill(log, 200)
    before = read_records(log)
    active_base = log.active_segment.base_offset
    result = Cleaner().clean(log, 0, now_ms=T0 + 10_000)
    after = read_records(log)
    assert result.end_offset == active_base
    assert latest_by_key(after) == latest_by_key(before)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    assert set(after) <= set(before)  # offsets never change
    # the active segment is untouched: everything in it is still there
    assert [r for r in before if r[0] >= active_base] == [r for r in after if r[0] >= active_base]
    cleaned = [r for r in after if r[0] < active_base]
    assert len({k for _, k, _ in cleaned}) == len(cleaned)
    assert log.log_end_offset == 200


def test_second_clean_groups_small_segments(open_log) -> None:
    log = open_log(compact_config())
    _fill(log, 300)
    n_before = len(log.segments)
    Cleaner().clean(log, 0, now_ms=T0 + 10_000)
    Cleaner().clean(log, log.active_segment.base_offset, now_ms=T0 + 10_000)
    assert len(log.segments) <= 3 < n_before
    assert latest_by_key(read_records(log)) == {b"k%d" % i: b"v%d" % (290 + i) for i in range(10)}


def test_group_segments_by_size_respects_limits(open_log) -> None:
    log = open_log(compact_config())
    _fill(log, 300)
    plan, _ = Cleaner().plan(log, 0, None, T0)
    segs = list(plan.segments)
    limit = 2 * segs[0].size + 1
    groups = group_segments_by_size(segs, limit, 10 << 20)
    assert [s for g in groups for s in g] == segs
    assert all(sum(s.size for s in g) <= limit for g in groups)
    assert max(len(g) for g in groups) == 2
    assert [len(g) for g in group_segments_by_size(segs, 10 << 20, segs[0].index_bytes)] == [1] * len(segs)


def test_tombstones_kept_until_delete_horizon(open_log) -> None:
    log = open_log(compact_config(delete_retention_ms=1000))
    _fill(log, 60)
    append(log, [(b"k1", None)], T0 + 100)
    _fill(log, 60, start=200, keys=5)  # keys k0..k4 (k1 overwritten again after its tombstone)
    append(log, [(b"k7", None)], T0 + 300)
    _fill(log, 40, start=400, keys=3)
    log.roll()
    append(log, [(b"k0", b"x")], T0 + 500)
    Cleaner().clean(log, 0, now_ms=T0 + 10_000)
    recs = read_records(log)
    assert (b"k7", None) in [(k, v) for _, k, v in recs]
    tomb_batches = [info for info, rs in read_batches(log) if any(r.value is None for r in rs)]
    assert tomb_batches and all(info.attributes & DELETE_HORIZON_MASK for info in tomb_batches)
    assert all(info.base_timestamp == T0 + 10_000 + 1000 for info in tomb_batches)
    # before the horizon a new clean keeps it; after it, the tombstone goes
    Cleaner().clean(log, log.active_segment.base_offset, now_ms=T0 + 10_999)
    assert b"k7" in latest_by_key(read_records(log))
    Cleaner().clean(log, log.active_segment.base_offset, now_ms=T0 + 11_000)
    latest = latest_by_key(read_records(log))
    assert b"k7" not in latest
    assert latest[b"k1"] == b"v439" and latest[b"k8"] == b"v58"


def test_batch_rewrite_keeps_producer_fields_codec_and_last_offset(open_log) -> None:
    log = open_log(compact_config())
    recs = [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")]
    append(log, recs, producer_id=77, producer_epoch=3, base_sequence=0, compression=2)  # snappy
    append(log, [(b"c", b"5")], producer_id=77, producer_epoch=3, base_sequence=4, compression=2)
    log.roll()
    append(log, [(b"z", b"z")])
    Cleaner().clean(log, 0, now_ms=T0 + 10_000)
    batches = read_batches(log)
    info, rs = batches[0]
    assert (info.base_offset, info.last_offset_delta, info.record_count) == (0, 3, 2)
    assert (info.producer_id, info.producer_epoch, info.base_sequence, info.compression) == (77, 3, 0, 2)
    assert [(r.offset, r.key, r.value) for r in rs] == [(1, b"b", b"2"), (2, b"a", b"3")]
    assert rs[0].sequence == 1 and info.partition_leader_epoch == 0
    assert batches[1][0].base_sequence == 4


def test_empty_last_batch_of_producer_is_kept_and_state_survives_reopen(tmp_path, clock) -> None:
    path = os.path.join(str(tmp_path), "t-0")
    log = Log.open(path, compact_config(), clock=clock)
    append(log, [(b"a", b"1"), (b"b", b"1")], producer_id=5, producer_epoch=1, base_sequence=0)
    append(log, [(b"a", b"2"), (b"b", b"2")], producer_id=5, producer_epoch=1, base_sequence=2)
    append(log, [(b"x", b"1")], producer_id=6, producer_epoch=0, base_sequence=0)
    log.roll()
    append(log, [(b"a", b"3"), (b"b", b"3")])  # plain producer overwrites producer 5's keys
    append(log, [(b"x", b"2")])
    log.roll()
    append(log, [(b"tail", b"t")])
    expected = {e.producer_id: (e.producer_epoch, e.last_seq, e.last_data_offset)
                for e in log.producer_state.producers.values()}
    Cleaner().clean(log, 0, now_ms=T0 + 10_000)
    batches = read_batches(log)
    empties = [info for info, rs in batches if info.record_count == 0]
    assert [(i.producer_id, i.base_offset, i.last_offset, i.base_sequence) for i in empties] == [(5, 2, 3, 2),
                                                                                                (6, 4, 4, 0)]
    assert all(info.producer_id != 5 or info.record_count == 0 for info, _ in batches)  # the first batch went
    log.close()
    for name in os.listdir(path):
        if name.endswith(files.PRODUCER_SNAPSHOT_SUFFIX):
            os.unlink(os.path.join(path, name))
    log2 = Log.open(path, compact_config(), clock=clock, clean_shutdown=False)
    try:
        got = {e.producer_id: (e.producer_epoch, e.last_seq, e.last_data_offset)
               for e in log2.producer_state.producers.values()}
        assert got == expected
        assert latest_by_key(read_records(log2))[b"a"] == b"3"
    finally:
        log2.close()


def test_empty_batch_dropped_once_producer_writes_again(open_log) -> None:
    log = open_log(compact_config())
    append(log, [(b"a", b"1")], producer_id=5, producer_epoch=1, base_sequence=0)
    append(log, [(b"a", b"2")])
    log.roll()
    append(log, [(b"t", b"1")])
    Cleaner().clean(log, 0, now_ms=T0)
    assert [i.record_count for i, _ in read_batches(log)][0] == 0
    append(log, [(b"b", b"1")], producer_id=5, producer_epoch=1, base_sequence=1)
    log.roll()
    append(log, [(b"t", b"2")])
    Cleaner().clean(log, 0, now_ms=T0)
    assert all(i.record_count > 0 for i, _ in read_batches(log))


def test_committed_transaction_is_compacted_and_its_marker_kept(open_log) -> None:
    """Kafka compacts committed transactional records like any other: the superseded one goes (its batch stays,
    empty, as the producer's last data batch), the COMMIT marker stays while its transaction's batch is seen."""
    log = open_log(compact_config())
    append(log, [(b"a", b"t1")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], T0)  # COMMIT marker, coordinator epoch 0
    log.append_as_leader(bytearray(__import__("broker.protocol.records.builder", fromlist=["x"]).build_batch(
        [marker], producer_id=9, producer_epoch=0, is_transactional=True, is_control=True)), 0, is_from_client=False)
    append(log, [(b"a", b"plain")])
    log.roll()
    append(log, [(b"t", b"1")])
    Cleaner().clean(log, 0, now_ms=T0)
    kinds = [(i.is_transactional, i.is_control, i.record_count) for i, _ in read_batches(log)]
    assert kinds[:3] == [(True, False, 0), (True, True, 1), (False, False, 1)]


def test_compacted_topic_rejects_null_keys(open_log) -> None:
    log = open_log(compact_config())
    with pytest.raises(InvalidRecordError):
        append(log, [(None, b"v")])  # type: ignore[list-item]
    append(open_log(compact_config(cleanup_policy=("delete",)), name="d-0"), [(None, b"v")])  # type: ignore[list-item]


def test_min_compaction_lag_and_ratio_and_max_lag(open_log) -> None:
    log = open_log(compact_config(min_compaction_lag_ms=1000, min_cleanable_dirty_ratio=0.5))
    _fill(log, 100)
    young = log_to_clean(("topic", 0), log, None, T0 + 500)
    assert young.uncleanable_offset == 0 and young.cleanable_bytes == 0
    old = log_to_clean(("topic", 0), log, None, T0 + 100_000)
    assert old.uncleanable_offset == log.active_segment.base_offset
    assert old.cleanable_ratio == 1.0
    mid = log_to_clean(("topic", 0), log, log.segments[-2].base_offset, T0 + 100_000)
    assert 0 < mid.cleanable_ratio < 0.5 and not mid.need_compaction_now
    forced = log_to_clean(("topic", 0), log, log.segments[-2].base_offset, T0 + 100_000)
    assert not forced.need_compaction_now
    log.update_config(compact_config(max_compaction_lag_ms=5000))
    assert log_to_clean(("topic", 0), log, log.segments[-2].base_offset, T0 + 100_000).need_compaction_now


def test_lso_bounds_cleaning(open_log) -> None:
    log = open_log(compact_config())
    _fill(log, 50)
    first = log.log_end_offset
    append(log, [(b"k1", b"open-txn")], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True)
    _fill(log, 80, start=50)
    result = Cleaner().clean(log, 0, now_ms=T0)
    assert result.end_offset <= first
    assert any(o >= first for o, _, _ in read_records(log))


def test_file_slice_of_replaced_segment_stays_readable(tmp_path, clock) -> None:
    pending: list = []
    log = Log.open(os.path.join(str(tmp_path), "t-0"), compact_config(file_delete_delay_ms=1000), clock=clock,
                   scheduler=lambda delay, fn: pending.append(fn))
    _fill(log, 100)
    fetched = log.read(0, 10_000).records
    assert fetched is not None
    data_before = fetched.read()
    Cleaner().clean(log, 0, now_ms=T0)
    assert fetched.read() == data_before  # old file still open until the delete delay passes
    assert any(n.endswith(files.DELETED_SUFFIX) for n in os.listdir(log.dir))
    for fn in pending:
        fn()
    assert not any(n.endswith(files.DELETED_SUFFIX) for n in os.listdir(log.dir))
    log.close()


def test_swap_skipped_when_log_changed_meanwhile(open_log) -> None:
    log = open_log(compact_config(cleanup_policy=("compact", "delete"), retention_ms=1))
    _fill(log, 100)
    segs = list(log.segments)
    steps: list[str] = []
    log.delete_old_segments(T0 + 10_000_000)  # retention removes every inactive segment
    assert log.segments[0] is not segs[0]
    assert not log.replace_segments(segs[:2], [s.size for s in segs[:2]], segs[0].base_offset, segs[2].base_offset,
                                    steps.append)
    assert steps == []


def test_offset_map_capacity_limits_the_dirty_section(open_log) -> None:
    log = open_log(compact_config())
    _fill(log, 200)
    second_base = log.segments[1].base_offset
    tiny = CleanerConfig(dedupe_buffer_size=24 * 5, io_buffer_load_factor=1.0)
    result = Cleaner(tiny).clean(log, 0, now_ms=T0)
    assert result.end_offset == second_base  # one whole segment mapped, then the map was full
    recs = read_records(log)
    assert latest_by_key(recs) == {b"k%d" % i: b"v%d" % (190 + i) for i in range(10)}
    assert len([r for r in recs if r[0] < second_base]) == len({r[1] for r in recs if r[0] < second_base})


def test_timestamp_lookup_works_on_cleaned_batches(open_log) -> None:
    log = open_log(compact_config())
    append(log, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1")], T0 + 5)
    log.roll()
    append(log, [(b"t", b"1")], T0 + 9)
    Cleaner().clean(log, 0, now_ms=T0)
    assert read_batches(log)[0][0].record_count == 3
    assert log.fetch_offset_by_timestamp(T0)[:2] == (1, T0 + 5)


CRASH_STEPS = ["before_swap", "after_swap_end_written", "after_log_swap_renamed", "after_index_swap_renamed",
               "after_old_deleted_0", "after_old_deleted_1", "after_old_deleted_2", "after_swap_renamed"]


class _Crash(Exception):
    pass


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_crash_at_each_swap_step_leaves_old_or_new_segments(tmp_path, clock, step: str) -> None:
    path = os.path.join(str(tmp_path), "t-0")
    cfg = compact_config(segment_bytes=1 << 20)
    log = Log.open(path, cfg, clock=clock)
    for s in range(4):  # 4 segments of 50 records over 10 keys; the last one stays active
        _fill(log, 50, start=s * 50)
        log.roll()
    append(log, [(b"tail", b"t")])
    before = read_records(log)
    log.update_config(compact_config(segment_bytes=10 << 20))
    leo = log.log_end_offset

    def hook(name: str) -> None:
        if name == step:
            raise _Crash(name)

    with pytest.raises(_Crash):
        Cleaner(swap_hook=hook).clean(log, 0, now_ms=T0)
    # crash: the process dies; nothing else runs. Reopen from disk as after an unclean shutdown.
    reopened = Log.open(path, cfg, clock=clock, clean_shutdown=False)
    try:
        after = read_records(reopened)
        assert reopened.log_end_offset == leo
        names = os.listdir(path)
        assert not any(n.endswith((files.CLEANED_SUFFIX, files.SWAP_SUFFIX, ".swapend")) for n in names)
        committed = CRASH_STEPS.index(step) >= CRASH_STEPS.index("after_log_swap_renamed")
        if committed:
            assert len(after) == 11 and latest_by_key(after) == latest_by_key(before)
            assert [s.base_offset for s in reopened.segments] == [0, 200]
        else:
            assert after == before
            assert len(reopened.segments) == 5
        offsets = [o for o, _, _ in after]
        assert offsets == sorted(set(offsets))
    finally:
        reopened.close()


@pytest.mark.parametrize("use_process", [False, True])
def test_log_cleaner_thread_via_log_manager(tmp_path, clock, use_process: bool) -> None:
    lm = LogManager([str(tmp_path)], compact_config(), broker_id=0, clock=clock,
                    cleaner_config=CleanerConfig(backoff_ms=10, use_worker_process=use_process))
    try:
        log = lm.get_or_create_log("c", 0)
        _fill(log, 150)
        done = threading.Event()
        real = lm.cleaner._update_checkpoint

        def spy(tp, offset) -> None:
            real(tp, offset)
            done.set()

        lm.cleaner._update_checkpoint = spy  # type: ignore[method-assign]
        lm.startup()
        assert done.wait(30)
        cp = OffsetCheckpointFile(os.path.join(str(tmp_path), files.CLEANER_OFFSET_CHECKPOINT)).read()
        assert cp[("c", 0)] == log.segments[-1].base_offset
        assert len(read_records(log)) <= 10 + log.log_end_offset - log.active_segment.base_offset
    finally:
        lm.shutdown()


def test_log_cleaner_selection_and_checkpoint_roundtrip(tmp_path, clock) -> None:
    logs: dict = {}
    d = str(tmp_path)
    logs[("a", 0)] = Log.open(os.path.join(d, "a-0"), compact_config(), clock=clock)
    logs[("b", 0)] = Log.open(os.path.join(d, "b-0"), compact_config(cleanup_policy=("delete",)), clock=clock)
    _fill(logs[("a", 0)], 100)
    _fill(logs[("b", 0)], 100)
    cleaner = LogCleaner(CleanerConfig(use_worker_process=False), [d], lambda: dict(logs), lambda tp: d, clock=clock)
    assert [x.tp for x in cleaner.cleanable_logs(T0)] == [("a", 0)]
    assert cleaner.clean_filthiest_log()
    assert not cleaner.clean_filthiest_log()  # nothing dirty left
    reloaded = LogCleaner(CleanerConfig(), [d], lambda: dict(logs), lambda tp: d, clock=clock)
    assert reloaded.checkpoint_offset(("a", 0)) == logs[("a", 0)].active_segment.base_offset
    reloaded.abort_cleaning(("a", 0))
    assert reloaded.checkpoint_offset(("a", 0)) is None
    for log in logs.values():
        log.close()


def test_cleaner_config_from_broker_keys() -> None:
    values = {"log.cleaner.enable": False, "log.cleaner.threads": 2, "log.cleaner.dedupe.buffer.size": 2400,
              "log.cleaner.io.buffer.load.factor": 0.5, "log.cleaner.backoff.ms": 7}
    cfg = CleanerConfig.from_broker_config(values.__getitem__)
    assert (cfg.enable, cfg.threads, cfg.backoff_ms, cfg.max_map_entries) == (False, 2, 7, 50)


@pytest.mark.parametrize("use_process", [False, True])
def test_aborted_clean_leaves_log_unchanged(open_log, use_process: bool) -> None:
    from broker.storage.cleaner_pass import LogCleaningAbortedError

    log = open_log(compact_config())
    _fill(log, 200)
    before = read_records(log)

    def abort() -> None:
        raise LogCleaningAbortedError("partition deleted")

    cleaner = Cleaner(CleanerConfig(use_worker_process=use_process))
    try:
        with pytest.raises(LogCleaningAbortedError):
            cleaner.clean(log, 0, now_ms=T0, check_abort=abort)
    finally:
        cleaner.close()
    assert read_records(log) == before
    assert not any(n.endswith((files.CLEANED_SUFFIX, files.SWAP_SUFFIX)) for n in os.listdir(log.dir))
