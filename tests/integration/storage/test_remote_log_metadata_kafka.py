"""Kafka 3.9.1's own code reads what this project writes for ``__remote_log_metadata``: RemoteLogMetadataSerde
decodes every kind of value and re-encodes it to the same bytes, RemoteLogMetadataTopicPartitioner picks the same
metadata partition, and DumpLogSegments ``--remote-log-metadata-decoder`` decodes a metadata partition segment
written by the project's Log with no ``Error at offset`` line."""
from __future__ import annotations

import random
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Dict, List, Optional

from broker.protocol.records.builder import build_batch
from broker.storage.config import LogConfig
from broker.storage.log import Log
from broker.remote_log import metadata_serde as serde
from broker.storage.remote.metadata import (
    RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
    RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition, random_uuid, uuid_to_string,
)
from broker.util.clock import ManualClock
from tests.harness.cluster_ops import run_kafka_tool
from tests.harness.kafka import java_program
from tests.harness.kafka_dump import dump_segments
from tests.integration.tools.kafka_tools import run_tool

CHECKER = Path(__file__).resolve().parents[2] / "harness" / "java" / "RemoteLogMetadataCheck.java"


def _kafka_check(args: List[str]) -> List[str]:
    java = shutil.which("java")
    assert java is not None, "java not found: run bash scripts/install.sh"
    r = subprocess.run([java, "-Dlog4j.configuration=file:/dev/null", *java_program(CHECKER), *args],
                       capture_output=True, text=True, timeout=180)
    lines = [ln for ln in r.stdout.splitlines() if ln.split(" ", 1)[0] in ("value", "partition", "murmur2", "error")]
    assert r.returncode == 0, f"Kafka's serde refused a value:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
    assert len(lines) == len(args), r.stdout
    return lines


def _samples(rnd: random.Random) -> List[serde.RemoteLogMetadata]:
    out: List[serde.RemoteLogMetadata] = []
    for i in range(40):
        tip = TopicIdPartition(random_uuid(), rnd.choice(["orders", "t", "a.b_c-d", "ünïcode"]), rnd.randrange(0, 1000))
        sid = RemoteLogSegmentId(tip, random_uuid())
        start = rnd.randrange(0, 2**40)
        epochs = {e: start + k * 10 for k, e in enumerate(sorted(rnd.sample(range(0, 100), rnd.randint(1, 4))))}
        state = RemoteLogSegmentState(i % 4)
        custom = rnd.randbytes(rnd.randint(0, 64)) if i % 3 == 0 else None
        out.append(RemoteLogSegmentMetadata(sid, start, start + rnd.randrange(0, 10**6), rnd.randrange(0, 2**42),
                                            rnd.randrange(0, 10), rnd.randrange(0, 2**42), rnd.randrange(0, 2**31),
                                            epochs, custom, state))
        out.append(RemoteLogSegmentMetadataUpdate(sid, rnd.randrange(0, 2**42), custom, state, rnd.randrange(0, 10)))
        out.append(RemotePartitionDeleteMetadata(tip, RemotePartitionDeleteState(i % 3), rnd.randrange(0, 2**42),
                                                 rnd.randrange(0, 10)))
    return out


def test_kafka_decodes_and_reencodes_byte_exact() -> None:
    values = [serde.serialize(md) for md in _samples(random.Random(405))]
    lines = _kafka_check([f"value:{v.hex()}" for v in values])
    for v, line in zip(values, lines):
        assert line.startswith("value "), line
        text, reserialized = line[len("value "):].rsplit(" reserialized:", 1)
        assert reserialized == v.hex(), f"Kafka re-encodes differently:\n{text}"
    seg = serde.deserialize(values[0])
    assert isinstance(seg, RemoteLogSegmentMetadata)
    first = lines[0]
    assert f"id={uuid_to_string(seg.remote_log_segment_id.id)}" in first
    assert f"startOffset={seg.start_offset}, endOffset={seg.end_offset}" in first
    assert f"state={seg.state.name}" in first
    assert "RemotePartitionDeleteMetadata{" in lines[2]


def test_metadata_partition_is_kafkas() -> None:
    rnd = random.Random(9)
    cases = [(uuid.UUID(int=rnd.getrandbits(128)), rnd.randrange(0, 5000), rnd.choice([1, 3, 7, 50, 100]))
             for _ in range(200)]
    lines = _kafka_check([f"partition:{uuid_to_string(t)}:{p}:{n}" for t, p, n in cases])
    for (t, p, n), line in zip(cases, lines):
        assert line == f"partition {serde.metadata_partition(TopicIdPartition(t, 't', p), n)}", (t, p, n)
    data = [rnd.randbytes(rnd.randint(0, 40)) for _ in range(50)]
    lines = _kafka_check([f"murmur2:{d.hex()}" for d in data])
    assert lines == [f"murmur2 {serde.murmur2(d)}" for d in data]


def test_dump_log_segments_decodes_a_metadata_partition(tmp_path: Path) -> None:
    values = [serde.serialize(md) for md in _samples(random.Random(3))]
    log = Log.open(str(tmp_path / "__remote_log_metadata-0"), LogConfig(), clock=ManualClock(1_700_000_000_000))
    for i in range(0, len(values), 7):
        log.append_as_leader(bytearray(build_batch([(None, v, [], 1_700_000_000_000) for v in values[i:i + 7]])), 0)
    log.flush()
    segment = Path(log.segments[0].path)
    log.close()
    dump = dump_segments([segment], "--remote-log-metadata-decoder")
    records = [r for b in next(iter(dump.batches.values())) for r in b.records]
    assert len(records) == len(values)
    assert "Error at offset" not in dump.stdout
    kinds: Dict[str, int] = {}
    for r in records:
        assert r.key is None and r.payload is not None
        kind = r.payload.split("{", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {"RemoteLogSegmentMetadata": 40, "RemoteLogSegmentMetadataUpdate": 40,
                     "RemotePartitionDeleteMetadata": 40}


def test_kafka_dump_log_prints_what_kafkas_tool_prints(tmp_path: Path) -> None:
    """bin/kafka-dump-log.sh --remote-log-metadata-decoder over a metadata partition segment the project's Log wrote
    (every kind of value, a value with custom metadata, a tombstone, values Kafka's serde refuses): the same stdout
    as Kafka 3.9.1's DumpLogSegments, byte for byte."""
    samples = _samples(random.Random(11))
    values: List[Optional[bytes]] = [serde.serialize(md) for md in samples[:30]]
    good = values[0]
    assert good is not None
    values += [None, b"\x00\x00\x00", b"\x01\x07\x00", b"\x01\x00\x05", good + b"\x00", b"\x02\x00\x00", good[:9]]
    log = Log.open(str(tmp_path / "__remote_log_metadata-0"), LogConfig(), clock=ManualClock(1_700_000_000_000))
    for i in range(0, len(values), 6):
        log.append_as_leader(bytearray(build_batch([(None, v, [], 1_700_000_000_000) for v in values[i:i + 6]])), 0)
    log.flush()
    segment = Path(log.segments[0].path)
    log.close()
    args = ["--remote-log-metadata-decoder", "--files", str(segment)]
    kafka = run_kafka_tool("kafka.tools.DumpLogSegments", args)
    ours = run_tool("dump-log", *args)
    assert kafka.returncode == 0, kafka.stderr[-3000:]
    assert kafka.stdout.count("Error at offset") == 7, kafka.stdout
    assert "customMetadata=Optional[CustomMetadata{" in kafka.stdout
    assert (ours.code, ours.stderr) == (0, ""), ours.stderr
    assert ours.lines() == kafka.stdout.splitlines()
