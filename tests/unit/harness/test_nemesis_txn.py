"""The nemesis's transactional ledger (tests/harness/nemesis/txn_client.py): reading the client's JSON lines as they
are written, and the audit's judgement of them against what read_committed and read_uncommitted returned."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple

from tests.harness.nemesis.txn_client import Txn, TxnCounts, TxnWorkload, count_outcomes, judge_transactions


def _txn(n: int, outcome: str, k: int, partitions: int = 3) -> Txn:
    return Txn(n, k, float(n), outcome=outcome, ended=n + 0.5,
               records=[((n + i) % partitions, f"t{n}:{i}:{k}") for i in range(k)])


def _reads(txns: List[Txn], skip: Tuple[str, ...] = ()) -> Dict[int, List[Tuple[int, str]]]:
    """The records of ``txns`` per partition in ledger order, as a consumer returns them (offsets made up)."""
    out: Dict[int, List[Tuple[int, str]]] = {0: [], 1: [], 2: []}
    for t in txns:
        for p, v in t.records:
            if v not in skip:
                out[p].append((len(out[p]), v))
    return out


def _judge(txns: List[Txn], visible: Dict[int, List[Tuple[int, str]]],
           raw: Dict[int, List[Tuple[int, str]]]) -> Tuple[TxnCounts, List[str]]:
    c, problems = TxnCounts(), []  # type: Tuple[TxnCounts, List[str]]
    by = {t.txn: t for t in txns}
    count_outcomes(by, c)
    judge_transactions(by, visible, raw, c, problems)
    return c, problems


def test_a_clean_history_passes() -> None:
    committed = [_txn(1, "committed", 3), _txn(2, "committed", 2), _txn(5, "committed", 4)]
    aborted, unknown_done, unknown_gone = _txn(3, "aborted", 2), _txn(4, "unknown", 3), _txn(6, "unknown", 2)
    txns = committed + [aborted, unknown_done, unknown_gone]
    visible = _reads(sorted(committed + [unknown_done], key=lambda t: t.txn))
    raw = _reads(sorted(txns, key=lambda t: t.txn))
    c, problems = _judge(txns, visible, raw)
    assert problems == []
    assert (c.committed, c.aborted, c.unknown, c.unknown_visible) == (3, 1, 2, 1)
    assert (c.visible, c.in_log) == (12, 16)


def test_lost_aborted_visible_torn_duplicate_out_of_order_and_stranger_are_flagged() -> None:
    t1, t2, t3, t4 = _txn(1, "committed", 3), _txn(2, "committed", 2), _txn(3, "aborted", 2), _txn(4, "unknown", 3)
    visible = _reads([t1, t2, t3, t4], skip=("t1:2:3", "t4:0:3"))  # t1 loses a record, t4 is torn
    assert [v for _, v in visible[2]] == ["t1:1:3", "t2:0:2", "t4:1:3"]
    visible[2][0], visible[2][1] = visible[2][1], visible[2][0]  # t2's record before t1's: out of order
    assert [v for _, v in visible[0]] == ["t2:1:2", "t3:0:2", "t4:2:3"]
    visible[0].append((99, "t2:1:2"))    # a duplicate (also out of order: not after itself)
    visible[1].append((100, "t77:0:1"))  # no such transaction
    c, problems = _judge([t1, t2, t3, t4], visible, visible)
    text = "\n".join(problems)
    assert c.lost_committed == 1 and "committed transactions not visible to read_committed (txns [1])" in text
    assert c.aborted_visible == 2 and "aborted transactions visible to read_committed (txns [3])" in text
    assert c.torn == 1 and "partly visible (not atomic) (txns [4])" in text
    assert (c.duplicates, c.out_of_order, c.strangers) == (1, 2, 1)
    assert len(problems) == 6, problems


def test_an_unknown_transaction_partly_visible_is_not_atomic() -> None:
    t1, t2 = _txn(1, "committed", 2), _txn(2, "unknown", 3)
    visible = _reads([t1, t2], skip=("t2:1:3",))
    c, problems = _judge([t1, t2], visible, _reads([t1, t2]))
    assert c.torn == 1 and any("not atomic" in p and "[2]" in p for p in problems)


def test_nothing_committed_is_a_problem() -> None:
    t = _txn(1, "unknown", 2)
    c, problems = _judge([t], _reads([]), _reads([t]))
    assert any("committed nothing" in p for p in problems)


def test_the_ledger_is_read_as_it_grows(tmp_path: Path) -> None:
    w = TxnWorkload(["true"], "unused:9092", tmp_path)
    w.ledger_path.write_text("")
    lines = [{"event": "init", "incarnation": 1, "t": 1.0},
             {"event": "begin", "txn": 1, "k": 2, "incarnation": 1, "t": 2.0},
             {"event": "delivered", "txn": 1, "t": 2.1},
             {"event": "outcome", "txn": 1, "outcome": "committed", "records": [[1, "t1:0:2"], [2, "t1:1:2"]],
              "t": 3.0},
             {"event": "begin", "txn": 2, "k": 3, "incarnation": 1, "t": 3.0}]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    cut = text.index('"outcome"') + 5  # the client is in the middle of writing the outcome line
    with open(w.ledger_path, "a") as f:
        f.write(text[:cut])
    w.refresh()
    assert w.txns[1].delivered == 2.1 and w.txns[1].outcome is None
    assert w.open_txn() is not None and w.open_txn().txn == 1  # type: ignore[union-attr]
    assert w.first_commit_since(0.0) is None
    with open(w.ledger_path, "a") as f:
        f.write(text[cut:])
    w.refresh()
    assert w.outcome_of(1) == "committed" and w.txns[1].records == [(1, "t1:0:2"), (2, "t1:1:2")]
    assert w.first_commit_since(2.5) == 3.0 and w.first_commit_since(3.5) is None
    assert w.open_txn() is not None and w.open_txn().txn == 2  # type: ignore[union-attr]
    assert w.outcome_of(2) == "open"
