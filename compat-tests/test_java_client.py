"""The stock Java client (kafka-clients 4.3.0) against a real broker process.

One JVM run (JVM start-up is slow) executes every scenario of compat-tests/java/KafkaCompat.java; it prints one
JSON object per line and each test below checks one scenario's lines. The jars come from Maven Central
(compat-tests/java/jars.py); a missing JDK or download makes the tests fail, never skip.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import uuid
import zlib
from pathlib import Path
from typing import Dict, List

import pytest

_spec = importlib.util.spec_from_file_location("compat_java_jars", Path(__file__).parent / "java" / "jars.py")
jars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jars)  # type: ignore[union-attr]

CODECS = ["lz4", "none", "gzip", "snappy", "zstd"]
N_RECORDS = 2000  # KafkaCompat.N_RECORDS
ADMIN_BASE_TS = 1_700_000_000_000  # KafkaCompat.ADMIN_BASE_TS


class JavaRun:
    """The parsed output of one KafkaCompat run."""

    def __init__(self, cmd: List[str], proc: subprocess.CompletedProcess, prefix: str) -> None:
        self.cmd = cmd
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.prefix = prefix
        self.events: Dict[str, List[dict]] = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                ev = json.loads(line)
                self.events.setdefault(ev["scenario"], []).append(ev)

    def scenario(self, name: str, broker) -> "Scenario":
        """One scenario's events; fails with the Java error and the broker log if it stopped on an exception."""
        sc = Scenario(name, self.events.get(name, []), self, broker)
        done = sc.by_step.get("done", [])
        if not done:
            sc.fail(f"no 'done' line (java exit {self.returncode})")
        if "error" in done[0]:
            sc.fail(done[0]["error"])
        return sc


class Scenario:
    """Events of one scenario grouped by step. A step that raised in Java has an event with "error"."""

    def __init__(self, name: str, events: List[dict], run: JavaRun, broker) -> None:
        self.name, self.events, self.run, self.broker = name, events, run, broker
        self.by_step: Dict[str, List[dict]] = {}
        for e in events:
            self.by_step.setdefault(e["step"], []).append(e)

    def fail(self, why: str) -> None:
        events = "\n".join(json.dumps(e)[:600] for e in self.events)
        pytest.fail(f"Java scenario {self.name}: {why}\nevents:\n{events}"
                    + f"\njava stderr (tail):\n{self.run.stderr[-3000:]}"
                    + f"\nbroker output {self.broker.output_path} (tail):\n{self.broker.output()[-5000:]}",
                    pytrace=False)

    def __getitem__(self, step: str) -> List[dict]:
        evs = self.by_step.get(step, [])
        errors = [e for e in evs if "error" in e]
        if errors:
            self.fail(f"step {step} raised: " + "; ".join(json.dumps(e) for e in errors))
        if not evs:
            self.fail(f"step {step} printed nothing")
        return evs


@pytest.fixture(scope="module")
def java_run(broker) -> JavaRun:
    scenarios = ",".join(["admin"] + [f"produce-consume:{c}" for c in CODECS])
    prefix = f"java-{uuid.uuid4().hex[:6]}"
    try:
        cmd = jars.java_command(scenarios, broker.bootstrap, prefix)
    except jars.JavaUnavailable as e:
        pytest.fail(f"Java client unavailable: {e}", pytrace=False)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"KafkaCompat did not finish in 600 s; stdout so far:\n{e.stdout}\n"
                    f"broker output (tail):\n{broker.output()[-5000:]}", pytrace=False)
    return JavaRun(cmd, proc, prefix)


def test_java_toolchain_and_jars() -> None:
    """The helper provides kafka-clients 4.3.0 and its codec jars, and the harness compiles."""
    try:
        cp = jars.classpath()
    except jars.JavaUnavailable as e:
        pytest.fail(f"Java client unavailable: {e}", pytrace=False)
    names = [Path(p).name for p in cp.split(os.pathsep)]
    assert "kafka-clients-4.3.0.jar" in names
    for dep in ("lz4-java-", "snappy-java-", "zstd-jni-", "slf4j-api-"):
        assert any(n.startswith(dep) for n in names), (dep, names)
    assert (jars.BUILD_DIR / "KafkaCompat.class").is_file()


def test_java_admin(java_run: JavaRun, broker) -> None:
    s = java_run.scenario("admin", broker)
    topic = f"{java_run.prefix}-admin"
    assert s["createTopics"][0]["topic"] == topic

    dc = s["describeCluster"][0]
    assert isinstance(dc["clusterId"], str) and len(dc["clusterId"]) == 22
    assert dc["nodes"] == [{"id": 0, "host": "127.0.0.1", "port": broker.port}]
    assert dc["controller"] == 0
    assert topic in s["listTopics"][0]["names"]

    td = s["describeTopics"][0]
    assert td["name"] == topic and td["internal"] is False
    assert td["topicId"] not in (None, "AAAAAAAAAAAAAAAAAAAAAA")
    assert [p["partition"] for p in td["partitions"]] == [0, 1, 2]
    for p in td["partitions"]:
        assert (p["leader"], p["replicas"], p["isr"]) == (0, [0], [0])

    assert s["produce"][0]["offsets"] == list(range(10))
    lo = {(e["partition"], e["spec"]): e for e in s["listOffsets"]}
    b = ADMIN_BASE_TS

    def got(part: int, spec: str) -> tuple:
        e = lo[(part, spec)]
        return e["offset"], e["timestamp"], e["leaderEpoch"]

    assert got(0, "earliest") == (0, -1, 0)
    assert got(0, "latest") == (10, -1, 0)
    assert got(0, "forTimestamp(base+3500)") == (4, b + 4000, 0)
    assert got(0, "forTimestamp(base+4000)") == (4, b + 4000, 0)
    assert got(0, "forTimestamp(base-1)") == (0, b, 0)
    assert got(0, "forTimestamp(base+100000)")[:2] == (-1, -1)
    assert got(0, "maxTimestamp") == (9, b + 9000, 0)
    assert got(1, "latest")[0] == 0

    cfg = {e["resource"]: e["entries"] for e in s["describeConfigs"]}
    t = cfg["topic"]
    assert t["retention.ms"]["value"] == "3600000"
    assert t["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert t["cleanup.policy"]["value"] == "delete"
    assert t["segment.bytes"]["value"] == "1073741824"
    assert t["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    assert t["retention.ms"]["readOnly"] is False and t["retention.ms"]["sensitive"] is False
    br = cfg["broker"]
    assert br["log.segment.bytes"]["value"] == "1073741824"
    assert br["num.partitions"]["value"] == "3"
    assert br["num.partitions"]["source"] == "STATIC_BROKER_CONFIG"
    assert br["broker.id"]["value"] == "0"

    assert s["deleteTopics"][0]["gone"] is True


def test_java_create_existing_topic_is_refused(java_run: JavaRun, broker) -> None:
    """CreateTopics for an existing name answers TOPIC_ALREADY_EXISTS (Java: TopicExistsException)."""
    s = java_run.scenario("admin", broker)
    assert s["createTopicsAgain"][0]["exception"] == "TopicExistsException"


def _expected_crc(base_ts: int) -> int:
    """CRC32 of KafkaCompat.canonical() over all records, recomputed here from the deterministic data set."""
    crc = 0
    for i in range(N_RECORDS):
        value = "<null>" if i % 97 == 0 else f"value-{i}-" + "x" * (i % 50)
        headers = f"h1=v{i};empty=;" if i % 3 == 0 else ""
        crc = zlib.crc32(f"{i}|key-{i}|{value}|{headers}|{base_ts + i}\n".encode(), crc)
    return crc


@pytest.mark.parametrize("codec", CODECS)
def test_java_idempotent_produce_and_assign_seek_consume(java_run: JavaRun, broker, codec: str) -> None:
    s = java_run.scenario(f"produce-consume:{codec}", broker)
    prod = s["produce"][0]
    assert prod["codec"] == codec and prod["count"] == N_RECORDS
    per_partition = {int(k): v for k, v in prod["per_partition"].items()}
    assert sum(per_partition.values()) == N_RECORDS
    assert len(per_partition) == 3, "keyed records should hash to all three partitions"

    pos = s["positions"][0]["positions"]
    for p in range(3):
        assert pos[f"{p}:earliest"] == 0
        assert pos[f"{p}:latest"] == per_partition[p]

    c = s["consume"][0]
    assert c["samples"] == []
    assert (c["count"], c["missing"], c["mismatches"], c["duplicates"]) == (N_RECORDS, 0, 0, 0)
    assert c["dense"] is True
    assert {int(k): v for k, v in c["next_offsets"].items()} == per_partition
    assert c["crc32"] == _expected_crc(prod["base_ts"])

    mid = s["seekMiddle"][0]
    assert mid["first_offset"] == mid["requested"] == per_partition[0] // 2
    assert mid["first_key"] == mid["expected_key"]


def test_java_consumer_group_classic(broker) -> None:
    """KafkaConsumer with group.protocol=classic: join, disjoint assignment, commit, resume."""
    prefix = f"jg{uuid.uuid4().hex[:6]}"
    cmd = jars.java_command("group", broker.bootstrap, prefix)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    run = JavaRun(cmd, proc, prefix)
    sc = run.scenario("group", broker)
    a = sc.by_step["assignment"][0]
    assert (a["union"], a["overlap"]) == (6, 0) and a["c1"] > 0 and a["c2"] > 0, a
    c = sc.by_step["consumed"][0]
    assert (c["distinct"], c["duplicates"]) == (3000, 0), c
    r = sc.by_step["resume"][0]
    assert (r["new_records"], r["old_records"]) == (1000, 0), r
