"""Transactions with the stock Java client (kafka-clients 4.3.0) against a real broker process.

One JVM run executes the transaction scenarios of compat-tests/java/KafkaCompat.java (``txn-basic``,
``txn-abort``, ``txn-fence``, ``txn-ctp``); each test below checks one scenario's lines. The broker runs with
Kafka's single-broker quickstart overrides of the replicated internal topics. Checked: a transaction over three
partitions commits and read_committed sees exactly its records in order; aborted transactions stay hidden from
read_committed while read_uncommitted sees every record; a second producer with the same ``transactional.id``
fences the first (ProducerFencedException, its open transaction aborted); and consume-transform-produce with
``sendOffsetsToTransaction(offsets, groupMetadata)`` yields every input record exactly once, in order, with the
group's offsets committed at the input's end.
"""
from __future__ import annotations

import importlib.util
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.broker_process import BrokerProcess, running_broker

_spec = importlib.util.spec_from_file_location("compat_java_client", Path(__file__).parent / "test_java_client.py")
java_client = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(java_client)  # type: ignore[union-attr]
jars = java_client.jars
JavaRun = java_client.JavaRun

#: Kafka's quickstart overrides of the replicated internal-topic defaults, for one broker
SINGLE_BROKER = {"num.partitions": "3", "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1", "transaction.state.log.num.partitions": "8",
                 "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "8",
                 "group.initial.rebalance.delay.ms": "0"}
SCENARIOS = ["txn-basic", "txn-abort", "txn-fence", "txn-ctp"]


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("jtxn")), f"{zookeeper}/jtxn-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides=SINGLE_BROKER) as b:
        yield b


@pytest.fixture(scope="module")
def txn_run(broker: BrokerProcess) -> JavaRun:
    prefix = f"jtxn-{uuid.uuid4().hex[:6]}"
    try:
        cmd = jars.java_command(",".join(SCENARIOS), broker.bootstrap, prefix)
    except jars.JavaUnavailable as e:
        pytest.fail(f"Java client unavailable: {e}", pytrace=False)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=False)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"KafkaCompat did not finish in 400 s; stdout so far:\n{e.stdout}\n"
                    f"broker output (tail):\n{broker.output()[-5000:]}", pytrace=False)
    return JavaRun(cmd, proc, prefix)


def _values(ev: dict) -> dict[int, list[str]]:
    return {int(k): v for k, v in ev["values"].items()}


def test_java_transaction_over_three_partitions_commits(txn_run: JavaRun, broker: BrokerProcess) -> None:
    s = txn_run.scenario("txn-basic", broker)
    # initTransactions returned within max.block.ms (the bound); the cause checked: no request of the producer timed
    # out (the Java client closes a connection whose request times out), e.g. a FindCoordinator left unanswered
    init = s["initTransactions"][0]
    assert float(init["connection_close_total"]) == 0, init  # the harness writes numbers it cannot type as text
    sent = {int(p): [e["value"] for e in evs] for p, evs in s["committed"][0]["sent"].items()}
    assert sent == {p: [f"c-{i}" for i in range(p, 30, 3)] for p in range(3)}
    for p, evs in s["committed"][0]["sent"].items():
        assert [e["offset"] for e in evs] == list(range(10)), (p, evs)
    rc = s["readCommitted"][0]
    assert _values(rc) == sent
    # the commit marker sits at offset 10 of each partition: the LSO (read_committed end) is past it
    assert rc["end_offsets"] == {"0": 11, "1": 11, "2": 11}
    assert _values(s["readUncommitted"][0]) == sent


def test_java_aborted_transactions_are_hidden_from_read_committed(txn_run: JavaRun, broker: BrokerProcess) -> None:
    s = txn_run.scenario("txn-abort", broker)
    assert [r["committed"] for r in s["transactions"][0]["rounds"]] == [True, False, True, False, True]
    committed = {p: [f"r{r}-{i}" for r in (0, 2, 4) for i in range(p, 9, 3)] for p in range(3)}
    everything = {p: [f"r{r}-{i}" for r in range(5) for i in range(p, 9, 3)] for p in range(3)}
    rc = s["readCommitted"][0]
    assert _values(rc) == committed
    # five transactions of three records each per partition, each followed by its marker: 20 offsets
    assert rc["end_offsets"] == {"0": 20, "1": 20, "2": 20} and rc["positions"] == rc["end_offsets"]
    assert _values(s["readUncommitted"][0]) == everything


def test_java_second_producer_fences_the_first(txn_run: JavaRun, broker: BrokerProcess) -> None:
    s = txn_run.scenario("txn-fence", broker)
    first = s["firstCommit"][0]
    assert first["exception"] == "ProducerFencedException", first
    assert s["firstBeginAgain"][0]["exception"] is not None
    s["secondCommit"]
    assert _values(s["readCommitted"][0]) == {p: [f"live-{p}"] for p in range(3)}
    # the fenced producer's records are in the log, aborted by the coordinator when the second one initialised
    uncommitted = _values(s["readUncommitted"][0])
    assert {p: [v for v in vs if v.startswith("zombie-")] for p, vs in uncommitted.items()} == \
        {p: [f"zombie-{i}" for i in range(p, 6, 3)] for p in range(3)}


def test_java_consume_transform_produce_exactly_once(txn_run: JavaRun, broker: BrokerProcess) -> None:
    s = txn_run.scenario("txn-ctp", broker)
    proc = s["processed"][0]
    assert proc["processed"] == 300 and proc["aborted_copies"] > 0 and proc["rewinds"] > 0, proc
    inputs = _values(s["input"][0])
    assert sum(len(v) for v in inputs.values()) == 300
    # per partition, the committed output is the input transformed, each record once, in the input's order
    assert _values(s["readCommitted"][0]) == {p: [f"out-{v}" for v in vs] for p, vs in inputs.items()}
    assert sum(len(v) for v in _values(s["readUncommitted"][0]).values()) == 300 + proc["aborted_copies"]
    ends = s["input"][0]["end_offsets"]
    committed = s["groupOffsets"][0]["committed"]
    assert {p: o for p, o in committed.items()} == {p: e for p, e in ends.items() if e > 0}
