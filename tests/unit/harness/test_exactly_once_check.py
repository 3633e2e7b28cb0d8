"""check_exactly_once (tests/harness/faults.py): the read-back check of the cluster fault tests, and what it prints
when it fails (the duplicate's offsets and the client's idempotence log, to tell why the record was written twice)."""
from __future__ import annotations

import pytest

from tests.harness.faults import Ack, LoadStats, check_exactly_once


def _stats(*acks: Ack) -> LoadStats:
    s = LoadStats()
    for a in acks:
        s.acked[a.partition].append(a)
    s.eos_log = ["12:00:00.001 IDEMPSTATE Idempotent producer state change Assigned -> DrainBump",
                 "12:00:00.002 ERRSEQ ProduceRequest ... skipped sequence numbers"]
    return s


def test_a_clean_log_passes_and_counts_the_acknowledged_records() -> None:
    stats = _stats(Ack(0, 0, b"0:000000000", 1.0), Ack(0, 1, b"0:000000001", 1.0))
    assert check_exactly_once(stats, {0: [(0, b"0:000000000"), (1, b"0:000000001")]}) == 2


def test_a_duplicate_names_its_offsets_and_prints_the_idempotence_log() -> None:
    stats = _stats(Ack(2, 5, b"2:000000005", 1.0))
    log = {2: [(4, b"2:000000004"), (5, b"2:000000005"), (6, b"2:000000005")]}
    with pytest.raises(AssertionError) as e:
        check_exactly_once(stats, log)
    text = str(e.value)
    assert ("partition 2: duplicated records (value: offsets) {b'2:000000005': [5, 6]}; "
            "acknowledged at {b'2:000000005': [5]}") in text
    assert "Assigned -> DrainBump" in text and "skipped sequence numbers" in text


def test_a_lost_acknowledged_record_fails() -> None:
    stats = _stats(Ack(0, 1, b"0:000000001", 1.0))
    with pytest.raises(AssertionError, match="acknowledged record b'0:000000001' .* is lost"):
        check_exactly_once(stats, {0: [(0, b"0:000000000")]})


def test_records_out_of_production_order_fail() -> None:
    with pytest.raises(AssertionError, match="out of production order"):
        check_exactly_once(_stats(), {1: [(0, b"1:000000002"), (1, b"1:000000001")]})
