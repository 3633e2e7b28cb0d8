"""The (API x transaction state) matrix against a real Apache Kafka 3.9.1 broker and against ours, answer by answer.

Each side runs in its own ZooKeeper chroot: a broker 0 (Kafka's ``kafka.Kafka``, or ours) that coordinates every
transactional id and leads topic ``m``, and a broker 1 (ours on both sides: it only has to hold partition
``held-0`` and take markers) whose shutdown keeps a transaction in PrepareCommit/PrepareAbort. The same raw
request sequences (``tests/harness/txn_matrix.py``: every state from Unknown to Fenced, ~50 probes of
InitProducerId, AddPartitionsToTxn incl. v4/v5 verify_only, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, transactional
Produce v10/v11 to an unadded partition, DescribeTransactions, ListTransactions) run on both, and every decoded
error code, relative epoch and resulting transaction state must be equal. Values that must differ between two
brokers (producer ids, timestamps, throttle times, free-text error messages) never enter the comparison; the
allow-list below holds the differences that remain on purpose, each with its reason (compat-tests/FINDINGS.md).
"""
from __future__ import annotations

import json
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from broker.protocol.api import ApiKey
from tests.harness import txn_matrix as tm
from tests.harness.broker_process import BrokerProcess
from tests.harness.kafka import RealKafkaBroker
from tests.harness.waiting import wait_for

COMMON = {"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "5",
          "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
          "transaction.state.log.num.partitions": "5", "num.partitions": "1", "default.replication.factor": "1",
          "auto.create.topics.enable": "false", "auto.leader.rebalance.enable": "false",
          "group.initial.rebalance.delay.ms": "0", "zookeeper.session.timeout.ms": "6000",
          "controlled.shutdown.retry.backoff.ms": "500"}

#: (state or "*", probe) -> why this answer must differ from Kafka's. Keep it short: each entry is a finding.
ALLOWED_DIFFERENCES: Dict[Tuple[str, str], str] = {}

Key = Tuple[str, str]


def _create_topic(conn: tm.Conn, name: str, assignment: List[List[int]]) -> None:
    def created() -> bool:
        r = conn(ApiKey.CREATE_TOPICS, 5, {"topics": [{
            "name": name, "num_partitions": -1, "replication_factor": -1, "configs": [],
            "assignments": [{"partition_index": i, "broker_ids": b} for i, b in enumerate(assignment)]}],
            "timeout_ms": 30000, "validate_only": False})
        return r.topics[0].error_code in (0, 36)  # 36: TOPIC_ALREADY_EXISTS (a retry after a slow answer)
    wait_for(created, 60, f"topic {name} created")

    def led() -> bool:
        m = conn(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                       "allow_auto_topic_creation": False})
        ps = m.topics[0].partitions
        return m.topics[0].error_code == 0 and len(ps) == len(assignment) and all(
            p.leader_id == assignment[p.partition_index][0] for p in ps)
    wait_for(led, 60, f"topic {name} has its leaders")


def _leader(conn: tm.Conn, topic: str) -> int:
    m = conn(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                   "allow_auto_topic_creation": False})
    return int(m.topics[0].partitions[0].leader_id) if m.topics[0].partitions else -2


@contextmanager
def side(kind: str, workdir: Path, zookeeper: str) -> Iterator[Tuple[Any, BrokerProcess, tm.Conn]]:
    chroot = f"{zookeeper}/txm-{kind}-{uuid.uuid4().hex[:8]}"
    b0: Any = (RealKafkaBroker(workdir, chroot, 0, overrides=COMMON) if kind == "kafka"
               else BrokerProcess(workdir, chroot, broker_id=0, overrides=COMMON))
    b1 = BrokerProcess(workdir, chroot, broker_id=1, overrides=COMMON)
    conn = None
    try:
        b0.start(timeout=120)
        conn = tm.Conn(b0.bootstrap)
        _create_topic(conn, tm.TOPIC, [[0], [0]])
        # both internal topics are created while broker 0 is alone, so all their partitions are on it
        for key_type, key in ((1, "warm-up"), (0, "warm-up")):
            wait_for(lambda kt=key_type, k=key: conn(ApiKey.FIND_COORDINATOR, 3, {"key": k, "key_type": kt})
                     .error_code == 0, 60, f"coordinator of key type {key_type}")
        # Kafka answers COORDINATOR_LOAD_IN_PROGRESS to InitProducerId until its first producer-id block arrives
        # from the controller (ours waits for the block instead): fetch it before the matrix starts
        wait_for(lambda: tm.init_producer_id(conn, 4, None).error_code == 0, 60, "a first producer id")
        b1.start(timeout=120)
        _create_topic(conn, tm.HELD, [[1]])
        yield b0, b1, conn
    finally:
        if conn is not None:
            conn.close()
        for b in (b1, b0):
            try:
                b.stop()
            except Exception:
                b.kill()


def run_side(kind: str, workdir: Path, zookeeper: str) -> Dict[Key, tm.Row]:
    with side(kind, workdir, zookeeper) as (b0, b1, conn):
        rows = tm.run_states(conn, "tx", tuple(s for s in tm.STATES if s not in tm.PREPARE_STATES))

        def stop_b1() -> None:
            b1.stop()
            wait_for(lambda: _leader(conn, tm.HELD) == -1, 60, "held-0 without a leader")

        def start_b1() -> None:
            b1.start(timeout=120)
            wait_for(lambda: _leader(conn, tm.HELD) == 1, 60, "held-0 led by broker 1 again")

        rows.update(tm.run_prepared(conn, "tx", stop_b1, start_b1))
    for b in (b0, b1):  # stopped by now: shutdown included
        out = b.output()
        assert "Traceback" not in out, f"{kind} broker {b.broker_id}:\n{out[-6000:]}"
    return rows


@pytest.fixture(scope="module")
def matrices(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Dict[Key, tm.Row]]:
    started = time.monotonic()
    out = {kind: run_side(kind, Path(tmp_path_factory.mktemp(f"txm-{kind}")), zookeeper)
           for kind in ("kafka", "ours")}
    # the whole matrix, for reading side by side when something differs
    dump = Path(tmp_path_factory.getbasetemp()) / "txn-matrix.json"
    dump.write_text(json.dumps({kind: {f"{s} | {p}": r.as_dict() for (s, p), r in rows.items()}
                                for kind, rows in out.items()}, indent=1, default=str))
    print(f"matrix of {len(out['kafka'])} rows per side in {time.monotonic() - started:.0f}s: {dump}")
    return out


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, default=str))


def differences(matrices: Dict[str, Dict[Key, tm.Row]], state: str) -> List[str]:
    out = []
    for probe in tm.PROBES:
        if (state, probe) in ALLOWED_DIFFERENCES or ("*", probe) in ALLOWED_DIFFERENCES:
            continue
        k, o = (_jsonable(matrices[kind][(state, probe)].as_dict()) for kind in ("kafka", "ours"))
        if k != o:
            fields = {f: (k[f], o[f]) for f in k if k[f] != o[f]}
            out.append(f"{state} | {probe}: " + "; ".join(f"{f}: kafka={kv!r} ours={ov!r}"
                                                         for f, (kv, ov) in fields.items()))
    return out


@pytest.mark.parametrize("state", tm.STATES)
def test_same_answers_as_kafka(matrices: Dict[str, Dict[Key, tm.Row]], state: str) -> None:
    diffs = differences(matrices, state)
    assert not diffs, "\n".join(diffs)


def test_every_state_was_reached_on_both_brokers(matrices: Dict[str, Dict[Key, tm.Row]]) -> None:
    """The matrix means something only if each transactional id really was in its state when probed."""
    for kind, rows in matrices.items():
        for (state, probe), row in rows.items():
            if state == "Unknown":
                assert row.drive == [], (kind, probe)
                continue
            steps = dict(row.drive)
            assert steps["init"] == (0, 0), (kind, state, probe, row.drive)
            if state == "Empty":
                continue
            assert steps["add"] == {"partitions": {f"{tm.TOPIC}-0": 0, **(
                {f"{tm.HELD}-0": 0} if state in tm.PREPARE_STATES else {})}}, (kind, state, probe, row.drive)
            assert steps["produce"] == 0, (kind, state, probe, row.drive)
            if state in tm.PREPARE_STATES:
                assert steps["end"] == 0 and steps["describe"]["state"] == state, (kind, state, probe, row.drive)
                assert steps["describe"]["partitions"] == [f"{tm.HELD}-0"], (kind, state, probe, row.drive)
                assert row.final["state"] in ("CompleteCommit", "CompleteAbort"), (kind, state, probe, row.final)
            elif state in ("CompleteCommit", "CompleteAbort"):
                assert steps["end"] == 0 and steps["settled"]["state"] == state, (kind, state, probe, row.drive)
            elif state == "Fenced":
                codes, same_pid, bumped = steps["fence"]
                assert codes[-1] == 0 and same_pid and bumped == 2, (kind, probe, row.drive)
