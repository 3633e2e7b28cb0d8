"""Property tests: any sequence of appends reads back by offset; any torn tail recovers to a prefix."""
import ast
import os
import tempfile

from hypothesis import given, settings, strategies as st

from broker.accel import record_batch
from broker.storage.config import LogConfig
from broker.storage.log import Log

from broker.util.clock import ManualClock

from .conftest import batch

STORAGE_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "broker", "storage")


@settings(max_examples=25, deadline=None)
@given(counts=st.lists(st.integers(1, 5), min_size=1, max_size=30), interval=st.integers(1, 600),
       seg_batches=st.integers(2, 12), chop=st.integers(0, 400))
def test_appends_read_back_and_survive_torn_tail(counts, interval, seg_batches, chop) -> None:
    cfg = LogConfig(index_interval_bytes=interval, segment_bytes=len(batch(3)) * seg_batches)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t-0")
        log = Log.open(path, cfg, clock=ManualClock())
        ends = []
        for c in counts:
            ends.append(log.append_as_leader(batch(c), 0).last_offset)
        leo = log.log_end_offset
        assert leo == sum(counts)
        for off in range(leo):
            (first, *_rest) = record_batch.validate_batches(log.read(off, 1).records.read())
            assert first.base_offset <= off <= first.last_offset
        active = log.active_segment.path
        for seg in log.segments:  # crash
            seg.close_handlers()
        size = os.path.getsize(active)
        with open(active, "r+b") as f:
            f.truncate(max(0, size - chop))
        log2 = Log.open(path, cfg, clock=ManualClock())
        try:
            new_leo = log2.log_end_offset
            assert new_leo == 0 or new_leo - 1 in ends  # a batch boundary
            if chop == 0:
                assert new_leo == leo
            assert new_leo >= log2.active_segment.base_offset
            for off in range(log2.log_start_offset, new_leo):
                (first, *_rest) = record_batch.validate_batches(log2.read(off, 1).records.read())
                assert first.base_offset <= off <= first.last_offset
            assert log2.append_as_leader(batch(1), 0).first_offset == new_leo
        finally:
            log2.close()


def test_storage_imports_respect_layering() -> None:
    allowed_protocol = "broker.protocol.records"
    for name in os.listdir(STORAGE_DIR):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(STORAGE_DIR, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            for m in mods:
                assert not m.startswith(("broker.api", "broker.network", "asyncio")), (name, m)
                if m.startswith("broker.protocol"):
                    assert m.startswith(allowed_protocol), (name, m)
