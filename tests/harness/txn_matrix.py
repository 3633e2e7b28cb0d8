"""The (API x transaction state) request matrix: one raw request sequence per (state, probe), run against one broker.

A side is a broker 0 (coordinator of every transactional id and leader of topic ``m``, 2 partitions) plus a broker 1
leading topic ``held`` (1 partition): stopping broker 1 keeps the markers of a transaction that includes ``held-0``
from being written, which holds it in PrepareCommit/PrepareAbort while probes run. For every state each probe gets a
fresh transactional id, named alike on both sides (so ids, groups and ``__transaction_state``/``__consumer_offsets``
partitions coincide): the id is driven into the state, the probe's request(s) are sent, and DescribeTransactions
records what the probe left behind. Everything is reduced to comparable values: error codes field by field, epochs
as offsets from the driven producer's epoch, producer ids as "same"/"new", topics by name; never a timestamp, a
throttle time or a raw producer id (those must differ). Requests use the project's codec (``RawClient``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.integration.broker.wire import ConnectionClosed, RawClient

TIMEOUT_MS = 300000
TOPIC, HELD = "m", "held"
CONCURRENT_TRANSACTIONS = 51
STATES = ("Unknown", "Empty", "Ongoing", "CompleteCommit", "CompleteAbort", "Fenced", "PrepareCommit",
          "PrepareAbort")
#: states whose transaction includes ``held-0`` and ends while broker 1 is down
PREPARE_STATES = ("PrepareCommit", "PrepareAbort")
#: a producer id no transactional id of the run holds (the "Unknown" state's producer)
UNKNOWN_PID = 987654


@dataclass
class Ctx:
    """A transactional id driven into a state: the producer id/epoch the probes speak as, and what driving saw."""
    tid: str
    pid: int
    epoch: int
    drive: List[Tuple[str, Any]] = field(default_factory=list)

    @property
    def group(self) -> str:
        return f"g-{self.tid}"


class Conn:
    """A RawClient that reconnects after the broker closed the connection."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.client: Optional[RawClient] = None

    def __call__(self, key: ApiKey, version: int, body: Dict[str, Any]) -> Any:
        for attempt in range(3):
            if self.client is None:
                self.client = RawClient(self.bootstrap, timeout_s=40)
            try:
                return self.client.request(key, version, body, client_id="txn-matrix")
            except (ConnectionClosed, OSError):
                self.client.close()
                self.client = None
                if attempt == 2:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


# ------------------------------------------------------------------------------------------------ requests
def init_producer_id(c: Conn, version: int, tid: Optional[str], pid: int = -1, epoch: int = -1,
                     timeout_ms: int = TIMEOUT_MS) -> Any:
    return c(ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms,
                                                "producer_id": pid, "producer_epoch": epoch})


def add_partitions(c: Conn, version: int, tid: str, pid: int, epoch: int, tps: List[Tuple[str, int]],
                   verify_only: bool = False) -> Dict[str, Any]:
    topics: Dict[str, List[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    as_list = [{"name": t, "partitions": ps} for t, ps in topics.items()]
    if version < 4:
        r = c(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": as_list})
        return {"partitions": _by_tp(r.results_by_topic_v3_and_below)}
    r = c(ApiKey.ADD_PARTITIONS_TO_TXN, version, {"transactions": [
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": verify_only,
         "topics": as_list}]})
    return {"error_code": r.error_code,
            "transactions": {x.transactional_id == tid: _by_tp(x.topic_results) for x in r.results_by_transaction}}


def _by_tp(topic_results: Any) -> Dict[str, int]:
    return {f"{t.name}-{p.partition_index}": p.partition_error_code for t in topic_results
            for p in t.results_by_partition}


def produce(c: Conn, version: int, tid: str, pid: int, epoch: int, tp: Tuple[str, int], seq: int) -> Dict[str, Any]:
    batch = build_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)
    r = c(ApiKey.PRODUCE, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": tp[0], "partition_data": [{"index": tp[1], "records": batch}]}]})
    p = r.responses[0].partition_responses[0]
    return {"error_code": p.error_code, "record_errors": len(p.record_errors or []),
            "error_message": p.error_message}


def describe(c: Conn, tid: str) -> Any:
    return c(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0]


def txn_offset_commit(c: Conn, version: int, ctx: Ctx, pid: int, epoch: int, member_id: str = "",
                      generation_id: int = -1) -> Dict[str, int]:
    r = c(ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": ctx.tid, "group_id": ctx.group, "producer_id": pid, "producer_epoch": epoch,
        "generation_id": generation_id, "member_id": member_id, "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return {f"{t.name}-{p.partition_index}": p.error_code for t in r.topics for p in t.partitions}


def end_txn(c: Conn, version: int, tid: str, pid: int, epoch: int, commit: bool) -> int:
    return int(c(ApiKey.END_TXN, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                           "committed": commit}).error_code)


def add_offsets(c: Conn, version: int, ctx: Ctx, pid: int, epoch: int) -> int:
    return int(c(ApiKey.ADD_OFFSETS_TO_TXN, version, {"transactional_id": ctx.tid, "producer_id": pid,
                                                      "producer_epoch": epoch, "group_id": ctx.group}).error_code)


# ------------------------------------------------------------------------------------------------ normalizing
def rel_pid(ctx: Ctx, pid: int) -> Any:
    """A producer id as the comparison sees it: "same" as the driven producer's, "new", or the -1 of an error."""
    return pid if pid < 0 else ("same" if pid == ctx.pid else "new")


def rel_epoch(ctx: Ctx, epoch: int) -> Any:
    return epoch if epoch < 0 else f"{epoch - ctx.epoch:+d}"


def norm_describe(ctx: Ctx, d: Any) -> Dict[str, Any]:
    if d.error_code:
        return {"error_code": d.error_code}
    return {"error_code": 0, "state": d.transaction_state, "producer_id": rel_pid(ctx, d.producer_id),
            "producer_epoch": rel_epoch(ctx, d.producer_epoch), "timeout_ms": d.transaction_timeout_ms,
            "partitions": sorted(f"{t.topic}-{p}" for t in d.topics for p in t.partitions)}


def settled(c: Conn, ctx: Ctx, timeout_s: float = 15.0) -> Dict[str, Any]:
    """DescribeTransactions once the transaction is not between EndTxn and its markers (PrepareCommit/Abort)."""
    deadline = time.monotonic() + timeout_s
    while True:
        d = describe(c, ctx.tid)
        if d.error_code or d.transaction_state not in PREPARE_STATES or time.monotonic() > deadline:
            return norm_describe(ctx, d)
        time.sleep(0.05)


def wait_until_not_concurrent(fn: Callable[[], Any], timeout_s: float = 30.0) -> Tuple[List[int], Any]:
    """Repeat ``fn`` (a request answering ``error_code``) while it answers CONCURRENT_TRANSACTIONS, as clients do;
    the distinct codes seen in order and the last answer."""
    codes: List[int] = []
    deadline = time.monotonic() + timeout_s
    while True:
        r = fn()
        if not codes or codes[-1] != r.error_code:
            codes.append(int(r.error_code))
        if r.error_code != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return codes, r
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------ driving
def drive(c: Conn, state: str, tid: str) -> Ctx:
    """Bring ``tid`` into ``state`` (Prepare states: into Ongoing with ``held-0``; ``end_prepared`` finishes)."""
    if state == "Unknown":
        return Ctx(tid, UNKNOWN_PID, 0)
    r = init_producer_id(c, 4, tid)
    ctx = Ctx(tid, r.producer_id, r.producer_epoch, [("init", (r.error_code, r.producer_epoch))])
    if state == "Empty":
        return ctx
    tps = [(TOPIC, 0)] + ([(HELD, 0)] if state in PREPARE_STATES else [])
    ctx.drive.append(("add", add_partitions(c, 3, tid, ctx.pid, ctx.epoch, tps)))
    ctx.drive.append(("produce", produce(c, 11, tid, ctx.pid, ctx.epoch, (TOPIC, 0), 0)["error_code"]))
    if state in ("Ongoing",) + PREPARE_STATES:
        return ctx
    if state in ("CompleteCommit", "CompleteAbort"):
        ctx.drive.append(("end", end_txn(c, 3, tid, ctx.pid, ctx.epoch, state == "CompleteCommit")))
        ctx.drive.append(("settled", settled(c, ctx)))
        return ctx
    assert state == "Fenced"
    codes, r = wait_until_not_concurrent(lambda: init_producer_id(c, 4, tid))
    ctx.drive.append(("fence", (codes, r.producer_id == ctx.pid, r.producer_epoch - ctx.epoch)))
    ctx.drive.append(("settled", settled(c, ctx)))
    return ctx  # the probes speak as the fenced producer (its old epoch)


def end_prepared(c: Conn, state: str, ctx: Ctx) -> None:
    """EndTxn while broker 1 is down: the transaction stays in PrepareCommit/PrepareAbort."""
    ctx.drive.append(("end", end_txn(c, 3, ctx.tid, ctx.pid, ctx.epoch, state == "PrepareCommit")))
    deadline = time.monotonic() + 15
    while True:  # until the marker to m-0 is written: only held-0's is left then
        d = norm_describe(ctx, describe(c, ctx.tid))
        if d.get("partitions") != sorted([f"{TOPIC}-0", f"{HELD}-0"]) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    ctx.drive.append(("describe", d))


# ------------------------------------------------------------------------------------------------ probes
Probe = Callable[[Conn, Ctx], Any]


def _ipi(version: int, with_pid: bool, epoch_off: int = 0, pid_off: int = 0, timeout_ms: int = TIMEOUT_MS) -> Probe:
    def probe(c: Conn, ctx: Ctx) -> Any:
        pid, epoch = (ctx.pid + pid_off, ctx.epoch + epoch_off) if with_pid else (-1, -1)
        r = init_producer_id(c, version, ctx.tid, pid, epoch, timeout_ms)
        return {"error_code": r.error_code, "producer_id": rel_pid(ctx, r.producer_id),
                "producer_epoch": rel_epoch(ctx, r.producer_epoch)}
    return probe


def _add(version: int, tps: List[Tuple[str, int]], epoch_off: int = 0, pid_off: int = 0,
         verify_only: bool = False) -> Probe:
    return lambda c, ctx: add_partitions(c, version, ctx.tid, ctx.pid + pid_off, ctx.epoch + epoch_off, tps,
                                         verify_only)


def _end(version: int, commit: bool, epoch_off: int = 0, pid_off: int = 0) -> Probe:
    return lambda c, ctx: end_txn(c, version, ctx.tid, ctx.pid + pid_off, ctx.epoch + epoch_off, commit)


def _offsets(version: int, epoch_off: int = 0, pid_off: int = 0) -> Probe:
    return lambda c, ctx: add_offsets(c, version, ctx, ctx.pid + pid_off, ctx.epoch + epoch_off)


def _txn_commit(version: int, member_id: str = "", generation_id: int = -1, after_add_offsets: bool = False
                ) -> Probe:
    def probe(c: Conn, ctx: Ctx) -> Any:
        out: Dict[str, Any] = {}
        if after_add_offsets:
            out["add_offsets"] = add_offsets(c, 3, ctx, ctx.pid, ctx.epoch)
        out["commit"] = txn_offset_commit(c, version, ctx, ctx.pid, ctx.epoch, member_id, generation_id)
        return out
    return probe


def _produce(version: int) -> Probe:
    def probe(c: Conn, ctx: Ctx) -> Any:
        r = produce(c, version, ctx.tid, ctx.pid, ctx.epoch, (TOPIC, 1), 0)
        r.pop("error_message")  # free text: Kafka's wording is not a protocol fact
        return r
    return probe


def _describe(c: Conn, ctx: Ctx) -> Any:
    return norm_describe(ctx, describe(c, ctx.tid))


def _list(version: int, by_state: bool, by_pid: bool, duration_ms: int = -1) -> Probe:
    """ListTransactions filtered by the id's current state (Unknown: none) and/or its producer id; only the entries
    of this id count (the other ids of the run are listed too)."""
    def probe(c: Conn, ctx: Ctx) -> Any:
        d = describe(c, ctx.tid)
        states = [d.transaction_state] if by_state and d.error_code == 0 else []
        if duration_ms >= 0 and d.error_code == 0 and d.transaction_start_time_ms > 0:
            # Both brokers list a transaction only once it has run *longer* than the filter: wait until it has, so
            # the answer does not depend on whether the list landed in the same millisecond as the start.
            while time.time() * 1000 <= d.transaction_start_time_ms + duration_ms + 2:
                time.sleep(0.002)
        r = c(ApiKey.LIST_TRANSACTIONS, version, {"state_filters": states,
                                                  "producer_id_filters": [ctx.pid] if by_pid else [],
                                                  "duration_filter": duration_ms})
        mine = [(s.transaction_state, rel_pid(ctx, s.producer_id)) for s in r.transaction_states
                if s.transactional_id == ctx.tid]
        return {"error_code": r.error_code, "unknown_state_filters": sorted(r.unknown_state_filters), "mine": mine}
    return probe


def _list_unknown_state(c: Conn, ctx: Ctx) -> Any:
    r = c(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["Bogus", "Ongoing"], "producer_id_filters": [ctx.pid],
                                        "duration_filter": -1})
    return {"error_code": r.error_code, "unknown_state_filters": sorted(r.unknown_state_filters),
            "mine": [s.transaction_state for s in r.transaction_states if s.transactional_id == ctx.tid]}


M0, M1 = (TOPIC, 0), (TOPIC, 1)
PROBES: Dict[str, Probe] = {
    "InitProducerId v3": _ipi(3, False),
    "InitProducerId v3 +pid/epoch": _ipi(3, True),
    "InitProducerId v3 +pid/wrong epoch": _ipi(3, True, epoch_off=1),
    "InitProducerId v4": _ipi(4, False),
    "InitProducerId v4 +pid/epoch": _ipi(4, True),
    "InitProducerId v4 +pid/wrong epoch": _ipi(4, True, epoch_off=1),
    "InitProducerId v4 +wrong pid/epoch": _ipi(4, True, pid_off=1000),
    "InitProducerId v4 +pid only": lambda c, ctx: init_producer_id(c, 4, ctx.tid, ctx.pid, -1).error_code,
    "InitProducerId v4 timeout 0": _ipi(4, False, timeout_ms=0),
    "AddPartitionsToTxn v3 m-1": _add(3, [M1]),
    "AddPartitionsToTxn v3 m-0 (added in Ongoing)": _add(3, [M0]),
    "AddPartitionsToTxn v3 m-1 wrong epoch": _add(3, [M1], epoch_off=1),
    "AddPartitionsToTxn v1 m-1 wrong epoch": _add(1, [M1], epoch_off=1),
    "AddPartitionsToTxn v3 m-1 wrong pid": _add(3, [M1], pid_off=1000),
    "AddPartitionsToTxn v3 m-1 + unknown topic": _add(3, [M1, ("nope", 0)]),
    "AddPartitionsToTxn v3 m-1 + m-7 (no such partition)": _add(3, [M1, (TOPIC, 7)]),
    "AddPartitionsToTxn v3 __consumer_offsets-0": _add(3, [("__consumer_offsets", 0)]),
    "AddPartitionsToTxn v4 verify_only m-0": _add(4, [M0], verify_only=True),
    "AddPartitionsToTxn v4 verify_only m-1": _add(4, [M1], verify_only=True),
    "AddPartitionsToTxn v5 verify_only m-1": _add(5, [M1], verify_only=True),
    "AddPartitionsToTxn v4 verify_only m-0 wrong epoch": _add(4, [M0], epoch_off=1, verify_only=True),
    "AddPartitionsToTxn v4 add m-1": _add(4, [M1]),
    "AddOffsetsToTxn v3": _offsets(3),
    "AddOffsetsToTxn v3 wrong epoch": _offsets(3, epoch_off=1),
    "AddOffsetsToTxn v1 wrong epoch": _offsets(1, epoch_off=1),
    "AddOffsetsToTxn v3 wrong pid": _offsets(3, pid_off=1000),
    "EndTxn v2 commit": _end(2, True),
    "EndTxn v2 abort": _end(2, False),
    "EndTxn v3 commit": _end(3, True),
    "EndTxn v3 abort": _end(3, False),
    "EndTxn v4 commit": _end(4, True),
    "EndTxn v3 commit wrong epoch": _end(3, True, epoch_off=1),
    "EndTxn v3 abort wrong epoch": _end(3, False, epoch_off=1),
    "EndTxn v1 commit wrong epoch": _end(1, True, epoch_off=1),
    "EndTxn v3 commit wrong pid": _end(3, True, pid_off=1000),
    "TxnOffsetCommit v2 (group not added)": _txn_commit(2),
    "TxnOffsetCommit v3 bad member/generation (group not added)": _txn_commit(3, "bogus-member", 7),
    "AddOffsetsToTxn + TxnOffsetCommit v2": _txn_commit(2, after_add_offsets=True),
    "AddOffsetsToTxn + TxnOffsetCommit v3": _txn_commit(3, after_add_offsets=True),
    "AddOffsetsToTxn + TxnOffsetCommit v3 bad member": _txn_commit(3, "bogus-member", -1, after_add_offsets=True),
    "AddOffsetsToTxn + TxnOffsetCommit v3 bad generation": _txn_commit(3, "", 7, after_add_offsets=True),
    "AddOffsetsToTxn + TxnOffsetCommit v3 bad member/generation": _txn_commit(3, "bogus-member", 7,
                                                                             after_add_offsets=True),
    "Produce v10 m-1 (not added)": _produce(10),
    "Produce v11 m-1 (not added)": _produce(11),
    "DescribeTransactions": _describe,
    "ListTransactions v0 by state": _list(0, True, False),
    "ListTransactions v1 by pid": _list(1, False, True),
    "ListTransactions v1 by pid, duration 0": _list(1, False, True, 0),
    "ListTransactions v1 unknown state + Ongoing": _list_unknown_state,
}


@dataclass
class Row:
    """One (state, probe): what driving answered, the probe's answer, and the transaction afterwards."""
    drive: List[Tuple[str, Any]]
    answer: Any
    after: Any
    final: Any = None  # Prepare states: once broker 1 is back and the markers are written

    def as_dict(self) -> Dict[str, Any]:
        return {"drive": self.drive, "answer": self.answer, "after": self.after, "final": self.final}


def tid_for(run: str, state: str, probe: str) -> str:
    return f"{run}-{STATES.index(state)}-{list(PROBES).index(probe)}"


def run_states(c: Conn, run: str, states: Tuple[str, ...]) -> Dict[Tuple[str, str], Row]:
    """Every probe in each of ``states`` (not the Prepare ones)."""
    rows: Dict[Tuple[str, str], Row] = {}
    for state in states:
        for name, probe in PROBES.items():
            ctx = drive(c, state, tid_for(run, state, name))
            answer = probe(c, ctx)
            rows[(state, name)] = Row(ctx.drive, answer, settled(c, ctx))
    return rows


def run_prepared(c: Conn, run: str, stop_broker_1: Callable[[], None], start_broker_1: Callable[[], None]
                 ) -> Dict[Tuple[str, str], Row]:
    """Every probe in PrepareCommit and PrepareAbort: drive to Ongoing with ``held-0``, stop broker 1, EndTxn,
    probe, then start broker 1 and record where each transaction ends."""
    ctxs = {(state, name): drive(c, state, tid_for(run, state, name)) for state in PREPARE_STATES for name in PROBES}
    stop_broker_1()
    rows: Dict[Tuple[str, str], Row] = {}
    for (state, name), ctx in ctxs.items():
        end_prepared(c, state, ctx)
        answer = PROBES[name](c, ctx)
        rows[(state, name)] = Row(ctx.drive, answer, norm_describe(ctx, describe(c, ctx.tid)))
    start_broker_1()
    for key, ctx in ctxs.items():
        rows[key].final = settled(c, ctx, timeout_s=60)
    return rows
