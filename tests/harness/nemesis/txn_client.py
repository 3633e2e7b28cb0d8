"""The nemesis's transactional workload: a confluent-kafka transactional producer in its own network namespace
(NetLab node ``txc``), so a fault can cut this one client, in the middle of a transaction, from the brokers.

Run as a subprocess (``ip netns exec nemT-txc python -m tests.harness.nemesis.txn_client ...``) it loops: begin,
produce 2-5 records to :data:`TXN_TOPIC` (value ``t<txn>:<i>:<k>``, record ``i`` of ``k`` of transaction ``txn``,
to partition ``(txn + i) % partitions``), hold the transaction open 0.2-1.5 s, commit. One JSON line per event goes
to the ledger file: ``begin`` when a transaction starts, then its outcome:

* ``committed``: commit_transaction returned;
* ``aborted``: an abortable error, and abort_transaction returned;
* ``unknown``: a fatal error (fenced, epoch bumped by the coordinator's timeout abort...), or no answer within
  :data:`END_DEADLINE_S`; the client then builds a new producer with the same ``transactional.id`` and calls
  init_transactions, which fences the old one and completes or aborts what it left, as an application would.

The runner side is :class:`TxnWorkload` (start, stop, read the ledger); :func:`check_transactions` is the audit:
read_committed sees every committed transaction once and in order, nothing of an aborted one, all or nothing of an
unknown one, and the last stable offset reaches the high watermark once the client stopped (no hanging
transaction).
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

TXN_TOPIC = "nemesis-txn"
TXN_PARTITIONS = 3
TXN_TIMEOUT_MS = 10000
#: how long the client keeps retrying a commit/abort that times out before it calls the outcome unknown
END_DEADLINE_S = 45.0
REPO = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------------------------------------- the subprocess
class _Client:
    def __init__(self, bootstrap: str, topic: str, partitions: int, txn_id: str, out: Path, seed: int) -> None:
        self.bootstrap, self.topic, self.partitions, self.txn_id = bootstrap, topic, partitions, txn_id
        self.out = open(out, "a", buffering=1)
        self.rng = random.Random(seed)
        self.stop = False
        self.incarnation = 0
        self.producer: Optional[Any] = None  # confluent_kafka.Producer, imported in the subprocess only

    def emit(self, **kw: object) -> None:
        kw["t"] = time.monotonic()  # CLOCK_MONOTONIC is machine-wide: the runner compares it with its own
        self.out.write(json.dumps(kw) + "\n")

    def new_producer(self) -> None:
        """A producer with the fixed transactional.id, initialised (retried until it works or we are stopped)."""
        from confluent_kafka import KafkaException, Producer

        while True:
            self.incarnation += 1
            p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                          "transaction.timeout.ms": TXN_TIMEOUT_MS, "acks": "all", "linger.ms": 5,
                          "reconnect.backoff.max.ms": 1000, "socket.connection.setup.timeout.ms": 5000,
                          "log_level": 4})
            while True:
                try:
                    p.init_transactions(15)
                    self.producer = p
                    self.emit(event="init", incarnation=self.incarnation)
                    return
                except KafkaException as exc:
                    err = exc.args[0]
                    self.emit(event="init_error", error=_name(err), detail=str(err))
                    if self.stop and not err.retriable():
                        raise SystemExit(0)
                    if not err.retriable():
                        time.sleep(1)
                        break  # a fresh producer
                    if self.stop:
                        raise SystemExit(0)

    def _end(self, commit: bool) -> None:
        """commit/abort, retrying what is retriable until END_DEADLINE_S (an application's loop); raises the rest."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + END_DEADLINE_S
        assert self.producer is not None
        while True:
            try:
                if commit:
                    self.producer.commit_transaction(10)
                else:
                    self.producer.abort_transaction(10)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and not err.fatal() and time.monotonic() < deadline:
                    continue
                raise

    def one(self, n: int) -> None:
        from confluent_kafka import KafkaException

        assert self.producer is not None
        k = self.rng.randint(2, 5)
        hold = self.rng.uniform(0.2, 1.5)
        records: List[Tuple[int, str]] = []
        self.emit(event="begin", txn=n, k=k, incarnation=self.incarnation)
        try:
            self.producer.begin_transaction()
            delivered: List[object] = []
            for i in range(k):
                p, v = (n + i) % self.partitions, f"t{n}:{i}:{k}"
                self.producer.produce(self.topic, v.encode(), partition=p,
                                      on_delivery=lambda err, msg: delivered.append(err))
                records.append((p, v))
                self.producer.poll(0)
            end = time.monotonic() + 5.0  # the records in the leaders' logs (or failed), then the hold
            while len(delivered) < k and time.monotonic() < end:
                self.producer.poll(0.02)
            if len(delivered) == k and not any(delivered):
                self.emit(event="delivered", txn=n)
            end = time.monotonic() + hold
            while time.monotonic() < end:
                self.producer.poll(0.05)
            self._end(commit=True)
            self.emit(event="outcome", txn=n, outcome="committed", records=records)
            return
        except KafkaException as exc:
            err = exc.args[0]
            first = _name(err)
            abortable = err.txn_requires_abort()
        except BufferError as exc:
            first, abortable = f"BufferError {exc}", True
        if abortable:
            try:
                self._end(commit=False)
                self.emit(event="outcome", txn=n, outcome="aborted", records=records, error=first)
                return
            except KafkaException as exc:
                first += f"; abort: {_name(exc.args[0])}"
        self.emit(event="outcome", txn=n, outcome="unknown", records=records, error=first)
        self.producer = None
        self.new_producer()

    def run(self) -> None:
        self.new_producer()
        n = 0
        while not self.stop:
            n += 1
            self.one(n)
        assert self.producer is not None
        self.producer.flush(10)
        self.emit(event="stopped", last=n)


def _name(err: object) -> str:
    """``NAME`` (fatal/retriable marked) of a KafkaError, short enough for the summary's note column."""
    marks = [m for m, on in (("fatal", err.fatal()), ("retriable", err.retriable())) if on]  # type: ignore
    return err.name() + (f" ({', '.join(marks)})" if marks else "")  # type: ignore[attr-defined]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="the nemesis's transactional client (one JSON line per event)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default=TXN_TOPIC)
    ap.add_argument("--partitions", type=int, default=TXN_PARTITIONS)
    ap.add_argument("--txn-id", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    c = _Client(args.bootstrap, args.topic, args.partitions, args.txn_id, Path(args.out), args.seed)

    def stop(signum: int, frame: object) -> None:
        c.stop = True  # finish (commit) the open transaction, then exit

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        c.run()
    except SystemExit:
        raise
    except Exception as exc:  # one clear line in the ledger and the output, no traceback
        c.emit(event="crashed", error=repr(exc))
        print(f"txn_client: {exc!r}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------------------------- the runner side
@dataclass
class Txn:
    txn: int
    k: int
    began: float
    delivered: Optional[float] = None  # every record acknowledged by its leader (in the log, uncommitted)
    outcome: Optional[str] = None
    ended: Optional[float] = None
    records: List[Tuple[int, str]] = field(default_factory=list)
    error: str = ""


class TxnWorkload:
    """The transactional client subprocess in namespace ``node`` and its ledger (read incrementally)."""

    def __init__(self, exec_prefix: List[str], bootstrap: str, workdir: Path, seed: int = 0) -> None:
        self.exec_prefix = exec_prefix
        self.bootstrap = bootstrap
        self.ledger_path = Path(workdir) / "txn-ledger.jsonl"
        self.output_path = Path(workdir) / "txn_client.out"
        self.txn_id = f"nemesis-txn-{uuid.uuid4().hex[:8]}"
        self.seed = seed
        self.proc: Optional[subprocess.Popen] = None
        self.txns: Dict[int, Txn] = {}
        self.events: List[dict] = []
        self._pos = 0
        self._buf = ""

    def start(self) -> "TxnWorkload":
        self.ledger_path.touch()
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.exec_prefix + [sys.executable, "-m", "tests.harness.nemesis.txn_client", "--bootstrap",
                                    self.bootstrap, "--txn-id", self.txn_id, "--out", str(self.ledger_path),
                                    "--seed", str(self.seed)],
                cwd=str(REPO), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        return self

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def refresh(self) -> None:
        """Read the ledger lines written since the last call."""
        with open(self.ledger_path) as f:
            f.seek(self._pos)
            chunk = f.read()
            self._pos = f.tell()
        self._buf += chunk
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            if not line.strip():
                continue
            ev = json.loads(line)
            self.events.append(ev)
            if ev["event"] == "begin":
                self.txns[ev["txn"]] = Txn(ev["txn"], ev["k"], ev["t"])
            elif ev["event"] == "delivered" and ev["txn"] in self.txns:
                self.txns[ev["txn"]].delivered = ev["t"]
            elif ev["event"] == "outcome":
                t = self.txns.setdefault(ev["txn"], Txn(ev["txn"], 0, ev["t"]))
                t.outcome, t.ended, t.error = ev["outcome"], ev["t"], ev.get("error", "")
                t.records = [(int(p), str(v)) for p, v in ev["records"]]

    def open_txn(self) -> Optional[Txn]:
        """The transaction begun and not ended yet, if any."""
        self.refresh()
        if not self.txns:
            return None
        last = self.txns[max(self.txns)]
        return last if last.outcome is None else None

    def wait_open(self, delivered: bool, timeout_s: float = 10.0) -> Optional[Txn]:
        """An open transaction just begun (its records not sent yet, or in flight) or, with ``delivered``, one whose
        records just reached the leaders' logs (the commit not sent yet: the hold is 0.2 s or more)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            t = self.open_txn()
            since = None if t is None else (t.delivered if delivered else t.began)
            if t is not None and since is not None and time.monotonic() - since < 0.1:
                return t
            time.sleep(0.01)
        return self.open_txn()

    def first_commit_since(self, t: float) -> Optional[float]:
        self.refresh()
        ends = [x.ended for x in self.txns.values() if x.outcome == "committed" and x.ended is not None
                and x.ended >= t]
        return min(ends) if ends else None

    def wait_commit_since(self, t: float, timeout_s: float) -> Optional[float]:
        """Seconds from ``t`` to the first commit that returned after it (None if none within ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            c = self.first_commit_since(t)
            if c is not None:
                return c - t
            if time.monotonic() > deadline or not self.is_alive():
                return None
            time.sleep(0.1)

    def outcome_of(self, txn: int) -> str:
        self.refresh()
        t = self.txns.get(txn)
        if t is None or t.outcome is None:
            return "open"
        return t.outcome + (f" ({t.error[:100]})" if t.error else "")

    def stop(self, timeout_s: float = 60.0) -> Optional[str]:
        """SIGTERM (the client commits its open transaction and exits); SIGKILL after ``timeout_s``. Returns a
        problem text, or None after a clean stop."""
        if self.proc is None:
            return None
        problem = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                problem = f"transactional client did not stop within {timeout_s:.0f}s (killed)"
        if problem is None and self.proc.returncode != 0:
            problem = f"transactional client exited with {self.proc.returncode} (see {self.output_path})"
        self.refresh()
        return problem


# ---------------------------------------------------------------------------------------------- the audit
@dataclass
class TxnCounts:
    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    unknown_visible: int = 0       # unknown transactions whose records are all visible (the commit went through)
    open_at_end: int = 0           # begun, no outcome written (client killed)
    visible: int = 0               # records read by read_committed
    in_log: int = 0                # records read by read_uncommitted (aborted ones included)
    lost_committed: int = 0        # records of committed transactions not visible
    duplicates: int = 0            # records visible more than once
    out_of_order: int = 0          # committed records visible out of (txn, i) order within a partition
    aborted_visible: int = 0       # records of aborted transactions visible to read_committed
    torn: int = 0                  # unknown transactions with some, not all, records visible
    strangers: int = 0             # visible records of no transaction in the ledger
    lso_behind: int = 0            # partitions whose LSO stayed below the high watermark
    lso_wait_s: Optional[float] = None
    lso_first: str = ""            # what the first look found when LSO and HW differed (or the error)


def _end_offsets(bootstrap: str, topic: str, partitions: int, committed: bool) -> Dict[int, int]:
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    lvl = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    futs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                              isolation_level=lvl, request_timeout=10)
    return {tp.partition: f.result(15).offset for tp, f in futs.items()}


def _read_all(bootstrap: str, topic: str, partitions: int, committed: bool, timeout_s: float
              ) -> Dict[int, List[Tuple[int, str]]]:
    """Every record ``committed`` (read_committed) or not sees, to the end (partition EOF at the LSO/HW)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-audit-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    out: Dict[int, List[Tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        todo = set(range(partitions))
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                err, p = m.error(), int(m.partition() or 0)
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(p)
                        continue
                    raise KafkaException(err)
                out[p].append((int(m.offset() or 0), (m.value() or b"").decode()))
        if todo:
            raise RuntimeError(f"{topic}: no end of partitions {sorted(todo)} within {timeout_s:.0f}s")
        return out
    finally:
        c.close()


def check_transactions(w: TxnWorkload, bootstrap: str, problems: List[str], lso_wait_s: float = 60.0
                       ) -> TxnCounts:
    """The transactional audit (module docstring); findings go to ``problems``, never raised."""
    c = TxnCounts()
    w.refresh()
    count_outcomes(w.txns, c)
    start = time.monotonic()
    lso: Dict[int, int] = {}
    hw: Dict[int, int] = {}
    while True:
        try:
            lso = _end_offsets(bootstrap, TXN_TOPIC, TXN_PARTITIONS, True)
            hw = _end_offsets(bootstrap, TXN_TOPIC, TXN_PARTITIONS, False)
            if lso == hw:
                c.lso_wait_s = time.monotonic() - start
                break
            c.lso_first = c.lso_first or f"LSO {lso}, HW {hw}"
        except Exception as exc:  # a leader moving: ask again
            lso, hw = {}, {"error": repr(exc)[:200]}  # type: ignore[dict-item]
            c.lso_first = c.lso_first or repr(exc)[:200]
        if time.monotonic() - start > lso_wait_s:
            c.lso_behind = sum(1 for p in range(TXN_PARTITIONS) if lso.get(p, -1) != hw.get(p, -2))
            problems.append(f"{TXN_TOPIC}: last stable offset still below the high watermark {lso_wait_s:.0f}s "
                            f"after the transactional client stopped (a hanging transaction): LSO {lso}, HW {hw}")
            break
        time.sleep(0.5)
    try:
        visible = _read_all(bootstrap, TXN_TOPIC, TXN_PARTITIONS, True, 120)
        raw = _read_all(bootstrap, TXN_TOPIC, TXN_PARTITIONS, False, 120)
    except Exception as exc:
        problems.append(f"could not read {TXN_TOPIC} back: {exc}"[:600])
        return c
    judge_transactions(w.txns, visible, raw, c, problems)
    return c


def count_outcomes(txns: Dict[int, Txn], c: TxnCounts) -> None:
    for t in txns.values():
        if t.outcome == "committed":
            c.committed += 1
        elif t.outcome == "aborted":
            c.aborted += 1
        elif t.outcome == "unknown":
            c.unknown += 1
        else:
            c.open_at_end += 1


def judge_transactions(txns: Dict[int, Txn], visible: Dict[int, List[Tuple[int, str]]],
                       raw: Dict[int, List[Tuple[int, str]]], c: TxnCounts, problems: List[str]) -> None:
    """The ledger against what read_committed (``visible``) and read_uncommitted (``raw``) returned, partition ->
    [(offset, value)]: counts into ``c``, findings into ``problems`` (a pure function, unit-tested)."""
    c.in_log = sum(len(v) for v in raw.values())
    seen: Dict[str, int] = {}
    for p, rs in visible.items():
        c.visible += len(rs)
        last: Tuple[int, int] = (-1, -1)
        for _, v in rs:
            seen[v] = seen.get(v, 0) + 1
            try:
                txn, i, _k = (int(x) for x in v[1:].split(":"))
            except ValueError:
                c.strangers += 1
                continue
            if txn not in txns:
                c.strangers += 1
            elif txns[txn].outcome == "committed":
                if (txn, i) <= last:
                    c.out_of_order += 1
                last = (txn, i)
    c.duplicates = sum(k - 1 for k in seen.values() if k > 1)
    examples: Dict[str, List[int]] = {"lost": [], "aborted visible": [], "torn": []}
    for t in txns.values():
        shown = sum(1 for _, v in t.records if v in seen)
        if t.outcome == "committed":
            if len(t.records) != t.k:
                problems.append(f"txn {t.txn}: committed with {len(t.records)} of {t.k} records produced")
            lost = len(t.records) - shown
            c.lost_committed += lost
            if lost:
                examples["lost"].append(t.txn)
        elif t.outcome == "aborted":
            c.aborted_visible += shown
            if shown:
                examples["aborted visible"].append(t.txn)
        else:  # unknown, or open at the end: all or nothing
            if not t.records:  # open at the end: its records are the visible ones carrying its number
                shown = sum(1 for v in seen if v.startswith(f"t{t.txn}:"))
                if shown and shown != t.k:
                    c.torn += 1
                    examples["torn"].append(t.txn)
                elif shown:
                    c.unknown_visible += 1
                continue
            if 0 < shown < len(t.records):
                c.torn += 1
                examples["torn"].append(t.txn)
            elif shown and t.outcome == "unknown":
                c.unknown_visible += 1
    for what, k, ex in (("records of committed transactions not visible to read_committed", c.lost_committed,
                         examples["lost"]),
                        ("records of aborted transactions visible to read_committed", c.aborted_visible,
                         examples["aborted visible"]),
                        ("transactions of unknown outcome partly visible (not atomic)", c.torn, examples["torn"]),
                        ("transactional records visible more than once", c.duplicates, []),
                        ("committed transactional records visible out of order", c.out_of_order, []),
                        ("visible transactional records of no transaction in the ledger", c.strangers, [])):
        if k:
            problems.append(f"{TXN_TOPIC}: {k} {what}" + (f" (txns {ex[:8]})" if ex else ""))
    if not any(t.outcome == "committed" for t in txns.values()):
        problems.append(f"{TXN_TOPIC}: the transactional client committed nothing")


def format_txn_counts(c: TxnCounts) -> str:
    return (f"transactions: committed {c.committed}, aborted {c.aborted}, unknown {c.unknown} "
            f"({c.unknown_visible} turned out committed), open at end {c.open_at_end}; records visible {c.visible}, "
            f"in log {c.in_log}; lost committed {c.lost_committed}, aborted visible {c.aborted_visible}, "
            f"torn {c.torn}, duplicates {c.duplicates}, out of order {c.out_of_order}, "
            f"LSO = HW after {'-' if c.lso_wait_s is None else f'{c.lso_wait_s:.1f}s'}"
            + (f" (first look: {c.lso_first})" if c.lso_first else ""))


if __name__ == "__main__":
    sys.exit(main())
