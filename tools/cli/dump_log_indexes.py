"""The files of a segment other than its log, as Kafka 3.9's DumpLogSegments prints them: the offset index and
the time index (each entry checked against the segment's log, problems summed up on stderr at the end), the
producer snapshot (Kafka's CorruptSnapshotException messages) and the transaction index.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from broker.accel import crc32c
from broker.storage.producer_state import decode_snapshot
from broker.storage.txn_index import decode_entries

from . import dump_log_decoders as decoders
from .dump_log_batches import base_offset, batches, read_file
from .options import CommandError

if TYPE_CHECKING:
    from .dump_log import Settings


class Problems:
    """What Kafka prints on stderr after every file: index mismatches, time index errors, offset gaps."""

    def __init__(self) -> None:
        self.index_mismatches: Dict[str, List[Tuple[int, int]]] = {}
        self.time_mismatches: Dict[str, List[Tuple[int, int]]] = {}
        self.time_out_of_order: Dict[str, List[Tuple[int, int]]] = {}
        self.time_not_found: Dict[str, List[Tuple[int, int]]] = {}
        self.non_consecutive: Dict[str, List[Tuple[int, int]]] = {}

    def print(self) -> None:
        err = sys.stderr
        for name, pairs in self.index_mismatches.items():
            print(f"Mismatches in :{name}", file=err)
            for index_offset, log_offset in reversed(pairs):  # Kafka prepends to a List
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for name, pairs in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{name}", file=err)
            for a, b in pairs:
                print(f"  Index timestamp: {a}, log timestamp: {b}", file=err)
        for name, pairs in self.time_out_of_order.items():
            print(f"Found out of order timestamp in :{name}", file=err)
            for a, b in pairs:
                print(f"  Index timestamp: {a}, Previously indexed timestamp: {b}", file=err)
        for pairs in self.time_not_found.values():
            print("The following indexed offsets are not found in the log.", file=err)
            for a, b in pairs:
                print(f"Indexed offset: {a}, found log offset: {b}", file=err)
        for name, pairs in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {name}", file=err)
            for first, second in reversed(pairs):
                print(f"  {first} is followed by {second}", file=err)


def _index_entries(path: Path, entry_size: int) -> Tuple[memoryview, int]:
    data = read_file(path)
    return data, len(data) // entry_size


def _offset_entry(data: memoryview, base: int, i: int) -> Tuple[int, int]:
    rel, pos = struct.unpack_from(">ii", data, i * 8)
    return base + rel, pos


def _segment_log(path: Path) -> Path:
    return path.absolute().parent / (path.name.split(".")[0] + ".log")


def _corrupt_index(message: str) -> CommandError:
    return decoders.java_crash(f"org.apache.kafka.storage.internals.log.CorruptIndexException: {message}")


def _check_offset_index(path: Path, data: memoryview, base: int, entries: int) -> None:
    if entries and _offset_entry(data, base, entries - 1)[0] < base:
        last = _offset_entry(data, base, entries - 1)[0]
        raise _corrupt_index(f"Corrupt index found, index file ({path.absolute()}) has non-zero size but the last "
                           f"offset is {last} which is less than the base offset {base}.")
    if len(data) % 8:
        raise _corrupt_index(f"Index file {path.absolute()} is corrupt, found {len(data)} bytes which is neither "
                           "positive nor a multiple of 8.")


def dump_index(path: Path, settings: Settings, problems: Problems) -> None:
    base = base_offset(path)
    log = read_file(_segment_log(path))
    data, entries = _index_entries(path, 8)
    if entries == 0:
        print(f"{path} is empty.")
        return
    if settings.sanity_only:
        _check_offset_index(path, data, base, entries)
        print(f"{path} passed sanity check.")
        return
    for i in range(entries):
        offset, position = _offset_entry(data, base, i)
        if offset == base and i > 0:
            return
        first = next(batches(log, position, min(len(log), position + settings.max_message_size),
                             str(_segment_log(path))), None)
        if first is None:
            raise decoders.java_crash("java.util.NoSuchElementException")
        if first.last_offset != offset:
            problems.index_mismatches.setdefault(str(path.absolute()), []).append((offset, first.last_offset))
        if not settings.verify_only:
            print(f"offset: {offset} position: {position}")


def _lookup(index: memoryview, base: int, entries: int, target: int) -> int:
    """The position of the largest offset index entry at or below ``target`` (0 when none)."""
    position = 0
    for i in range(entries):
        offset, pos = _offset_entry(index, base, i)
        if offset > target:
            break
        position = pos
    return position


def dump_time_index(path: Path, settings: Settings, problems: Problems) -> None:
    base = base_offset(path)
    log = read_file(_segment_log(path))
    index_path = path.absolute().parent / (path.name.split(".")[0] + ".index")
    index, index_entries = _index_entries(index_path, 8)
    data, entries = _index_entries(path, 12)
    if settings.sanity_only:
        if entries:
            first_ts = struct.unpack_from(">q", data, 0)[0]
            last_ts, last_rel = struct.unpack_from(">qi", data, (entries - 1) * 12)
            if last_ts < first_ts:
                raise _corrupt_index(f"Corrupt time index found, time index file ({path.absolute()}) has non-zero "
                                   f"size but the last timestamp is {last_ts} which is less than the first "
                                   f"timestamp {first_ts}")
            if base + last_rel < base:
                raise _corrupt_index(f"Corrupt time index found, time index file ({path.absolute()}) has non-zero "
                                   f"size but the last offset is {base + last_rel} which is less than the first "
                                   f"offset {base}")
        if len(data) % 12:
            raise _corrupt_index(f"Time index file {path.absolute()} is corrupt, found {len(data)} bytes which is "
                               "neither positive nor a multiple of 12.")
        print(f"{path} passed sanity check.")
        return
    key = str(path.absolute())
    prev_ts = -1
    for i in range(entries):
        ts, rel = struct.unpack_from(">qi", data, i * 12)
        offset = base + rel
        if offset == base and i > 0:
            return
        position = _lookup(index, base, index_entries, offset)
        batch = next((b for b in batches(log, position, None, str(_segment_log(path))) if b.last_offset >= offset),
                     None)
        if batch is None:
            problems.time_not_found.setdefault(key, []).append((offset, -1))
        elif batch.last_offset != offset:
            problems.time_not_found.setdefault(key, []).append((offset, batch.last_offset))
        else:
            max_ts = max([-1] + [r.timestamp for r in batch.records()])
            if max_ts != ts:
                problems.time_mismatches.setdefault(key, []).append((ts, max_ts))
            if prev_ts >= ts:
                problems.time_out_of_order.setdefault(key, []).append((ts, prev_ts))
        if not settings.verify_only:
            print(f"timestamp: {ts} offset: {offset}")
        prev_ts = ts


# ------------------------------------------------------------------------------------------------ other files
#: a producer snapshot entry's fields and where each ends (46 bytes)
_SNAPSHOT_FIELDS = [("producer_id", 8), ("epoch", 10), ("last_sequence", 14), ("last_offset", 22),
                    ("offset_delta", 26), ("timestamp", 34), ("coordinator_epoch", 38),
                    ("current_txn_first_offset", 46)]


def _snapshot_problem(data: bytes) -> Optional[str]:
    """Kafka's CorruptSnapshotException message for a producer snapshot, None when it reads."""
    if len(data) < 10:
        field = "version" if len(data) < 2 else "crc" if len(data) < 6 else "producer_entries"
        return f"Snapshot failed schema validation: Error reading field '{field}': java.nio.BufferUnderflowException"
    count = struct.unpack_from(">i", data, 6)[0]
    if count < 0 or len(data) < 10 + count * 46:
        if count < 0 or count * 46 > 2 * len(data):
            return "Snapshot failed schema validation: Error reading field 'producer_entries'"
        offset = (len(data) - 10) % 46  # where the last, torn entry ends: the field Kafka's reader stopped in
        for name, end in _SNAPSHOT_FIELDS:
            if offset < end:
                return ("Snapshot failed schema validation: Error reading field 'producer_entries': Error reading "
                        f"field '{name}': java.nio.BufferUnderflowException")
    version, stored = struct.unpack_from(">hI", data, 0)
    if version != 1:
        return f"Snapshot contained an unknown file version {version}"
    computed = crc32c.crc32c(data[6:])
    if computed != stored:
        return f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}"
    return None


def dump_producer_snapshot(path: Path) -> None:
    data = path.read_bytes()
    problem = _snapshot_problem(data)
    if problem is not None:
        print(problem, file=sys.stderr)
        return
    entries = decode_snapshot(data)
    for e in entries:
        line = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: "
                f"{e.coordinator_epoch} currentTxnFirstOffset: {_optional_long(e.current_txn_first_offset)} "
                f"lastTimestamp: {e.last_timestamp} ")
        if e.batches:
            m = e.batches[0]
            line += (f"firstSequence: {m.first_seq} lastSequence: {m.last_seq} lastOffset: {m.last_offset} "
                     f"offsetDelta: {m.last_offset - m.first_offset} timestamp: {m.timestamp}")
        print(line)


def _optional_long(v: int) -> str:
    return "OptionalLong.empty" if v < 0 else f"OptionalLong[{v}]"


def dump_txn_index(path: Path) -> None:
    if not path.exists():  # Kafka's TransactionIndex of a missing file is empty
        return
    for t in decode_entries(path.read_bytes()):
        print(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
              f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")
