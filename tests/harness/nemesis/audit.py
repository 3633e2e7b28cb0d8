"""The end-of-run audit and the summary.

After the last heal: the producer stops and flushes, the cluster must be back (every partition led, full ISR), the
replicas' log segments must be byte-identical (tests.harness.faults.wait_replicas_identical), every acknowledged
record must be in the log exactly once at its acknowledged offset, in production order
(tests.harness.faults.check_exactly_once), and the read_committed group must have read every acknowledged record
at least once, in offset order within each assignment, each read matching the log at that offset. The
transactional client's topic is checked by tests.harness.nemesis.txn_client.check_transactions (committed once and
in order, aborted invisible, unknown all-or-nothing, LSO reaching the high watermark) and its replicas compared too.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from tests.harness.faults import LoadStats, check_exactly_once, read_partitions, wait_replicas_identical
from tests.harness.nemesis.ledger import ReadLedger
from tests.harness.nemesis.runner import TOPIC, Nemesis, RunResult, summarize
from tests.harness.nemesis.txn_client import (TXN_PARTITIONS, TXN_TOPIC, TxnCounts, check_transactions,
                                              format_txn_counts)


@dataclass
class Counts:
    produced: int = 0
    acked: int = 0
    failed: int = 0
    in_log: int = 0
    read: int = 0
    reread: int = 0
    duplicates: int = 0       # records present more than once in the log
    lost: int = 0             # acknowledged, not in the log
    unread: int = 0           # acknowledged, never read by the group
    misplaced: int = 0        # acknowledged at one offset, found at another
    read_out_of_order: int = 0
    read_mismatch: int = 0    # a read whose (offset, value) is not the log's


@dataclass
class Audit:
    counts: Counts = field(default_factory=Counts)
    problems: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # worth a look, not a failure
    txn: Optional[TxnCounts] = None

    @property
    def passed(self) -> bool:
        return not self.problems


def audit(n: Nemesis, wait_read_s: float = 90.0) -> Audit:
    """Stop the workload and check everything (see the module docstring). Never raises for a finding."""
    import time

    a = Audit()
    c = a.counts
    assert n.load is not None and n.reader is not None
    try:
        stats: LoadStats = n.load.stop()
    except AssertionError as exc:
        a.problems.append(f"producer: {exc}")
        stats = n.load.stats
    c.produced = stats.produced
    if n.txn is not None:  # it commits its open transaction and exits
        stopped = n.txn.stop(60)
        if stopped:
            a.problems.append(stopped)
    c.acked = sum(len(v) for v in stats.acked.values())
    c.failed = len(stats.errors)
    if stats.errors:
        a.problems.append(f"{len(stats.errors)} records failed delivery, e.g. {stats.errors[:3]}")
    if n.wait_recovered() is None:
        a.problems.append(f"cluster not recovered at the end: {n.last_view!r}"[:800])
        return a
    log_dirs = {i: n.disks[i].path for i in n.broker_ids}
    try:
        wait_replicas_identical(log_dirs, n.full_replicas, TOPIC, timeout_s=120)
    except AssertionError as exc:
        a.problems.append(f"replicas: {exc}"[:1500])
    try:
        log = read_partitions(n.bootstrap, TOPIC, range(n.partitions), timeout_s=120)
    except Exception as exc:
        a.problems.append(f"could not read the topic back: {exc}"[:800])
        return a
    at: Dict[int, Dict[int, bytes]] = {p: dict(rs) for p, rs in log.items()}
    where: Dict[int, Dict[bytes, int]] = {p: {v: o for o, v in rs} for p, rs in log.items()}
    for p, rs in log.items():
        c.in_log += len(rs)
        c.duplicates += sum(k - 1 for k in Counter(v for _, v in rs).values() if k > 1)
    for p, acks in stats.acked.items():
        for ack in acks:
            if ack.value not in where.get(p, {}):
                c.lost += 1
            elif ack.offset is not None and ack.offset >= 0 and where[p][ack.value] != ack.offset:
                c.misplaced += 1
    try:
        check_exactly_once(stats, log)
    except AssertionError as exc:
        a.problems.append(f"exactly-once: {exc}"[:800])
    for what, k in (("duplicated in the log", c.duplicates), ("acknowledged but lost", c.lost),
                    ("at another offset than acknowledged", c.misplaced)):
        if k:
            a.problems.append(f"{k} records {what}")
    # the consumer group: give it time to catch up, then check its ledger
    acked_values = {p: {ack.value for ack in acks} for p, acks in stats.acked.items()}
    deadline = time.monotonic() + wait_read_s
    while time.monotonic() < deadline:
        if all(vals <= n.reader.read_values(p) for p, vals in acked_values.items()):
            break
        time.sleep(0.5)
    ledger: ReadLedger = n.reader.stop()
    check_reads(ledger, at, acked_values, a)
    if n.txn is not None:
        a.txn = check_transactions(n.txn, n.bootstrap, a.problems)
        try:
            wait_replicas_identical(log_dirs, lambda: {p: list(n.broker_ids) for p in range(TXN_PARTITIONS)}
                                    if n.recovered() else {}, TXN_TOPIC, timeout_s=60)
        except AssertionError as exc:
            a.problems.append(f"replicas: {exc}"[:1500])
    a.notes.append("log dirs used at the end: " + ", ".join(
        f"broker {i} {d.used_fraction():.0%} of {d.size_mb} MiB" for i, d in n.disks.items()))
    for i, b in n.brokers.items():
        k = b.output().count("Traceback (most recent call last)")
        if k:  # the project's rule: one clear line, never a Python traceback (Kafka's JVM prints none of these)
            a.problems.append(f"broker {i} logged {k} Python traceback(s) (see {b.output_path})")
    return a


def check_reads(ledger: ReadLedger, at: Dict[int, Dict[int, bytes]], acked: Dict[int, set], a: Audit) -> None:
    c = a.counts
    for p, reads in ledger.reads.items():
        c.read += len(reads)
        seen: set = set()
        last: Dict[int, int] = defaultdict(lambda: -1)
        for r in reads:
            if r.value in seen:
                c.reread += 1
            seen.add(r.value)
            if r.offset <= last[r.generation]:
                c.read_out_of_order += 1
            last[r.generation] = r.offset
            if at.get(p, {}).get(r.offset) != r.value:
                c.read_mismatch += 1
    for p, vals in acked.items():
        got = {r.value for r in ledger.reads.get(p, [])}
        c.unread += len(vals - got)
    for what, k in (("acknowledged records never read by the group", c.unread),
                    ("reads out of offset order within an assignment", c.read_out_of_order),
                    ("reads that do not match the log at their offset", c.read_mismatch)):
        if k:
            a.problems.append(f"{k} {what}")


def format_summary(res: RunResult, aud: Audit, extra: Tuple[str, ...] = ()) -> str:
    c = aud.counts
    lines = [f"nemesis against {res.target}: seed {res.seed}", *extra, "schedule:",
             f"  {'start':>7} {'held':>5}  {'fault':<16} {'target':<40} {'recov':>6} {'prod':>6} {'cons':>6} "
             f"{'txn':>6}  note"]
    for r in res.records:
        lines.append(f"  {r.start:7.1f} {r.held:5.1f}  {r.kind:<16} {r.target[:40]:<40} {_f(r.recovered_s):>6} "
                     f"{_f(r.producer_all_s):>6} {_f(r.consumer_all_s):>6} {_f(r.txn_resume_s):>6}  {r.note}")
    lines.append(f"counts: produced {c.produced}, acked {c.acked}, failed {c.failed}, in log {c.in_log}, "
                 f"read {c.read} (re-reads {c.reread}), duplicates {c.duplicates}, lost {c.lost}, "
                 f"unread {c.unread}, misplaced {c.misplaced}")
    if aud.txn is not None:
        lines.append(format_txn_counts(aud.txn))
    lines.append("times from heal, min/median/max seconds (recovered = every partition led with a full ISR; "
                 "producer/consumer = first ack/read on every partition; any = on any partition; "
                 "txn = the transactional client's next commit):")
    lines.append(f"  {'fault':<16} {'n':>2} {'recovered':>15} {'producer':>15} {'producer any':>15} "
                 f"{'consumer':>15} {'consumer any':>15} {'txn':>15}")
    kinds: Dict[str, list] = defaultdict(list)
    for r in res.records:
        kinds[r.kind].append(r)
    for k, rs in kinds.items():
        lines.append(f"  {k:<16} {len(rs):>2} {summarize([r.recovered_s for r in rs]):>15} "
                     f"{summarize([r.producer_all_s for r in rs]):>15} {summarize([r.producer_any_s for r in rs]):>15} "
                     f"{summarize([r.consumer_all_s for r in rs]):>15} {summarize([r.consumer_any_s for r in rs]):>15} "
                     f"{summarize([r.txn_resume_s for r in rs]):>15}")
    for note in aud.notes:
        lines.append(f"NOTE: {note}")
    problems = res.problems + aud.problems
    for pr in problems:
        lines.append(f"PROBLEM: {pr}")
    lines.append("PASS" if not problems else "FAIL")
    return "\n".join(lines)


def _f(x: object) -> str:
    return "-" if x is None else f"{x:.1f}"
