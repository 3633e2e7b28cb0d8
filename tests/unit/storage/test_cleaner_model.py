"""Hypothesis: the cleaned log against a simple model of compaction.

Model: after a clean whose offset map covered offsets [0, end), a record below ``end`` survives
iff it is the latest record of its key below ``end``, except tombstones whose delete horizon
passed (a tombstone's horizon is set to now + delete.retention.ms by the first clean that keeps
it, as KIP-534); records from ``end`` on are untouched. Offsets never change and producer state
rebuilt from the cleaned log (snapshots removed) matches the state before cleaning.
"""
from __future__ import annotations

import os
import tempfile
from typing import Optional

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.storage import files
from broker.storage.cleaner import Cleaner
from broker.storage.log import Log
from broker.util.clock import ManualClock

from .cleaner_helpers import T0, append, compact_config, read_records

RETENTION_MS = 1000
KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]

record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=0, max_size=12)))
batch_spec = st.tuples(st.lists(record, min_size=1, max_size=6), st.sampled_from([-1, -1, 1, 2]), st.booleans())
stream = st.lists(batch_spec, min_size=1, max_size=40)


class _Model:
    def __init__(self) -> None:
        self.records: dict[int, tuple[bytes, Optional[bytes]]] = {}
        self.horizon: dict[int, int] = {}  # tombstone offset -> delete horizon once a clean kept it
        self.seq = {1: 0, 2: 0}

    def write(self, log: Log, specs: list, ts: int) -> None:
        for recs, pid, roll in specs:
            kw: dict = {}
            if pid > 0:
                kw = dict(producer_id=pid, producer_epoch=0, base_sequence=self.seq[pid])
                self.seq[pid] += len(recs)
            base = append(log, recs, ts, **kw)
            for i, r in enumerate(recs):
                self.records[base + i] = r
            if roll:
                log.roll()

    def clean(self, end: int, now: int) -> None:
        latest: dict[bytes, int] = {}
        for off in sorted(self.records):
            if off < end:
                latest[self.records[off][0]] = off
        for off in sorted(self.records):
            if off >= end:
                continue
            key, value = self.records[off]
            if latest[key] != off:
                del self.records[off]
            elif value is None:
                h = self.horizon.setdefault(off, now + RETENTION_MS)
                if now >= h:
                    del self.records[off]

    def expected(self) -> list[tuple[int, bytes, Optional[bytes]]]:
        return [(o, k, v) for o, (k, v) in sorted(self.records.items())]


def _producers(log: Log) -> dict:
    return {e.producer_id: (e.producer_epoch, e.last_seq, e.last_data_offset)
            for e in log.producer_state.producers.values()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=stream, second=stream, segment_bytes=st.integers(200, 1500))
def test_cleaned_log_matches_model(first: list, second: list, segment_bytes: int) -> None:
    cfg = compact_config(segment_bytes=segment_bytes, delete_retention_ms=RETENTION_MS)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t-0")
        log = Log.open(path, cfg, clock=ManualClock())
        model = _Model()
        model.write(log, first, T0)
        cleaner = Cleaner()
        r1 = cleaner.clean(log, 0, now_ms=T0 + 10_000)
        model.clean(r1.end_offset, T0 + 10_000)
        assert read_records(log) == model.expected()
        model.write(log, second, T0 + 20_000)
        now2 = T0 + 10_000 + RETENTION_MS + 1
        r2 = cleaner.clean(log, r1.end_offset, now_ms=now2)
        model.clean(r2.end_offset, now2)
        got = read_records(log)
        assert got == model.expected()
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets))
        before = _producers(log)
        leo = log.log_end_offset
        log.close()
        for name in os.listdir(path):
            if name.endswith(files.PRODUCER_SNAPSHOT_SUFFIX):
                os.unlink(os.path.join(path, name))
        reopened = Log.open(path, cfg, clean_shutdown=False, clock=ManualClock())
        try:
            assert reopened.log_end_offset == leo
            assert _producers(reopened) == before
            assert read_records(reopened) == model.expected()
        finally:
            reopened.close()
