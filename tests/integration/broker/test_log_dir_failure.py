"""Log dir failure (KIP-112, JBOD) on one real broker (bin/kafka-server-start.sh, real ZooKeeper, confluent-kafka):

- two log dirs, one on a small tmpfs that fills under acks=all produce: the full dir goes offline (Kafka's log lines),
  the broker stays up, DescribeLogDirs reports KAFKA_STORAGE_ERROR for it, the other dir serves on and gets every new
  partition, the controller handled the /log_dir_event_notification znode; after a restart with space every
  acknowledged record of both dirs is readable, and nothing half-written is;
- the only log dir fills: the process halts with status 1 and its log has the ERROR line Kafka prints;
- the tmpfs turning read-only (EROFS) behaves as the full one;
- EIO (a failing disk) or EROFS on every write-side syscall on one dir's files of the *running* broker (injected
  with strace, tests/harness/syscall_faults.py) under an idempotent acks=all producer: the dir goes offline (one
  ERROR line naming it, Produce and Fetch answer KAFKA_STORAGE_ERROR, DescribeLogDirs reports it), the other dir
  serves on, and after a restart every acknowledged record is there exactly once.

The tmpfs is mounted by the test and strace attaches as root (as here and in CI); a mount or an attach that fails
fails the test.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Dict, List, Tuple

from confluent_kafka import Consumer, Producer, TopicPartition
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.harness.broker_process import ROOT, BrokerProcess
from tests.harness.clients import consume_from_start
from tests.harness.nemesis.nodes import group_pids
from tests.harness.syscall_faults import SyscallErrors, log_dir_paths
from tests.harness.tmpfs import all_logs, tmpfs
from tests.integration.broker.wire import RawClient

VALUE = 16 * 1024  # bytes per record: an 8 MiB tmpfs fills after a few hundred


def remount(path: Path, options: str) -> None:
    p = subprocess.run(["mount", "-o", f"remount,{options}", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, f"mount -o remount,{options} {path} failed: {p.stderr}"


def wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out ({timeout}s) waiting for {what}")


def log_dirs(b: BrokerProcess) -> Dict[str, dict]:
    """bin/kafka-log-dirs.sh --describe: {log dir: its JSON entry}."""
    p = subprocess.run([str(ROOT / "bin" / "kafka-log-dirs.sh"), "--bootstrap-server", b.bootstrap, "--describe"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    return {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}


def dir_of_partitions(b: BrokerProcess, topic: str) -> Dict[int, str]:
    out = {}
    for d, entry in log_dirs(b).items():
        for p in entry["partitions"]:
            t, _, i = p["partition"].rpartition("-")
            if t == topic:
                out[int(i)] = d
    return out


def create_topic(b: BrokerProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result(30)


class Filler:
    """acks=all produce of VALUE-byte records with confluent-kafka (no retries: a failed record is not acknowledged);
    remembers what was acknowledged per partition."""

    def __init__(self, b: BrokerProcess, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "retries": 0,
                                  "enable.idempotence": False, "message.timeout.ms": 15000, "linger.ms": 0,
                                  "max.in.flight.requests.per.connection": 1})
        self.acked: Dict[int, List[Tuple[int, bytes]]] = {}
        self.errors: Dict[int, List[str]] = {}
        self.n = 0

    def send(self, partition: int) -> None:
        self.n += 1
        value = (b"%08d:" % self.n) + b"x" * (VALUE - 9)

        def done(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is None:
                self.acked.setdefault(partition, []).append((msg.offset(), value[:9]))
            else:
                self.errors.setdefault(partition, []).append(err.name())

        self.producer.produce(self.topic, value=value, partition=partition, on_delivery=done)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0, "confluent-kafka still has undelivered records"


def read_prefixes(b: BrokerProcess, topic: str, partition: int, expected: int) -> List[Tuple[int, bytes]]:
    got = consume_from_start(b.bootstrap, [(topic, partition)], expected, timeout_s=30)
    return [(m.offset(), m.value()[:9]) for m in got]


def end_offset(b: BrokerProcess, topic: str, partition: int) -> int:
    """The partition's high watermark (ListOffsets latest) as confluent-kafka sees it."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"w-{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        c.close()


def stamp(line: str) -> datetime:
    return datetime.strptime(re.match(r"\[([^\]]+)\]", line).group(1), "%Y-%m-%d %H:%M:%S,%f")  # type: ignore


def first_line(text: str, needle: str) -> str:
    for line in text.splitlines():
        if needle in line:
            return line
    raise AssertionError(f"no line with {needle!r}")


def test_a_full_log_dir_goes_offline_and_the_broker_serves_on_with_the_other(tmp_path: Path, zk_chroot: str) -> None:
    big = tmp_path / "big"
    with tmpfs(tmp_path / "small", "8m") as small:
        b = BrokerProcess(tmp_path / "w", zk_chroot, overrides={"log.dirs": f"{big},{small}"})
        try:
            b.start()
            create_topic(b, "fill", 4)
            dirs = dir_of_partitions(b, "fill")
            in_small = sorted(p for p, d in dirs.items() if d == str(small))
            in_big = sorted(p for p, d in dirs.items() if d == str(big))
            assert in_small and in_big, dirs
            f = Filler(b, "fill")
            # fill: records to every partition, until a partition of the small dir fails
            for _ in range(2000):
                for p in in_small + in_big:
                    f.send(p)
                f.producer.poll(0)
                if any(f.errors.get(p) for p in in_small):
                    break
                f.producer.flush(0.05) if f.n % 40 == 0 else None
            f.flush()
            assert any(f.errors.get(p) for p in in_small), "the tmpfs never filled"
            wait_for(lambda: "Stopped serving replicas in dir %s" % small in b.output(), 20, "the dir offline")
            out = all_logs(b)
            for needle in ("No space left on device", "WARN Stopping serving replicas in dir %s" % small,
                           "stopped fetcher for partitions", "because they are in the failed log directory %s." % small,
                           "WARN Stopped serving replicas in dir %s" % small):
                assert needle in out, needle
            assert "Traceback" not in out
            assert b.is_alive(), "the broker must stay up with a live log dir left"
            first_error = first_line(b.output(), "No space left on device")
            stopped = first_line(b.output(), "Stopped serving replicas in dir")
            print("first ENOSPC -> Stopped serving replicas: %.0f ms" % (
                (stamp(stopped) - stamp(first_error)).total_seconds() * 1000))
            # the controller (this broker) consumed the log dir event notification and marked the replicas offline
            wait_for(lambda: "Handling log directory failure for brokers [0]" in all_logs(b), 20,
                     "the controller to handle the log dir event")
            wait_for(lambda: re.search(r"Mark replicas .* on broker 0 as offline", all_logs(b)) is not None, 20,
                     "the controller to mark the replicas offline")
            # DescribeLogDirs: KAFKA_STORAGE_ERROR for the full dir, no partitions
            described = log_dirs(b)
            assert described[str(small)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException" and \
                described[str(small)]["partitions"] == []
            assert described[str(big)]["error"] is None
            # the other dir serves on: produce there still succeeds, new partitions all go there
            before = {p: len(f.acked.get(p, [])) for p in in_big}
            for p in in_big:
                f.send(p)
            f.flush()
            assert all(len(f.acked.get(p, [])) == before[p] + 1 for p in in_big), f.errors
            create_topic(b, "after", 4)
            assert set(dir_of_partitions(b, "after").values()) == {str(big)}
            for p in in_big:
                assert read_prefixes(b, "fill", p, len(f.acked[p])) == f.acked[p]
            assert b.stop() == 0
            # space comes back (the data stays on the tmpfs): every acknowledged record is there, nothing half-written
            remount(small, "size=64m")
            b.start()
            wait_for(lambda: len(log_dirs(b)[str(small)]["partitions"]) == len(in_small), 30,
                     "the small dir's partitions back")
            for p in in_small + in_big:
                acked = f.acked.get(p, [])
                end = end_offset(b, "fill", p)
                assert end >= len(acked), "partition %d ends at %d below its %d acknowledged records" % (
                    p, end, len(acked))
                got = read_prefixes(b, "fill", p, end)
                assert [x for x in got if x in acked] == acked, "partition %d lost acknowledged records" % p
                assert [o for o, _ in got] == list(range(end)), "partition %d: not every record is readable" % p
            assert "Traceback" not in all_logs(b)
            assert b.stop() == 0
        finally:
            b.kill()


def test_the_only_log_dir_failing_halts_the_broker(tmp_path: Path, zk_chroot: str) -> None:
    with tmpfs(tmp_path / "only", "8m") as only:
        b = BrokerProcess(tmp_path / "w", zk_chroot, overrides={"log.dirs": str(only)})
        try:
            b.start()
            create_topic(b, "fill", 1)
            f = Filler(b, "fill")
            for _ in range(3000):
                f.send(0)
                f.producer.poll(0)
                if f.errors.get(0) or not b.is_alive():
                    break
                if f.n % 40 == 0:
                    f.producer.flush(0.05)
            wait_for(lambda: not b.is_alive(), 15, "the broker to halt")
            assert b.proc is not None and b.proc.returncode == 1
            out = b.output()
            assert "ERROR Shutdown broker because all log dirs in %s have failed" % only in out, out[-3000:]
            assert "Traceback" not in out
        finally:
            b.kill()


def test_a_log_dir_remounted_read_only_goes_offline(tmp_path: Path, zk_chroot: str) -> None:
    big = tmp_path / "big"
    with tmpfs(tmp_path / "small", "8m") as small:
        b = BrokerProcess(tmp_path / "w", zk_chroot, overrides={"log.dirs": f"{big},{small}",
                                                              "replica.high.watermark.checkpoint.interval.ms": "200"})
        try:
            b.start()
            create_topic(b, "ro", 2)
            dirs = dir_of_partitions(b, "ro")
            p_small = next(p for p, d in dirs.items() if d == str(small))
            p_big = next(p for p, d in dirs.items() if d == str(big))
            f = Filler(b, "ro")
            f.send(p_small)
            f.send(p_big)
            f.flush()
            assert len(f.acked.get(p_small, [])) == 1 and len(f.acked.get(p_big, [])) == 1
            # A tmpfs with files open for writing cannot be remounted read-only (EBUSY): the dir is replaced by a
            # read-only tmpfs (the old one detached), so every file the broker creates or replaces there (checkpoints
            # every 200 ms here, new segments) fails with EROFS from the kernel, as on a disk remounted read-only.
            subprocess.run(["umount", "-l", str(small)], check=True)
            p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(small)], capture_output=True,
                               text=True)
            assert p.returncode == 0, p.stderr
            wait_for(lambda: "Stopped serving replicas in dir %s" % small in b.output(), 20, "the dir offline")
            out = b.output()
            assert "Read-only file system" in out and "Traceback" not in out
            assert log_dirs(b)[str(small)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
            f.send(p_small)
            f.send(p_big)
            f.flush()
            assert len(f.acked[p_small]) == 1, "a write to the offline dir was acknowledged"
            assert len(f.acked[p_big]) == 2
            assert b.stop() == 0
        finally:
            b.kill()


def test_an_unusable_log_dir_at_start_up_starts_offline(tmp_path: Path, zk_chroot: str) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("not a directory\n")
    b = BrokerProcess(tmp_path / "w", zk_chroot, overrides={"log.dirs": f"{good},{bad}"})
    try:
        b.start()
        wait_for(lambda: "Stopped serving replicas in dir %s" % bad in b.output(), 20, "the dir offline")
        out = b.output()
        assert f"ERROR Failed to create or validate data directory {bad} (log.dirs): it is not a readable log " \
               f"directory (not a directory)" in out
        # the notification is written (the controller, starting after it, deletes it as Kafka's does at failover and
        # learns offline replicas from the LeaderAndIsr answers; this dir holds none)
        assert "Could not notify the controller" not in out
        described = log_dirs(b)
        assert described[str(bad)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
        create_topic(b, "t", 3)
        assert set(dir_of_partitions(b, "t").values()) == {str(good)}
        f = Filler(b, "t")
        f.send(0)
        f.flush()
        assert len(f.acked[0]) == 1
        assert "Traceback" not in all_logs(b)
        assert b.stop() == 0
    finally:
        b.kill()


ERRNO_TEXT = {"EIO": "Input/output error", "EROFS": "Read-only file system"}


@pytest.mark.parametrize("errno_name", ["EIO", "EROFS"])
def test_io_errors_on_a_running_brokers_log_dir_take_it_offline(tmp_path: Path, zk_chroot: str,
                                                               errno_name: str) -> None:
    """strace makes every write-side syscall on one dir's files fail (EIO: a dying disk; EROFS: the filesystem
    turned read-only under the running broker) while an idempotent acks=all producer runs on both dirs."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    b = BrokerProcess(tmp_path / "w", zk_chroot, overrides={"log.dirs": f"{good},{bad}"})
    try:
        b.start()
        create_topic(b, "io", 4)
        dirs = dir_of_partitions(b, "io")
        in_bad = sorted(p for p, d in dirs.items() if d == str(bad))
        in_good = sorted(p for p, d in dirs.items() if d == str(good))
        assert in_bad and in_good, dirs
        producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 8000})
        acked: Dict[bytes, Tuple[int, int]] = {}  # value -> (partition, offset)
        failed: Dict[int, List[str]] = {}
        n = 0

        def send(partition: int) -> None:
            nonlocal n
            n += 1

            def done(err, msg) -> None:  # type: ignore[no-untyped-def]
                if err is None:
                    acked[msg.value()] = (msg.partition(), msg.offset())
                else:
                    failed.setdefault(msg.partition(), []).append(err.name())

            producer.produce("io", value=b"v%07d" % n, partition=partition, on_delivery=done)

        for _ in range(50):
            for p in in_bad + in_good:
                send(p)
        assert producer.flush(30) == 0
        assert len(acked) == n, failed
        pids = group_pids(b.proc.pid)  # type: ignore[union-attr]
        with SyscallErrors(pids, log_dir_paths([bad]), errno_name) as faults:
            offline = "Stopped serving replicas in dir %s" % bad
            deadline = time.monotonic() + 20
            while offline not in b.output() and time.monotonic() < deadline:
                for p in in_bad + in_good:
                    send(p)
                producer.poll(0.02)
            assert offline in b.output(), "the dir did not go offline under %s (%d syscalls failed)" % (
                errno_name, faults.injected)
            assert faults.injected > 0
            out = b.output()
            errors = [line for line in out.splitlines() if " ERROR " in line and str(bad) in line]
            assert len(errors) == 1 and ERRNO_TEXT[errno_name] in errors[0], errors
            assert "Traceback" not in all_logs(b)
            assert b.is_alive(), "the broker must stay up with a live log dir left"
            described = log_dirs(b)
            assert described[str(bad)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException" and \
                described[str(bad)]["partitions"] == []
            assert described[str(good)]["error"] is None
            # the bad dir's partitions answer KAFKA_STORAGE_ERROR to Produce and Fetch
            with RawClient(b.bootstrap) as c:
                pr = c.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                    {"name": "io", "partition_data": [{"index": in_bad[0], "records": build_batch([(None, b"r")])}]}]})
                assert pr.responses[0].partition_responses[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
                fr = c.request(ApiKey.FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
                    {"topic": "io", "partitions": [{"partition": in_bad[0], "fetch_offset": 0,
                                                    "partition_max_bytes": 100000}]}]})
                assert fr.responses[0].partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
            # the good dir serves on
            before = len(acked)
            for _ in range(20):
                for p in in_good:
                    send(p)
            producer.flush(30)
            assert len(acked) >= before + 20 * len(in_good), failed
            assert {p for p, _ in acked.values()} >= set(in_good)
        assert b.stop() == 0
        # restarted without the faults: every acknowledged record is there exactly once, where it was acknowledged
        b.start()
        wait_for(lambda: len(log_dirs(b)[str(bad)]["partitions"]) == len(in_bad), 30, "the bad dir's partitions back")
        for p in in_bad + in_good:
            mine = sorted(o for q, o in acked.values() if q == p)
            end = end_offset(b, "io", p)
            got = consume_from_start(b.bootstrap, [("io", p)], end, timeout_s=30)
            assert [m.offset() for m in got] == list(range(end)), "partition %d: not every record is readable" % p
            values = [m.value() for m in got]
            assert len(values) == len(set(values)), "partition %d has a record twice" % p
            at = {m.value(): m.offset() for m in got}
            lost = [v for v, (q, o) in acked.items() if q == p and at.get(v) != o]
            assert not lost, "partition %d lost or moved %d acknowledged records (of %d)" % (p, len(lost), len(mine))
        print("%s: %d records acknowledged, %d syscalls failed, dir offline, %d acknowledged on the good dir after" % (
            errno_name, len(acked), faults.injected, len(acked) - before))
        faults.cleanup()
        assert "Traceback" not in all_logs(b)
        assert b.stop() == 0
    finally:
        b.kill()


def test_a_failed_directory_fsync_takes_the_dir_offline(tmp_path: Path, zk_chroot: str) -> None:
    """EIO on the fsync of the log dir itself only (after a checkpoint's rename, every 200 ms here): the rename may
    not be durable, so the dir goes offline as Kafka's Utils.flushDir failing takes it; no produce needed."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    b = BrokerProcess(tmp_path / "w", zk_chroot, overrides={"log.dirs": f"{good},{bad}",
                                                          "replica.high.watermark.checkpoint.interval.ms": "200"})
    try:
        b.start()
        create_topic(b, "idle", 2)
        assert sorted(dir_of_partitions(b, "idle").values()) == sorted([str(good), str(bad)])
        with SyscallErrors(group_pids(b.proc.pid), [bad], "EIO") as faults:  # type: ignore[union-attr]
            wait_for(lambda: "Stopped serving replicas in dir %s" % bad in b.output(), 20, "the dir offline")
        assert faults.injected > 0 and "fsync(" in faults.trace(), faults.trace()
        faults.cleanup()
        out = b.output()
        assert "ERROR Error while writing to highwatermark file in directory %s: [Errno 5] Input/output error" % bad \
            in out
        assert log_dirs(b)[str(bad)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
        assert "Traceback" not in all_logs(b)
        assert b.stop() == 0
    finally:
        b.kill()
