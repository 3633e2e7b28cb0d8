"""Log dir failure (KIP-112) in a real 3-broker cluster (broker processes from ``bin/``, the shared real ZooKeeper,
confluent-kafka), under idempotent acks=all production to a topic of replication factor 3, min.insync.replicas 2:

* the leader's log dir holding one partition fills (a tmpfs the test mounts, filled with ``dd``): that broker stays
  up and leads its partition of its other dir; the controller moves the failed partition's leadership to another
  ISR member and drops the broker from its ISR; the producer goes on getting acknowledgements there;
* the leader's only log dir fills: it halts with status 1, its session expires, leadership moves;

and in both, once space is back and the broker restarted, it rejoins every ISR, every acknowledged record is read
back exactly once in order, and the replicas' logs are byte-identical.

Placement is deterministic: before the topic exists, AlterReplicaLogDirs tells broker 0 which of its dirs each of
its replicas goes to (Kafka's preferred log dir, answered REPLICA_NOT_AVAILABLE / UNKNOWN_TOPIC_OR_PARTITION since
the replica does not exist yet); the topic is then created with an explicit assignment whose preferred leader of
partitions 0 and 1 is broker 0; DescribeLogDirs confirms where they landed.

The tmpfs is mounted by the test (root, as here and in CI); a mount that fails fails the test. Timings (fill ->
``Stopped serving replicas``, -> controller handling, -> new leader in metadata, -> first acknowledgement after the
move) are printed, not asserted (run with ``-s`` to see them).
"""
from __future__ import annotations

import re
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey
from tests.harness.faults import LoadStats, ProduceLoad, check_exactly_once, read_partitions, wait_replicas_identical
from tests.harness.tmpfs import all_logs, tmpfs
from tests.integration.cluster.conftest import wait_for
from tools.cli.protocol_client import ProtocolClient
from tools.cluster import LocalCluster

pytestmark = pytest.mark.slow

TOPIC = "ldf"
#: p0: led by broker 0 from its tmpfs dir; p1: led by broker 0 from its other dir; p2: led by broker 1
ASSIGNMENT = [[0, 1, 2], [0, 1, 2], [1, 2, 0]]
#: error codes of an AlterReplicaLogDirs for a replica not created yet (the dir is remembered as the preferred one)
NOT_YET = {3, 9}  # UNKNOWN_TOPIC_OR_PARTITION, REPLICA_NOT_AVAILABLE


def fill(path: Path) -> None:
    """Write zeros to ``path/filler`` until the file system is full (dd ends with ENOSPC)."""
    p = subprocess.run(["dd", "if=/dev/zero", f"of={path / 'filler'}", "bs=64k"], capture_output=True, text=True)
    assert "No space left on device" in p.stderr, f"dd did not fill {path}: {p.stderr}"


def line_time(text: str, pattern: str, after: float = 0.0) -> Optional[float]:
    """Epoch seconds of the first log line matching the regex ``pattern`` (its ``[yyyy-mm-dd hh:mm:ss,SSS]`` stamp)
    stamped at or after ``after`` (less 1 ms: the stamps have milliseconds)."""
    for line in text.splitlines():
        if re.search(pattern, line):
            m = re.match(r"\[([^\]]+)\]", line)
            if m:
                t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if t >= after - 0.001:
                    return t
    return None


def prefer_log_dirs(bootstrap: str, broker_id: int, dirs: Dict[int, str]) -> None:
    """AlterReplicaLogDirs to ``broker_id`` before the topic exists: partition -> the dir its replica is created in."""
    by_dir: Dict[str, List[int]] = {}
    for p, d in dirs.items():
        by_dir.setdefault(d, []).append(p)
    with ProtocolClient(bootstrap, retry_timeout_s=30) as pc:
        r = pc.send_to(broker_id, ApiKey.ALTER_REPLICA_LOG_DIRS, {
            "dirs": [{"path": d, "topics": [{"name": TOPIC, "partitions": ps}]} for d, ps in by_dir.items()]})
    codes = {p.partition_index: p.error_code for t in r.results for p in t.partitions}
    assert set(codes) == set(dirs) and set(codes.values()) <= NOT_YET, f"AlterReplicaLogDirs answered {codes}"


def replica_dirs(bootstrap: str, broker_id: int) -> Dict[int, Tuple[str, int]]:
    """DescribeLogDirs of ``broker_id``: partition of TOPIC -> (its dir, that dir's error code)."""
    with ProtocolClient(bootstrap, retry_timeout_s=30) as pc:
        r = pc.send_to(broker_id, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
    return {p.partition_index: (res.log_dir, res.error_code) for res in r.results for t in res.topics
            if t.name == TOPIC for p in t.partitions if not p.is_future_key}


def partitions(admin: AdminClient) -> Dict[int, Tuple[int, List[int]]]:
    """partition -> (leader, isr) of TOPIC from a Metadata request."""
    t = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    if t.error is not None:
        raise RuntimeError(str(t.error))
    return {p.id: (p.leader, sorted(p.isrs)) for p in t.partitions.values()}


def full_isr(admin: AdminClient) -> Optional[Dict[int, Tuple[int, List[int]]]]:
    parts = partitions(admin)
    return parts if len(parts) == 3 and all(l >= 0 and isr == [0, 1, 2] for l, isr in parts.values()) else None


def snapshot(load: ProduceLoad, parts: List[int]) -> LoadStats:
    """The acknowledgements so far of ``parts`` (each one's offset is below the high watermark from then on)."""
    s = LoadStats()
    for p in parts:
        s.acked[p] = load.acks_since(float("-inf"), p)
    return s


def run_scenario(new_cluster: Callable[..., Any], tmp_path: Path, only_dir: bool,
                 kafka: bool = False) -> Dict[str, float]:
    """The scenario on ``new_cluster(3, broker_overrides=..., start=False)`` (ours, or Kafka's for a comparison run
    by measure_log_dir_failure_kafka.py); returns the measured times (seconds from the fill)."""
    small = tmp_path / "b0-small"
    big = tmp_path / "b0-big"
    dirs0 = str(small) if only_dir else f"{big},{small}"
    extra_dirs = {i: {"log.dirs": f"{tmp_path / f'b{i}-a'},{tmp_path / f'b{i}-b'}"} for i in (1, 2)}
    with tmpfs(small, "4m"):
        c: LocalCluster = new_cluster(3, broker_overrides={0: {"log.dirs": dirs0}, **extra_dirs}, start=False)
        try:
            c.start()
            b0 = c.broker(0)
            others = ",".join(c.broker(i).bootstrap for i in (1, 2))
            view = AdminClient({"bootstrap.servers": others})
            # --- placement: broker 0's replica of p0 in the tmpfs, of p1 and p2 in its other dir (if it has one)
            wanted = {0: str(small), 1: str(small if only_dir else big), 2: str(small if only_dir else big)}
            prefer_log_dirs(c.bootstrap, 0, wanted)
            admin = AdminClient({"bootstrap.servers": c.bootstrap})
            admin.create_topics([NewTopic(TOPIC, len(ASSIGNMENT), replica_assignment=ASSIGNMENT,
                                          config={"min.insync.replicas": "2"})],
                                operation_timeout=30)[TOPIC].result(35)
            parts = wait_for(lambda: full_isr(view), 30, "the topic online with full ISRs")
            assert [parts[p][0] for p in range(3)] == [0, 0, 1], parts
            # (the ISR is full from creation on: broker 0 may not have created its replicas yet)
            placed = wait_for(lambda: (lambda r: r if len(r) == 3 else None)(replica_dirs(c.bootstrap, 0)), 30,
                              "broker 0's replicas of the topic")
            assert {p: d for p, (d, _) in placed.items()} == wanted, placed
            failed = [0, 1, 2] if only_dir else [0]  # the partitions whose replica on broker 0 goes offline
            moved = [p for p in failed if parts[p][0] == 0]  # ... and that broker 0 leads

            load = ProduceLoad(c.bootstrap, TOPIC, 3, extra={"max.in.flight.requests.per.connection": 1}).start()
            try:
                load.wait_acks(300, 60)
                # --- fill the tmpfs: the next append to p0 on broker 0 fails with ENOSPC
                wall0, mono0 = time.time(), time.monotonic()
                fill(small)
                t_fill = time.monotonic()
                to_mono = mono0 - wall0  # a wall-clock stamp (log line) + to_mono = monotonic
                if only_dir:
                    wait_for(lambda: not b0.is_alive(), 30, "broker 0 to halt", detail=lambda: b0.output()[-3000:])
                    assert b0.proc is not None and b0.proc.returncode == 1
                    # Kafka's fatal() comes out as ERROR through slf4j-reload4j; ours prints the same
                    assert f"ERROR Shutdown broker because all log dirs in {small} have failed" in b0.output(), \
                        b0.output()[-3000:]
                else:
                    wait_for(lambda: "Stopped serving replicas in dir %s" % small in b0.output(), 30,
                             "broker 0 to take the full dir offline", detail=lambda: b0.output()[-3000:])
                    assert b0.is_alive(), "broker 0 must stay up: it has a live log dir left"
                    assert "No space left on device" in b0.output()
                # --- the controller moves the leadership of the failed partitions; broker 0 leaves their ISR
                moved_parts = wait_for(lambda: (lambda ps: ps if all(ps[p][0] not in (-1, 0) and 0 not in ps[p][1]
                                                                     and len(ps[p][1]) == 2 for p in moved)
                                                else None)(partitions(view)),
                                       30, f"new leaders without broker 0 in the ISR for partitions {moved}",
                                       interval_s=0.05)
                t_leader = time.monotonic()
                if not only_dir:
                    # broker 0 keeps leading p1 (its other dir) and following p2, in both ISRs
                    assert moved_parts[1] == (0, [0, 1, 2]) and 0 in moved_parts[2][1], moved_parts
                # --- the producer gets acknowledgements for the moved partitions from their new leaders
                for p in moved:
                    load.wait_acks(20, 30, partition=p, since=t_leader)
                if not only_dir:
                    load.wait_acks(20, 30, partition=1, since=t_leader)  # broker 0 serves its other dir
                    assert b0.is_alive()
                # --- everything acknowledged so far is readable from the live leaders
                acked = snapshot(load, [0, 1, 2])
                check_exactly_once(acked, read_partitions(others if only_dir else c.bootstrap, TOPIC, [0, 1, 2]))
            finally:
                stats = load.stop()
            assert not stats.errors, f"{len(stats.errors)} delivery errors, first {stats.errors[:5]}"

            # --- measured times
            logs = {b.broker_id: all_logs(b) for b in c.brokers}
            t_stopped = line_time(logs[0], re.escape("Stopped serving replicas in dir %s" % small) if not only_dir
                                  else "Shutdown broker because all log dirs", after=wall0)
            # the controller's first line about broker 0's failure (after the fill: a controller elected because
            # broker 0 was the one that halted logs "successfully elected" then)
            # (Kafka prints the broker lists without brackets)
            needles = ([r"Handling log directory failure for brokers \[?0\]? "] if not only_dir
                       else [r"deleted brokers: \[?0\]?,", "successfully elected as the controller"])
            handled = [t for i, text in logs.items() for n in needles for t in [line_time(text, n, after=wall0)]
                       if t is not None]
            assert t_stopped is not None and handled, "no controller line for broker 0's failure"
            if not only_dir:
                assert any(re.search(r"Mark replicas \[?\(?'?%s'?(-|, )0\)?\]? on broker 0 as offline" % TOPIC, text)
                           for text in logs.values()), "the controller did not mark broker 0's replica offline"
            # acknowledged after the controller handled the failure: by a new leader (an answer the old leader sent
            # just before it stopped can arrive after its "Stopped serving"/halt line)
            first_ack = min(a.t for p in moved for a in stats.acked[p] if a.t > min(handled) + to_mono)
            times = {"stopped": t_stopped + to_mono - t_fill, "controller": min(handled) + to_mono - t_fill,
                     "leader": t_leader - t_fill, "first_ack": first_ack - t_fill}
            print(f"\n{'only dir' if only_dir else 'one of two dirs'}: fill -> "
                  f"{'halt' if only_dir else 'Stopped serving replicas'} {t_stopped + to_mono - t_fill:.2f}s, "
                  f"-> controller handling {min(handled) + to_mono - t_fill:.2f}s, "
                  f"-> new leader in metadata {t_leader - t_fill:.2f}s (polled), "
                  f"-> first ack after the move {first_ack - t_fill:.2f}s; {stats.produced} records")

            # --- space back, broker 0 restarted: it rejoins every ISR, the ledger holds, the replicas are identical
            if not only_dir:
                assert b0.stop() == (143 if kafka else 0)  # Kafka's JVM ends so on SIGTERM
            (small / "filler").unlink()
            subprocess.run(["mount", "-o", "remount,size=64m", str(small)], check=True)
            b0.start()
            wait_for(lambda: full_isr(view), 60, "broker 0 back in every ISR")
            where0 = {p: d for p, (d, _) in replica_dirs(c.bootstrap, 0).items()}
            assert where0 == wanted, where0
            where = {0: where0, **{i: {p: d for p, (d, _) in replica_dirs(c.bootstrap, i).items()} for i in (1, 2)}}
            for p in range(3):
                def replicas(p: int = p) -> Dict[int, Sequence[int]]:
                    return {p: ASSIGNMENT[p]} if full_isr(view) else {}
                wait_replicas_identical({i: Path(where[i][p]) for i in range(3)}, replicas, TOPIC, 60)
            log = read_partitions(c.bootstrap, TOPIC, range(3))
            checked = check_exactly_once(stats, log)
            assert checked == stats.produced == sum(len(v) for v in log.values()), (
                f"{stats.produced} produced, {checked} acknowledged and found, {sum(len(v) for v in log.values())} "
                f"in the log")
            return times
        finally:
            c.kill()


def test_a_full_log_dir_of_the_leader_moves_its_partitions(new_cluster: Callable[..., Any], tmp_path: Path
                                                            ) -> None:
    """One of broker 0's two log dirs fills: its partitions there get new leaders, the broker serves on."""
    run_scenario(new_cluster, tmp_path, only_dir=False)


def test_the_leader_whose_only_log_dir_fills_halts_and_rejoins(new_cluster: Callable[..., Any], tmp_path: Path
                                                               ) -> None:
    """Broker 0's only log dir fills: it halts (status 1), its session expires, leadership moves; it rejoins."""
    run_scenario(new_cluster, tmp_path, only_dir=True)
