"""The transaction files of this broker read by Apache Kafka 3.9.1's own decoders, and Kafka's read by this broker.

Forwards: stock transactional producers (confluent-kafka) commit, abort, get fenced and leave one transaction open on
our broker; Kafka's ``kafka.tools.DumpLogSegments`` then decodes every record of our ``__transaction_state`` segments
with ``--transaction-log-decoder`` (transactional id, producer id/epoch, state, partitions, timeout: the transitions
Kafka's coordinator logs for the same calls), prints our ``.txnindex`` entries, and shows our COMMIT/ABORT control
records (``--print-data-log``) with the producer epoch and coordinator epoch they must carry. Every expected value
is derived from what the clients did, never from the broker's own decoders.

Backwards: a real Kafka 3.9.1 broker runs committed, aborted and one still-open transaction and stops; our broker
starts on a copy of its log dir (same ZooKeeper chroot, same broker id), loads Kafka's ``__transaction_state``,
producer snapshots and ``.txnindex`` files, serves read_committed exactly (aborted records hidden by Kafka's index,
the LSO held by the open transaction), aborts the open transaction when a new producer of its id fences Kafka's,
and continues Kafka's producer epochs.
"""
from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey
from tests.harness.broker_process import BrokerProcess, running_broker
from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import call
from tests.harness.kafka import RealKafkaBroker
from tests.harness.kafka_dump import Dump, DumpedBatch, TxnLogEntry, dump_segments, txn_log_entries
from tests.harness.waiting import wait_for

SINGLE_BROKER = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0",
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
TXN_STATE_PARTITIONS = 50  # Kafka's default transaction.state.log.num.partitions, kept on both brokers


def java_hash(s: str) -> int:
    """Java's String.hashCode (written out here, independent of the broker's copy)."""
    h = 0
    for unit in (int.from_bytes(s.encode("utf-16-be")[i:i + 2], "big") for i in range(0, 2 * len(s), 2)):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def txn_partition(tid: str) -> int:
    h = java_hash(tid)
    return (0 if h == -(1 << 31) else abs(h)) % TXN_STATE_PARTITIONS


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(60)
    wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(name, timeout=5).topics[name].partitions.values()),
             30, f"{name} has leaders")


def producer(bootstrap: str, tid: str, timeout_ms: int) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": timeout_ms,
                     "linger.ms": 0})


def describe(bootstrap: str, tid: str) -> object:
    return call(bootstrap, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0]


def wait_state(bootstrap: str, tid: str, state: str, timeout_s: float = 30.0) -> object:
    return wait_for(lambda: (lambda d: d if d.error_code == 0 and d.transaction_state == state else None)(
        describe(bootstrap, tid)), timeout_s, f"{tid} in {state}")


def wait_group_coordinator(bootstrap: str, group: str) -> None:
    """FindCoordinator for ``group`` until it answers (creating ``__consumer_offsets`` on the first call)."""
    wait_for(lambda: call(bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}).error_code == 0,
             60, f"a coordinator for group {group}")


def produce_txn(p: Producer, topic: str, values: Sequence[Tuple[int, bytes]]) -> None:
    for part, v in values:
        p.produce(topic, value=v, partition=part)
    assert p.flush(20) == 0


def collapse(entries: Sequence[TxnLogEntry]) -> List[Tuple[str, int, Tuple[Tuple[str, int], ...], int]]:
    """(state, epoch, partitions, timeout) per transition, consecutive Ongoing records (one per
    AddPartitionsToTxn/AddOffsetsToTxn) folded into the last one, whose partitions must include the earlier ones'."""
    out: List[Tuple[str, int, Tuple[Tuple[str, int], ...], int]] = []
    for e in entries:
        assert e.state is not None and e.producer_epoch is not None and e.timeout_ms is not None, e
        row = (e.state, e.producer_epoch, e.partitions, e.timeout_ms)
        if out and out[-1][0] == "Ongoing" and e.state == "Ongoing":
            assert set(out[-1][2]) <= set(e.partitions), (out[-1], e)
            out[-1] = row
        else:
            out.append(row)
    return out


# ================================================================================================= forwards
class OurRun:
    """What the clients did on our broker, and the broker (still running, the open transaction still open)."""

    def __init__(self, broker: BrokerProcess, topic: str, group: str, tids: Dict[str, str], pids: Dict[str, int],
                 offsets_partition: int, started_ms: int) -> None:
        self.broker, self.topic, self.group, self.tids, self.pids = broker, topic, group, tids, pids
        self.offsets_partition, self.started_ms = offsets_partition, started_ms


@pytest.fixture(scope="module")
def ours(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OurRun]:
    with running_broker(Path(tmp_path_factory.mktemp("txnfiles")), f"{zookeeper}/txf-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides=SINGLE_BROKER) as b:
        started_ms = int(time.time() * 1000) - 1
        topic, group = f"files-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(b.bootstrap, topic, 2)
        s = uuid.uuid4().hex[:6]
        tids = {k: f"{k}-{s}" for k in ("commit", "abort", "open", "fenced")}

        commit = producer(b.bootstrap, tids["commit"], 41000)  # 1: committed, with the group's offsets
        commit.init_transactions(30)
        commit.begin_transaction()
        produce_txn(commit, topic, [(0, b"c0"), (1, b"c1"), (0, b"c2")])
        # librdkafka 2.16's send_offsets_to_transaction hangs past its timeout when FindCoordinator for the group
        # answers COORDINATOR_NOT_AVAILABLE three times (as both Kafka and we do while creating __consumer_offsets)
        wait_group_coordinator(b.bootstrap, group)
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
        commit.send_offsets_to_transaction([TopicPartition(topic, 0, 3)], consumer.consumer_group_metadata(), 30)
        consumer.close()
        commit.commit_transaction(30)

        abort = producer(b.bootstrap, tids["abort"], 42000)    # 2: aborted, nothing else open
        abort.init_transactions(30)
        abort.begin_transaction()
        produce_txn(abort, topic, [(0, b"a0"), (1, b"a1")])
        abort.abort_transaction(30)

        opened = producer(b.bootstrap, tids["open"], 900000)   # 3: left open to the end
        opened.init_transactions(30)
        opened.begin_transaction()
        produce_txn(opened, topic, [(0, b"o0"), (1, b"o1")])

        zombie = producer(b.bootstrap, tids["fenced"], 43000)  # 4: fenced by a second producer, so aborted
        zombie.init_transactions(30)
        zombie.begin_transaction()
        produce_txn(zombie, topic, [(0, b"z0"), (1, b"z1")])
        successor = producer(b.bootstrap, tids["fenced"], 44000)
        successor.init_transactions(30)

        pids = {}
        for k, state in (("commit", "CompleteCommit"), ("abort", "CompleteAbort"), ("open", "Ongoing"),
                         ("fenced", "Empty")):
            pids[k] = wait_state(b.bootstrap, tids[k], state).producer_id
        offsets_partition = java_hash(group)
        offsets_partition = (0 if offsets_partition == -(1 << 31) else abs(offsets_partition)) % 50
        yield OurRun(b, topic, group, tids, pids, offsets_partition, started_ms)
        del commit, abort, opened, zombie, successor


def _txn_log_dump(run: OurRun) -> Dump:
    files = sorted(f for f in run.broker.log_dir.glob("__transaction_state-*/*.log") if f.stat().st_size > 0)
    assert files, "no __transaction_state segment has data"
    return dump_segments(files, "--transaction-log-decoder")


def test_kafka_transaction_log_decoder_reads_every_record_we_wrote(ours: OurRun) -> None:
    dump = _txn_log_dump(ours)
    entries: List[TxnLogEntry] = []
    for f, batches in dump.batches.items():
        assert all(b.fields["isvalid"] == "true" and b.fields["compresscodec"] == "none" for b in batches), f
        assert sum(b.int("count") for b in batches) == sum(len(b.records) for b in batches), f
        assert all(not b.flag("isTransactional") and not b.flag("isControl") for b in batches), f
        found = txn_log_entries(batches)
        for e in found:  # each id lives in the partition of its Java hash, as Kafka routes it
            assert f.split("__transaction_state-")[1].split("/")[0] == str(txn_partition(e.transactional_id)), (f, e)
        entries.extend(found)
    now_ms = int(time.time() * 1000) + 1
    by_tid: Dict[str, List[TxnLogEntry]] = {}
    for e in entries:
        by_tid.setdefault(e.transactional_id, []).append(e)
    assert set(by_tid) == set(ours.tids.values()), sorted(by_tid)

    t, offsets_tp = ours.topic, ("__consumer_offsets", ours.offsets_partition)
    both = ((t, 0), (t, 1))
    expected = {
        "commit": [("Empty", 0, (), 41000), ("Ongoing", 0, tuple(sorted(both + (offsets_tp,))), 41000),
                   ("PrepareCommit", 0, tuple(sorted(both + (offsets_tp,))), 41000), ("CompleteCommit", 0, (), 41000)],
        "abort": [("Empty", 0, (), 42000), ("Ongoing", 0, both, 42000), ("PrepareAbort", 0, both, 42000),
                  ("CompleteAbort", 0, (), 42000)],
        "open": [("Empty", 0, (), 900000), ("Ongoing", 0, both, 900000)],
        # the second producer's InitProducerId fences: the open transaction is aborted under epoch 1, then its
        # retry bumps to epoch 2 with the new producer's timeout
        "fenced": [("Empty", 0, (), 43000), ("Ongoing", 0, both, 43000), ("PrepareAbort", 1, both, 43000),
                   ("CompleteAbort", 1, (), 43000), ("Empty", 2, (), 44000)],
    }
    for k, tid in ours.tids.items():
        mine = by_tid[tid]
        assert collapse(mine) == expected[k], (k, mine)
        assert {e.producer_id for e in mine} == {ours.pids[k]}, (k, mine)
        stamps = [e.last_update_ms for e in mine]
        assert stamps == sorted(stamps) and ours.started_ms <= stamps[0] and stamps[-1] <= now_ms, (k, mine)
        assert [e.offset for e in mine] == sorted(e.offset for e in mine)


def _data_dump(run: OurRun) -> Dump:
    files = [run.broker.log_dir / f"{run.topic}-{p}" / "00000000000000000000.log" for p in (0, 1)]
    return dump_segments(files, "--print-data-log")


def _leader_epoch(bootstrap: str, topic: str, partition: int) -> int:
    m = call(bootstrap, ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                               "allow_auto_topic_creation": False})
    return int(next(p.leader_epoch for p in m.topics[0].partitions if p.partition_index == partition))


def test_kafka_prints_our_control_records_with_the_coordinator_epoch(ours: OurRun) -> None:
    dump = _data_dump(ours)
    coord_epoch = {k: _leader_epoch(ours.broker.bootstrap, "__transaction_state", txn_partition(tid))
                   for k, tid in ours.tids.items()}
    kind = {pid: k for k, pid in ours.pids.items()}
    for f, batches in dump.batches.items():
        assert all(b.fields["isvalid"] == "true" for b in batches), f
        markers = [(kind[b.int("producerId")], b.int("producerEpoch"), r.fields["endTxnMarker"],
                    int(r.fields["coordinatorEpoch"])) for b in batches if b.flag("isControl") for r in b.records]
        assert markers == [("commit", 0, "COMMIT", coord_epoch["commit"]), ("abort", 0, "ABORT", coord_epoch["abort"]),
                           ("fenced", 1, "ABORT", coord_epoch["fenced"])], (f, markers)
        data = [(kind[b.int("producerId")], b.int("producerEpoch"), r.payload) for b in batches
                if not b.flag("isControl") for r in b.records]
        assert all(b.flag("isTransactional") for b in batches), f
        p = 0 if f.endswith(f"{ours.topic}-0/00000000000000000000.log") else 1
        values = {0: ["c0", "c2", "a0", "o0", "z0"], 1: ["c1", "a1", "o1", "z1"]}[p]
        assert data == [({"c": "commit", "a": "abort", "o": "open", "z": "fenced"}[v[0]], 0, v) for v in values], \
            (f, data)


def test_kafka_prints_our_aborted_transaction_index(ours: OurRun) -> None:
    data = _data_dump(ours)
    indexes = [ours.broker.log_dir / f"{ours.topic}-{p}" / "00000000000000000000.txnindex" for p in (0, 1)]
    dump = dump_segments(indexes)
    for p, index in enumerate(indexes):
        batches: List[DumpedBatch] = data.batches[str(index.with_suffix(".log"))]
        first: Dict[int, int] = {}
        aborts: Dict[int, int] = {}
        for b in batches:
            pid = b.int("producerId")
            if b.flag("isControl"):
                if b.records[0].fields["endTxnMarker"] == "ABORT":
                    aborts[pid] = b.int("baseOffset")
            else:
                first.setdefault(pid, b.int("baseOffset"))
        a, o, z = ours.pids["abort"], ours.pids["open"], ours.pids["fenced"]
        # the LSO once a marker is written: the first offset of another transaction still open, else marker + 1;
        # the first abort happened before the open transaction began, the second while it was open
        expected = [(0, a, first[a], aborts[a], aborts[a] + 1), (0, z, first[z], aborts[z], first[o])]
        assert dump.index_entries[str(index)] == expected, (p, dump.stdout)


# ================================================================================================= backwards
def test_our_broker_serves_a_kafka_log_dir_with_transactions(zookeeper: str, tmp_path: Path) -> None:
    chroot = f"{zookeeper}/k2o-{uuid.uuid4().hex[:10]}"
    kafka = RealKafkaBroker(tmp_path / "kafka", chroot, broker_id=0,
                            overrides={**SINGLE_BROKER, "num.partitions": "1"})
    topic = f"k2o-{uuid.uuid4().hex[:6]}"
    s = uuid.uuid4().hex[:6]
    tids = {k: f"k-{k}-{s}" for k in ("commit", "abort", "open", "later")}
    kafka.start()
    try:
        create_topic(kafka.bootstrap, topic, 2)
        committed: List[Tuple[int, bytes]] = []
        for k in ("commit", "abort", "open", "later"):
            p = producer(kafka.bootstrap, tids[k], 600000 if k == "open" else 60000)
            p.init_transactions(60)
            p.begin_transaction()
            values = [(i % 2, f"{k}-{i}".encode()) for i in range(6)]
            produce_txn(p, topic, values)
            if k in ("commit", "later"):
                p.commit_transaction(30)
                committed.extend(values)
            elif k == "abort":
                p.abort_transaction(30)
        # EndTxn answers once PrepareCommit/PrepareAbort is logged; Complete* follows the markers
        expected = {"commit": "CompleteCommit", "abort": "CompleteAbort", "open": "Ongoing", "later": "CompleteCommit"}
        before = {k: wait_state(kafka.bootstrap, tid, expected[k]) for k, tid in tids.items()}
        assert [before[k].transaction_state for k in ("commit", "abort", "open", "later")] == \
            ["CompleteCommit", "CompleteAbort", "Ongoing", "CompleteCommit"]
    finally:
        kafka.stop()
    assert "shut down completed" in kafka.output(), kafka.output()[-3000:]
    copy = tmp_path / "copied-logs"
    shutil.copytree(kafka.log_dir, copy)
    assert list(copy.glob(f"{topic}-0/*.txnindex")) and list(copy.glob("__transaction_state-*/*.log"))

    with running_broker(tmp_path / "ours", chroot, broker_id=0, log_dir=copy,
                        overrides=SINGLE_BROKER) as b:
        boot = b.bootstrap
        # the coordinator reloads Kafka's records: same producer ids, epochs and states (the open one too: its
        # timeout is far away)
        for k in ("commit", "abort", "later", "open"):
            d = wait_state(boot, tids[k], before[k].transaction_state, 60)
            assert (d.producer_id, d.producer_epoch) == (before[k].producer_id, before[k].producer_epoch), k
        everything = consume_from_start(boot, [(topic, 0), (topic, 1)], 24, 30, {"isolation.level": "read_uncommitted"})
        assert len(everything) == 24
        open_start = min(m.offset() for m in everything if m.partition() == 0 and m.value().startswith(b"open"))
        # the LSO is held by the open transaction: only the first committed transaction is readable
        lso = call(boot, ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert lso.topics[0].partitions[0].offset == open_start
        got = consume_from_start(boot, [(topic, 0), (topic, 1)], 7, 5, {"isolation.level": "read_committed"})
        assert sorted(m.value() for m in got) == sorted(v for _, v in committed if v.startswith(b"commit"))
        # Kafka's aborted-transaction index answers read_committed fetches
        fetched = call(boot, ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 1,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
        part = fetched.responses[0].partitions[0]
        assert part.error_code == 0 and part.last_stable_offset == open_start
        abort_start = min(m.offset() for m in everything if m.partition() == 0 and m.value().startswith(b"abort"))
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == \
            [(before["abort"].producer_id, abort_start)]

        # a new producer of the open transaction's id fences Kafka's producer: aborted under epoch + 1, then + 2
        fencer = producer(boot, tids["open"], 60000)
        fencer.init_transactions(60)
        d = describe(boot, tids["open"])
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == \
            ("Empty", before["open"].producer_id, before["open"].producer_epoch + 2)
        got = consume_from_start(boot, [(topic, 0), (topic, 1)], len(committed), 30,
                                 {"isolation.level": "read_committed"})
        for p in (0, 1):
            assert [m.value() for m in got if m.partition() == p] == [v for pp, v in committed if pp == p], p
        assert len(consume_from_start(boot, [(topic, 0), (topic, 1)], len(committed) + 1, 4,
                                      {"isolation.level": "read_committed"})) == len(committed)

        # a producer continues Kafka's epoch for its transactional id
        p = producer(boot, tids["commit"], 60000)
        p.init_transactions(60)
        d = describe(boot, tids["commit"])
        assert (d.producer_id, d.producer_epoch) == (before["commit"].producer_id, before["commit"].producer_epoch + 1)
        p.begin_transaction()
        produce_txn(p, topic, [(0, b"after-kafka")])
        p.commit_transaction(30)
        got = consume_from_start(boot, [(topic, 0)], 1 + sum(1 for pp, _ in committed if pp == 0), 30,
                                 {"isolation.level": "read_committed"})
        assert got[-1].value() == b"after-kafka"
        del fencer, p
