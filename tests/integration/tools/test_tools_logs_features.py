"""kafka-dump-log, kafka-log-dirs and kafka-features judged by Apache Kafka 3.9.1's own tools.

kafka-dump-log: the same traffic is written by the project's broker and by a real Kafka 3.9.1 broker (each then
stopped cleanly), and Kafka's DumpLogSegments and ours dump the same files (segments, offset and time indexes,
producer snapshots, transaction indexes, ``__consumer_offsets`` and ``__transaction_state`` with their decoders)
with several option sets: stdout and stderr must be identical, nothing masked.
kafka-log-dirs and kafka-features: Kafka's tool and ours against the project's broker and against Kafka's must
print the same on one broker; across the brokers only the log dir path and partition sizes are masked.
"""
from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from tests.harness.broker_process import BrokerProcess, running_broker
from tests.harness.kafka import RealKafkaBroker
from tests.integration.tools.conftest import BROKER_SETTINGS
from tests.integration.tools.kafka_tools import (ToolRun, mask, run_kafka_batch, run_tool,
                                                 without_log_lines)
from tests.integration.tools.log_segments_data import (copy_log_dir, segment_files, write_legacy_segments,
                                                       write_traffic)

pytestmark = pytest.mark.slow

Command = Tuple[str, Sequence[str], Optional[str]]
DATA_PARTITIONS = ["plain-0", "gzip-0", "snappy-0", "lz4-0", "zstd-0", "txn-0", "multi-0", "multi-11"]
OFFSETS = [f"__consumer_offsets-{p}" for p in range(3)]
TXN_STATE = [f"__transaction_state-{p}" for p in range(3)]


def _compare(commands: Sequence[Command], ours: List[ToolRun], theirs: List[ToolRun]) -> None:
    assert len(ours) == len(theirs) == len(commands)
    for (tool, args, _), o, k in zip(commands, ours, theirs):
        what = f"kafka-{tool} {' '.join(args)}"
        assert (o.code, o.stdout) == (k.code, k.stdout), \
            f"{what}: stdout differs\nours:\n{o.stdout}\nKafka's:\n{k.stdout}\nour stderr: {o.stderr[-2000:]}"
        assert _stderr(o.stderr) == _stderr(k.stderr), \
            f"{what}: stderr differs\nours: {o.stderr!r}\nKafka's: {k.stderr!r}"


def _stderr(text: str) -> str:
    """stderr without log4j lines and without a Java stack trace's frames (the one normalisation: where Kafka's
    tool dies of an exception, ours prints the exception's line as the JVM does, ``Exception in thread "main"``
    first, which the tool batch, catching it, leaves out; the JVM's frames are left out)."""
    lines = [line for line in without_log_lines(text).splitlines()
             if not line.startswith("\tat ") and not line.startswith("Caused by") and not line.startswith("\t...")]
    return "\n".join(line.replace('Exception in thread "main" ', "", 1) for line in lines).strip()


def _both(commands: Sequence[Command]) -> Tuple[List[ToolRun], List[ToolRun]]:
    theirs = run_kafka_batch(commands)
    ours = [run_tool(tool, *args, input=stdin) for tool, args, stdin in commands]
    return ours, theirs


# ------------------------------------------------------------------------------------------------ kafka-dump-log
@pytest.fixture(scope="module")
def written_logs(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """{"project": log dir copy, "kafka": log dir copy}: the same traffic written by each broker, then stopped."""
    base = Path(tmp_path_factory.mktemp("dumplog"))
    out: Dict[str, Path] = {}
    with running_broker(base / "ours", f"{zookeeper}/dump-{uuid.uuid4().hex[:8]}", broker_id=0,
                        overrides=dict(BROKER_SETTINGS)) as b:
        write_traffic(b.bootstrap)
        ours_dir = b.log_dir
    out["project"] = copy_log_dir(ours_dir, base / "project-logs")
    k = RealKafkaBroker(base / "kafka", f"{zookeeper}/dumpk-{uuid.uuid4().hex[:8]}", 0,
                        overrides=dict(BROKER_SETTINGS))
    try:
        k.start()
        write_traffic(k.bootstrap)
    finally:
        assert k.stop() in (0, 143), "Kafka did not stop cleanly"
    out["kafka"] = copy_log_dir(k.log_dir, base / "kafka-logs")
    return out


def _damaged_copies(log_dir: Path) -> str:
    """Copies of plain-0's segment, damaged: a batch's stored CRC changed (Kafka prints isvalid: false and still
    reads the records), a torn tail shorter than a batch header (reported), then zeros past a header (Kafka's
    tool dies of a CorruptRecordException after the batches before it); damaged producer snapshots first (each
    reported on stderr) and damaged indexes."""
    data = bytearray((log_dir / "plain-0" / "00000000000000000000.log").read_bytes())
    out = log_dir / "damaged-0"
    out.mkdir(exist_ok=True)
    bad_crc = bytearray(data)
    bad_crc[17] ^= 0x5A
    (out / "00000000000000000000.log").write_bytes(bytes(bad_crc))
    (out / "00000000000000000001.log").write_bytes(bytes(data) + b"\x00" * 10)
    (out / "00000000000000000002.log").write_bytes(bytes(data) + b"\x00" * 30)
    logs = [out / f"0000000000000000000{i}.log" for i in range(3)]
    files: List[Path] = []
    # producer snapshots: a changed byte (CRC), another version, torn in an entry and in the header
    snapshot = next((log_dir / "txn-0").glob("*.snapshot")).read_bytes()
    changed = bytearray(snapshot)
    changed[20] ^= 1
    version = bytearray(snapshot)
    version[1] = 2
    for i, damaged in enumerate((bytes(changed), bytes(version), snapshot[:-30], snapshot[:4])):
        files.append(out / f"0000000000000000000{i}.snapshot")
        files[-1].write_bytes(damaged)
    # indexes: two offset entries pointing at the wrong batch; time entries with another timestamp, one out of
    # order, one past the log (each reported on stderr, as Kafka sums them up)
    index = bytearray((log_dir / "plain-0" / "00000000000000000000.index").read_bytes())
    assert len(index) >= 32, "plain-0 has too few index entries"
    struct.pack_into(">i", index, 8, struct.unpack_from(">i", index, 8)[0] + 1)
    struct.pack_into(">i", index, 28, struct.unpack_from(">i", index, 20)[0])
    times = bytearray((log_dir / "plain-0" / "00000000000000000000.timeindex").read_bytes())
    assert len(times) >= 48, "plain-0 has too few time index entries"
    struct.pack_into(">q", times, 12, struct.unpack_from(">q", times, 12)[0] + 7)
    struct.pack_into(">q", times, 36, struct.unpack_from(">q", times, 0)[0] - 5)
    struct.pack_into(">i", times, len(times) - 4, 9)
    for name, content in (("00000000000000000000.index", index), ("00000000000000000000.timeindex", times)):
        files.append(out / name)
        files[-1].write_bytes(bytes(content))
    return ",".join(str(f) for f in files + logs)


def _files(log_dir: Path, partitions: List[str], suffixes: Sequence[str] = ()) -> str:
    files = [f for f in segment_files(log_dir, partitions) if not suffixes or f.suffix in suffixes]
    assert files, f"no files in {log_dir} for {partitions}"
    return ",".join(str(f) for f in files)


@pytest.mark.parametrize("writer", ["project", "kafka"])
def test_dump_log_prints_what_kafka_prints(written_logs: Dict[str, Path], writer: str) -> None:
    d = written_logs[writer]
    every = _files(d, DATA_PARTITIONS)
    logs = _files(d, DATA_PARTITIONS, (".log",))
    offsets_logs = _files(d, OFFSETS, (".log",))
    txn_logs = _files(d, TXN_STATE, (".log",))
    # the traffic must really be there, or the comparisons below prove little
    txn_files = _files(d, ["txn-0"])
    assert ".txnindex" in txn_files and ".snapshot" in txn_files
    damaged = _damaged_copies(d)
    legacy = ",".join(str(f) for f in write_legacy_segments(d / "legacy-0"))
    damaged_indexes = ",".join(f for f in damaged.split(",") if f.endswith(("index", ".snapshot")))
    commands: List[Command] = [
        ("dump-log", ["--files", every], None),
        ("dump-log", ["--files", damaged, "--print-data-log"], None),
        ("dump-log", ["--files", damaged_indexes], None),
        ("dump-log", ["--files", damaged_indexes, "--verify-index-only"], None),
        ("dump-log", ["--files", legacy], None),
        ("dump-log", ["--files", legacy, "--print-data-log"], None),
        ("dump-log", ["--files", legacy, "--deep-iteration", "--skip-record-metadata"], None),
        ("dump-log", ["--files", every, "--deep-iteration"], None),
        ("dump-log", ["--files", every, "--print-data-log"], None),
        ("dump-log", ["--files", logs, "--print-data-log", "--skip-record-metadata"], None),
        ("dump-log", ["--files", logs, "--deep-iteration", "--skip-record-metadata"], None),
        ("dump-log", ["--files", every, "--verify-index-only"], None),
        ("dump-log", ["--files", every, "--index-sanity-check"], None),
        ("dump-log", ["--files", logs, "--max-bytes", "300", "--deep-iteration"], None),
        ("dump-log", ["--files", every, "--max-message-size", "100"], None),
        ("dump-log", ["--files", logs, "--value-decoder-class", "kafka.serializer.StringDecoder",
                      "--key-decoder-class"], None),
        ("dump-log", ["--files", offsets_logs, "--offsets-decoder"], None),
        ("dump-log", ["--files", txn_logs, "--transaction-log-decoder"], None),
        ("dump-log", ["--files", offsets_logs + "," + txn_logs, "--offsets-decoder"], None),
        ("dump-log", ["--files", offsets_logs + "," + txn_logs, "--transaction-log-decoder"], None),
        ("dump-log", ["--files", str(d / "meta.properties")], None),
        # Kafka's tool dies of these; ours prints the same first line and exits 1 too
        ("dump-log", ["--files", logs, "--offsets-decoder"], None),
        ("dump-log", ["--files", logs, "--transaction-log-decoder"], None),
        ("dump-log", ["--files", _files(d, ["gzip-0"], (".log",)), "--key-decoder-class",
                      "org.apache.kafka.tools.api.IntegerDecoder"], None),
        ("dump-log", ["--files", f"{d}/nosuch-0/00000000000000000000.log"], None),
        ("dump-log", ["--files", f"{d}/nosuch-0/00000000000000000000.index"], None),
        ("dump-log", ["--files", f"{d}/nosuch-0/00000000000000000000.txnindex"], None),
        ("dump-log", ["--files", f"{d}/nosuch-0/00000000000000000007.snapshot"], None),
        ("dump-log", ["--files", f"{d}/noextension"], None),
    ]
    ours, theirs = _both(commands)
    _compare(commands, ours, theirs)
    # the traffic is really in what was compared
    def output(*args: str) -> str:
        return next(k.stdout for (_, a, _), k in zip(commands, theirs) if list(a) == list(args))

    printed = output("--files", every, "--print-data-log")
    assert "endTxnMarker: ABORT" in printed and "compresscodec: zstd" in printed and "headerKeys: [h1,h2]" in printed
    assert '"protocolType":"consumer"' in output("--files", offsets_logs, "--offsets-decoder")
    assert "state=CompleteCommit" in output("--files", txn_logs, "--transaction-log-decoder")
    assert "isvalid: false" in output("--files", damaged, "--print-data-log")
    assert "Previously indexed timestamp" in next(k.stderr for (_, a, _), k in zip(commands, theirs)
                                                  if list(a) == ["--files", damaged_indexes])
    assert "compresscodec: snappy" in output("--files", legacy, "--print-data-log")


def test_dump_log_options_and_refusals() -> None:
    """Kafka's option list; the KRaft and tiered-storage decoders are refused with a reason."""
    ours = run_tool("dump-log", "--help")
    theirs = run_kafka_batch([("dump-log", ["--help"], None)])[0]
    assert ours.code == theirs.code == 1
    assert ours.stderr.splitlines()[0] == without_log_lines(theirs.stderr).splitlines()[0]
    assert _option_names(ours.stderr) == _option_names(theirs.stderr)
    missing = run_tool("dump-log")
    assert missing.code == 1 and missing.stderr.startswith('Missing required argument "[files]"')
    r = run_tool("dump-log", "--files", "/nonexistent.log", "--cluster-metadata-decoder")
    assert r.code == 1 and "not supported by this broker's tools" in r.stderr, r.stderr
    r = run_tool("dump-log", "--files", "/nonexistent.log", "--value-decoder-class", "com.example.Custom")
    assert r.code == 1 and "com.example.Custom is not supported" in r.stderr, r.stderr


def _option_names(text: str) -> set:
    import re
    return set(re.findall(r"^\s*(--[a-z][a-z0-9.\-]*)", text, re.M))


# ------------------------------------------------------------------------------------------------ kafka-log-dirs
_LOG_DIRS_MASKS = ((r'"logDir":"[^"]*"', '"logDir":"<dir>"'), (r'"size":\d+', '"size":<n>'))


def _partitions_sorted(text: str) -> str:
    """The partition entries sorted: Kafka's tool lists them in HashMap order, whose ties follow the order the
    broker answered in, and the two brokers list a log dir's topics in different orders (both valid)."""
    import json
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            for b in doc["brokers"]:
                for d in b["logDirs"]:
                    d["partitions"].sort(key=lambda p: p["partition"])
            line = json.dumps(doc, separators=(",", ":"))
        out.append(line)
    return "\n".join(out)


def _topics(bootstrap: str, prefix: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(f"{prefix}-a", 3, 1), NewTopic(f"{prefix}-b", 2, 1),
                                  NewTopic(f"{prefix}-other", 1, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(12):
        p.produce(f"{prefix}-a", value=b"x" * i, partition=i % 3)
    p.flush(30)


def test_log_dirs_prints_what_kafka_prints(broker: BrokerProcess, kafka: RealKafkaBroker) -> None:
    prefix = f"ld{uuid.uuid4().hex[:6]}"
    seen: Dict[str, List[ToolRun]] = {}
    for where, bs in (("project", broker.bootstrap), ("kafka", kafka.bootstrap)):
        _topics(bs, prefix)
        commands: List[Command] = [
            ("log-dirs", ["--bootstrap-server", bs, "--describe"], None),
            ("log-dirs", ["--bootstrap-server", bs, "--describe", "--topic-list", f"{prefix}-a,{prefix}-b"], None),
            ("log-dirs", ["--bootstrap-server", bs, "--describe", "--broker-list", "0",
                          "--topic-list", f"{prefix}-b"], None),
            ("log-dirs", ["--bootstrap-server", bs, "--describe", "--broker-list", "0,5,3"], None),
            ("log-dirs", ["--bootstrap-server", bs, "--describe", "--topic-list", "nosuch"], None),
            ("log-dirs", ["--bootstrap-server", bs], None),
        ]
        ours, theirs = _both(commands)
        _compare(commands, ours, theirs)
        assert f'"partition":"{prefix}-a-2"' in theirs[1].stdout
        seen[where] = theirs
    # across brokers only the topic-filtered answers: the internal topics present depend on what else ran
    for i, (p, k) in list(enumerate(zip(seen["project"], seen["kafka"])))[1:]:
        assert (p.code, mask(_partitions_sorted(p.stdout), *_LOG_DIRS_MASKS)) == \
            (k.code, mask(_partitions_sorted(k.stdout), *_LOG_DIRS_MASKS)), \
            f"log-dirs command {i}: Kafka's tool prints another answer against the project's broker"
    ours_help, theirs_help = run_tool("log-dirs", "--help"), run_kafka_batch([("log-dirs", ["--help"], None)])[0]
    assert ours_help.code == theirs_help.code == 1
    assert _option_names(ours_help.stderr) == _option_names(theirs_help.stderr)


# ------------------------------------------------------------------------------------------------ kafka-features
def _kafka_alone(args: Sequence[str]) -> ToolRun:
    """Kafka's FeatureCommand in a JVM of its own."""
    import shutil
    import subprocess

    from tests.harness.kafka import kafka_classpath

    java = shutil.which("java")
    assert java is not None, "java not found"
    r = subprocess.run([java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dlog4j.configuration=file:/dev/null",
                        "-cp", kafka_classpath(), "org.apache.kafka.tools.FeatureCommand", *args],
                       capture_output=True, text=True, timeout=120)
    return ToolRun(r.returncode, r.stdout, "\n".join(line for line in r.stderr.splitlines()
                                                      if not line.startswith("log4j:")))


def test_features_prints_what_kafka_prints(broker: BrokerProcess, kafka: RealKafkaBroker) -> None:
    seen: Dict[str, List[ToolRun]] = {}
    for where, bs in (("project", broker.bootstrap), ("kafka", kafka.bootstrap)):
        b = ["--bootstrap-server", bs]
        commands: List[Command] = [
            ("features", b + ["describe"], None),
            ("features", b + ["upgrade", "--feature", "metadata.version=5", "--dry-run"], None),
            ("features", b + ["upgrade", "--metadata", "3.9-IV0"], None),
            ("features", b + ["upgrade", "--metadata", "3.3", "--dry-run"], None),
            ("features", b + ["upgrade", "--metadata", "9.9"], None),
            ("features", b + ["downgrade", "--unsafe", "--feature", "a.b=1", "--feature", "c=0"], None),
            ("features", b + ["disable", "--feature", "foo", "--dry-run"], None),
            ("features", b + ["upgrade"], None),
            ("features", b + ["upgrade", "--feature", "x"], None),
            ("features", b + ["upgrade", "--feature", "x=1", "--feature", "x=2"], None),
            ("features", b + ["upgrade", "--feature", "x=70000"], None),
        ]
        #: argparse4j's parseArgsOrFail calls System.exit itself (help, usage errors): one JVM each
        alone: List[Command] = [
            ("features", ["describe"], None),
            ("features", b, None),
            ("features", b + ["--help"], None),
            ("features", b + ["downgrade", "--help"], None),
        ]
        ours, theirs = _both(commands)
        _compare(commands, ours, theirs)
        _compare(alone, [run_tool(t, *a) for t, a, _ in alone], [_kafka_alone(a) for _, a, _ in alone])
        assert "not supported" in theirs[1].stdout
        seen[where] = theirs
    for i, (p, k) in enumerate(zip(seen["project"], seen["kafka"])):
        assert (p.code, p.stdout, without_log_lines(p.stderr)) == (k.code, k.stdout, without_log_lines(k.stderr)), \
            f"features command {i}: Kafka's tool prints another answer against the project's broker"
