"""Apache Kafka 3.9.1's ``kafka.tools.DumpLogSegments`` run on log files, its text output parsed into plain data.

The tool prints, per segment file, one line per batch (``baseOffset: 0 lastOffset: 3 ... isvalid: true``) and, with
``--print-data-log`` or a decoder, one ``| offset: ...`` line per record under it; ``--transaction-log-decoder``
renders ``__transaction_state`` records as ``key: transaction_metadata::transactionalId=<id> payload:
producerId:<n>,producerEpoch:<n>,state=<State>,partitions=[<t-p>,...],txnLastUpdateTimestamp=<ms>,txnTimeoutMs=<ms>``
(``payload: <DELETE>`` for a tombstone); control records carry ``endTxnMarker: COMMIT coordinatorEpoch: <n>``; a
``.txnindex`` file prints ``version: 0 producerId: <n> firstOffset: <n> lastOffset: <n> lastStableOffset: <n>`` per
aborted transaction. Only the tests use this: the parse is strict, so a line the tool changes shape on fails loudly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from tests.harness.cluster_ops import run_kafka_tool

_PAIR = re.compile(r"(\w+): (\S+)")
_TXN_KEY = re.compile(r"^transaction_metadata::transactionalId=(.*)$")
_TXN_VALUE = re.compile(r"^producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),partitions=\[(.*)\],"
                        r"txnLastUpdateTimestamp=(-?\d+),txnTimeoutMs=(-?\d+)$")
_INDEX = re.compile(r"^version: (\d+) producerId: (-?\d+) firstOffset: (-?\d+) lastOffset: (-?\d+) "
                    r"lastStableOffset: (-?\d+)$")


@dataclass
class DumpedRecord:
    fields: Dict[str, str]
    key: Optional[str] = None
    payload: Optional[str] = None

    @property
    def offset(self) -> int:
        return int(self.fields["offset"])


@dataclass
class DumpedBatch:
    fields: Dict[str, str]
    records: List[DumpedRecord] = field(default_factory=list)

    def int(self, name: str) -> int:
        return int(self.fields[name])

    def flag(self, name: str) -> bool:
        return self.fields[name] == "true"


@dataclass
class Dump:
    """What the tool printed for each file, in file order."""
    batches: Dict[str, List[DumpedBatch]]
    index_entries: Dict[str, List[Tuple[int, int, int, int, int]]]
    stdout: str
    stderr: str


@dataclass(frozen=True)
class TxnLogEntry:
    """One decoded ``__transaction_state`` record as Kafka's decoder printed it (None fields: a tombstone)."""
    offset: int
    transactional_id: str
    producer_id: Optional[int]
    producer_epoch: Optional[int]
    state: Optional[str]
    partitions: Tuple[Tuple[str, int], ...]
    last_update_ms: Optional[int]
    timeout_ms: Optional[int]


def dump_segments(files: Sequence[Path], *options: str) -> Dump:
    """Run DumpLogSegments once over ``files``; assert it exited 0 and printed no exception."""
    r = run_kafka_tool("kafka.tools.DumpLogSegments", [*options, "--files", ",".join(str(f) for f in files)])
    assert r.returncode == 0, f"DumpLogSegments exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "Exception" not in r.stdout + r.stderr, f"DumpLogSegments printed an exception:\n{r.stdout}\n{r.stderr}"
    return parse_dump(r.stdout, r.stderr)


def parse_dump(stdout: str, stderr: str = "") -> Dump:
    batches: Dict[str, List[DumpedBatch]] = {}
    index: Dict[str, List[Tuple[int, int, int, int, int]]] = {}
    current: Optional[str] = None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            current = line[len("Dumping "):].strip()
            batches[current], index[current] = [], []
            continue
        if current is None or not line.strip() or line.startswith("Log starting offset") \
                or line.startswith("log4j:"):
            continue
        m = _INDEX.match(line)
        if m:
            index[current].append(tuple(int(g) for g in m.groups()))  # type: ignore[arg-type]
        elif line.startswith("baseOffset:"):
            batches[current].append(DumpedBatch(dict(_PAIR.findall(line))))
        elif line.startswith("| offset:"):
            assert batches[current], f"a record line before any batch line: {line}"
            head, key, payload = line, None, None
            if " payload: " in line:
                head, payload = line.split(" payload: ", 1)
            if " key: " in head:
                head, key = head.split(" key: ", 1)
            batches[current][-1].records.append(DumpedRecord(dict(_PAIR.findall(head)), key, payload))
        else:
            raise AssertionError(f"unexpected DumpLogSegments line in {current}: {line!r}")
    return Dump(batches, index, stdout, stderr)


def txn_log_entries(batches: Sequence[DumpedBatch]) -> List[TxnLogEntry]:
    """Every record of ``--transaction-log-decoder`` output as a TxnLogEntry; a record the decoder did not render
    as a transaction record fails."""
    out: List[TxnLogEntry] = []
    for b in batches:
        for r in b.records:
            km = _TXN_KEY.match(r.key or "")
            assert km, f"not decoded as a transaction log key: {r.key!r}"
            tid = km.group(1)
            if r.payload == "<DELETE>":
                out.append(TxnLogEntry(r.offset, tid, None, None, None, (), None, None))
                continue
            vm = _TXN_VALUE.match(r.payload or "")
            assert vm, f"not decoded as a transaction log value: {r.payload!r}"
            pid, epoch, state, parts, updated, timeout = vm.groups()
            tps = tuple(sorted((tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])) for tp in parts.split(",") if tp))
            out.append(TxnLogEntry(r.offset, tid, int(pid), int(epoch), state, tps, int(updated), int(timeout)))
    return out
