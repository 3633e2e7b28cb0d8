"""Every tool in ``bin/`` works after the one quickstart install, with nothing from the test install.

The checkout's sources (``git ls-files``, untracked files not ignored included) are copied to a temporary directory
without ``.venv`` and ``.cache``; ``bash scripts/install.sh`` builds the copy's ``.venv`` from requirements.txt
alone, exactly as the quickstart does (pip's download cache keeps that to seconds; the Cython extensions, their
generated C and the build directory are copied with their times, so the install's build step finds them up to
date). The copy's own ``bin/zookeeper-server-start.sh`` and ``bin/kafka-server-start.sh`` then start ZooKeeper and a
broker, and each script of the copy's ``bin/`` runs once with a small meaningful command against them, in a clean
environment (no PYTHONPATH, no virtualenv, the checkout's ``.venv/bin`` off PATH). Each must exit as expected,
print what it should, and never print a traceback or ``ModuleNotFoundError``. The test fails (never skips) when
something it needs is missing.

``bin/pipeline.sh`` runs ``scripts/install-pipeline.sh`` (pyspark, ~300 MB, and Spark's Kafka connector from
Maven Central), which is beyond this test's budget: in the copy that script is a no-op, and the pipeline's
``generate`` (confluent-kafka only, no Spark) runs through ``bin/pipeline.sh`` against the broker.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

import pytest

from tests.harness.zookeeper import four_letter_word, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: what a fresh clone does not have: the checkout's installs
NOT_COPIED = (".venv", ".cache")
#: environment variables that would make the copy's tools run from the checkout or log into it
CHECKOUT_VARIABLES = ("PYTHONPATH", "VIRTUAL_ENV", "LOG_DIR", "BROKER_LOG_DIR", "BROKER_LOG_CONFIG", "BROKER_PROG",
                      "BROKER_NO_EXTENSIONS", "PYTHONHOME", "PYTHONSTARTUP", "KAFKA_OPTS", "KAFKA_LOG4J_OPTS")
#: packages only the test install (requirements-test.txt) brings: none may be in the fresh .venv
TEST_ONLY = ("pytest", "hypothesis", "psutil", "kafka", "ruff")
#: every line of every tool's output is checked for these
FORBIDDEN = ("Traceback", "ModuleNotFoundError", "ImportError")


def checkout_files() -> List[str]:
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, f"git ls-files failed (the test needs the checkout's git): {r.stderr.decode()}"
    names = [n for n in r.stdout.decode().split("\0") if n]
    assert "scripts/install.sh" in names and "bin/kafka-topics.sh" in names, names[:20]
    return [n for n in names if n.split("/", 1)[0] not in NOT_COPIED
            and ((ROOT / n).is_file() or (ROOT / n).is_symlink())]  # (a file deleted in the working tree: not)


def copy_checkout(dst: Path) -> Path:
    """The checkout as a fresh clone has it, plus the built extensions (with their times, so that the install's
    build step is a no-op)."""
    for name in checkout_files():
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)
    built = list((ROOT / "pyx").glob("*.c")) + list((ROOT / "broker" / "_native").glob("*.so"))
    assert built, "the checkout's Cython extensions are not built: run bash scripts/install.sh"
    # the generated protocol codecs' .pyx and C (setup.py writes them into build/gen_pyx/): without them the
    # install would cythonize and compile the ~20 MB of C again, minutes of CPU that this test is not about
    built += list((ROOT / "build" / "gen_pyx").glob("protocol_codecs.*"))
    for path in built:
        (dst / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dst / path.relative_to(ROOT))
    for lib in (ROOT / "build").glob("lib.*"):  # setuptools' build_ext compares against these
        shutil.copytree(lib, dst / "build" / lib.name, symlinks=True)
    # Their times moved past the install's: cythonize compares each generated C file with every .pxd its .pyx
    # cimports, Cython's own (libc/string.pxd, cpython/*.pxd) included, and those are as new as the copy's .venv,
    # so with the checkout's times every extension would be cythonized and compiled again (the codecs at -O1: most
    # of the install's minutes). The C files a day ahead, the built extensions a minute after them.
    ahead = time.time() + 86400
    for path in dst.glob("pyx/*.c"):
        os.utime(path, (ahead, ahead))
    for path in dst.glob("build/gen_pyx/*.c"):
        os.utime(path, (ahead, ahead))
    for path in [*dst.glob("broker/_native/*.so"), *dst.glob("build/lib.*/**/*.so")]:
        os.utime(path, (ahead + 60, ahead + 60))
    return dst


def fresh_env(**extra: str) -> Dict[str, str]:
    """A new user's shell: none of the checkout's variables, its .venv not on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in CHECKOUT_VARIABLES}
    venv_bins = {str(ROOT / ".venv" / "bin"), str(Path(os.environ.get("VIRTUAL_ENV", "/nonexistent")) / "bin")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and os.path.realpath(p) not in {os.path.realpath(b) for b in venv_bins})
    env.update(extra)
    return env


@dataclass
class Run:
    args: List[str]
    code: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"$ {' '.join(self.args)}\nexit {self.code}\nstdout:\n{self.stdout[-4000:]}\nstderr:\n{self.stderr[-4000:]}"


class FreshCheckout:
    """The copied checkout after ``scripts/install.sh``, and how to run its ``bin/`` scripts."""

    def __init__(self, root: Path, logs: Path) -> None:
        self.root = root
        self.logs = logs
        self.ran: Set[str] = set()

    def env(self, **extra: str) -> Dict[str, str]:
        return fresh_env(LOG_DIR=str(self.logs), **extra)

    def run(self, script: str, *args: str, input: Optional[str] = None, code: int = 0, timeout_s: float = 120.0,
            env: Optional[Dict[str, str]] = None) -> Run:
        """Run ``bin/<script>`` of the copy; it must exit with ``code`` and print no traceback."""
        cmd = [str(self.root / "bin" / script), *args]
        try:
            r = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout_s,
                               cwd=str(self.root), env=env or self.env(),
                               stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"$ {' '.join(cmd)} did not finish in {timeout_s} s:\n{e.stdout}\n{e.stderr}")
        run = Run(cmd, r.returncode, r.stdout, r.stderr)
        self.ran.add(script)
        for bad in FORBIDDEN:
            assert bad not in run.stdout and bad not in run.stderr, f"{bad} in the output of\n{run}"
        assert run.code == code, f"expected exit {code}:\n{run}"
        return run


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> FreshCheckout:
    base = tmp_path_factory.mktemp("fresh-install")
    root = copy_checkout(base / "checkout")
    assert not (root / ".venv").exists()
    # bin/pipeline.sh's own install step (pyspark and Spark's connector jars) is beyond this test: a no-op here
    (root / "scripts" / "install-pipeline.sh").write_text("#!/usr/bin/env bash\nexit 0\n")
    started = time.monotonic()
    r = subprocess.run(["bash", "scripts/install.sh"], cwd=str(root), capture_output=True, text=True, timeout=900,
                       env=fresh_env())
    assert r.returncode == 0, f"scripts/install.sh failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    print(f"scripts/install.sh of the copy: {time.monotonic() - started:.1f} s")
    return FreshCheckout(root, base / "logs")


def test_the_install_is_the_runtime_install_only(fresh: FreshCheckout) -> None:
    """The copy's .venv has requirements.txt (confluent-kafka included) and nothing of requirements-test.txt."""
    python = fresh.root / ".venv" / "bin" / "python"
    assert python.is_file()
    probe = ("import importlib.util, json, sys; "
             "print(json.dumps({m: importlib.util.find_spec(m) is not None for m in sys.argv[1:]}))")
    r = subprocess.run([str(python), "-c", probe, "confluent_kafka", "kazoo", *TEST_ONLY], capture_output=True,
                       text=True, timeout=60, cwd="/", env=fresh_env())
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert found.pop("confluent_kafka") and found.pop("kazoo"), r.stdout
    assert not any(found.values()), f"test-only packages in the runtime install: {found}"


@pytest.fixture(scope="module")
def cluster(fresh: FreshCheckout) -> Iterator[Dict[str, str]]:
    """ZooKeeper and one broker, each started by the copy's own bin/ script; stopped at the end by the test with
    the stop scripts (or here, if the test failed before)."""
    work = fresh.root.parent
    zk_port, port = free_port(), free_port()
    zk_cfg = work / "zookeeper.properties"
    zk_cfg.write_text(f"dataDir={work / 'zookeeper-data'}\nclientPort={zk_port}\nmaxClientCnxns=0\n"
                      "admin.enableServer=false\n4lw.commands.whitelist=*\n")
    fresh.run("zookeeper-server-start.sh", "-daemon", str(zk_cfg))
    deadline = time.monotonic() + 60
    while True:
        try:
            if four_letter_word("127.0.0.1", zk_port, "ruok") == "imok":
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, (fresh.logs / "zookeeper.out").read_text()[-4000:]
        time.sleep(0.2)
    data = work / "kafka-logs"
    cfg = work / "server.properties"
    cfg.write_text(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={data}\n"
                   f"zookeeper.connect=127.0.0.1:{zk_port}\noffsets.topic.replication.factor=1\n"
                   "offsets.topic.num.partitions=1\ngroup.initial.rebalance.delay.ms=0\n"
                   "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n")
    fresh.run("kafka-server-start.sh", "-daemon", str(cfg))
    console = fresh.logs / "kafkaServer.out"
    deadline = time.monotonic() + 90
    while "started (listeners" not in (console.read_text() if console.exists() else ""):
        assert time.monotonic() < deadline, console.read_text()[-4000:] if console.exists() else "no kafkaServer.out"
        time.sleep(0.2)
    info = {"bootstrap": f"127.0.0.1:{port}", "zookeeper": f"127.0.0.1:{zk_port}", "data": str(data),
            "console": str(console)}
    try:
        yield info
    finally:
        env = fresh.env()
        for script in ("kafka-server-stop.sh", "zookeeper-server-stop.sh"):  # no-ops once the test stopped them
            subprocess.run([str(fresh.root / "bin" / script)], capture_output=True, timeout=120, env=env)


def test_every_bin_tool_works_against_a_live_broker(fresh: FreshCheckout, cluster: Dict[str, str]) -> None:
    bs, zk = cluster["bootstrap"], cluster["zookeeper"]
    work = fresh.root.parent
    topic, group = f"fresh-{uuid.uuid4().hex[:6]}", f"fresh-group-{uuid.uuid4().hex[:6]}"
    run = fresh.run

    # kafka-topics: create, list, describe
    assert run("kafka-topics.sh", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "2",
               "--replication-factor", "1").stdout == f"Created topic {topic}.\n"
    assert topic in run("kafka-topics.sh", "--bootstrap-server", bs, "--list").stdout.split()
    described = run("kafka-topics.sh", "--bootstrap-server", bs, "--describe", "--topic", topic).stdout
    assert f"Topic: {topic}\t" in described and "PartitionCount: 2" in described, described

    # console producer (3 lines, all to partition 0) and consumer
    run("kafka-console-producer.sh", "--bootstrap-server", bs, "--topic", topic, "--property", "parse.key=true",
        "--property", "key.separator=:", input="k:one\nk:two\nk:three\n")
    consumed = run("kafka-console-consumer.sh", "--bootstrap-server", bs, "--topic", topic, "--from-beginning",
                   "--max-messages", "3", "--group", group, "--timeout-ms", "30000")
    assert sorted(consumed.stdout.split()) == ["one", "three", "two"], consumed
    assert "Processed a total of 3 messages" in consumed.stderr, consumed

    # consumer groups, configs, offsets
    assert group in run("kafka-consumer-groups.sh", "--bootstrap-server", bs, "--list").stdout.split()
    described = run("kafka-consumer-groups.sh", "--bootstrap-server", bs, "--describe", "--group", group).stdout
    assert group in described and topic in described, described
    configs = run("kafka-configs.sh", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                  "--entity-name", topic).stdout
    assert f"Dynamic configs for topic {topic} are:" in configs, configs
    offsets = run("kafka-get-offsets.sh", "--bootstrap-server", bs, "--topic", topic).stdout.split()
    assert sum(int(line.rsplit(":", 1)[1]) for line in offsets) == 3 and len(offsets) == 2, offsets
    partition = next(int(line.split(":")[1]) for line in offsets if not line.endswith(":0"))

    # delete records below offset 1 of the partition that has them
    spec = work / "delete-records.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic, "partition": partition, "offset": 1}], "version": 1}))
    deleted = run("kafka-delete-records.sh", "--bootstrap-server", bs, "--offset-json-file", str(spec)).stdout
    assert "Records delete operation completed:" in deleted and "low_watermark: 1" in deleted, deleted

    versions = run("kafka-broker-api-versions.sh", "--bootstrap-server", bs).stdout
    assert "(id: 0 rack: null) -> (" in versions and "Produce(0):" in versions, versions[:2000]

    # the perf tests, tiny
    produced = run("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "20", "--record-size", "10",
                   "--throughput", "-1", "--producer-props", f"bootstrap.servers={bs}", "acks=1").stdout
    assert "20 records sent" in produced, produced
    perf = run("kafka-consumer-perf-test.sh", "--bootstrap-server", bs, "--topic", topic, "--messages", "20",
               "--timeout", "30000").stdout
    assert perf.startswith("start.time, end.time, data.consumed.in.MB"), perf

    # the log on disk
    segment = Path(cluster["data"]) / f"{topic}-{partition}" / "00000000000000000000.log"
    assert segment.is_file(), sorted(p.name for p in segment.parent.iterdir())
    dumped = run("kafka-dump-log.sh", "--files", str(segment), "--print-data-log").stdout
    assert dumped.startswith(f"Dumping {segment}") and "baseOffset: 0" in dumped and "payload: one" in dumped, dumped
    log_dirs = run("kafka-log-dirs.sh", "--bootstrap-server", bs, "--describe", "--topic-list", topic).stdout
    assert json.loads(log_dirs.splitlines()[-1])["brokers"][0]["broker"] == 0, log_dirs

    features = run("kafka-features.sh", "--bootstrap-server", bs, "describe")  # ZooKeeper mode: no feature levels
    assert features.stderr == "", features

    # acls: no authorizer on this broker, so Kafka's clean error line
    acls = run("kafka-acls.sh", "--bootstrap-server", bs, "--list", code=1)
    assert acls.stdout.startswith("Error while executing ACL command: org.apache.kafka.common.errors."
                                  "SecurityDisabledException: No Authorizer is configured on the broker\n"), acls

    transactions = run("kafka-transactions.sh", "--bootstrap-server", bs, "list").stdout
    assert transactions.split()[:3] == ["TransactionalId", "Coordinator", "ProducerId"], transactions

    elected = run("kafka-leader-election.sh", "--bootstrap-server", bs, "--election-type", "preferred",
                  "--topic", topic, "--partition", "0")
    assert "Valid replica already elected for partitions" in elected.stdout, elected

    # reassign-partitions: a plan, then its verification (already the current assignment)
    to_move = work / "topics-to-move.json"
    to_move.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    plan = run("kafka-reassign-partitions.sh", "--bootstrap-server", bs, "--generate", "--topics-to-move-json-file",
               str(to_move), "--broker-list", "0").stdout
    assert "Current partition replica assignment" in plan and "Proposed partition reassignment configuration" in plan
    proposed = work / "reassignment.json"
    proposed.write_text(plan.strip().splitlines()[-1])
    verified = run("kafka-reassign-partitions.sh", "--bootstrap-server", bs, "--verify", "--reassignment-json-file",
                   str(proposed)).stdout
    assert "Status of partition reassignment:" in verified and f"Reassignment of partition {topic}-0 is completed" \
        in verified, verified

    # delegation tokens over PLAINTEXT: the broker refuses them, and the tool says so as Kafka's does
    command_config = work / "client.properties"
    command_config.write_text("client.id=fresh-install\n")
    tokens = run("kafka-delegation-tokens.sh", "--bootstrap-server", bs, "--command-config", str(command_config),
                 "--describe", code=1)
    refused = ("org.apache.kafka.common.errors.UnsupportedByAuthenticationException: Delegation Token requests are "
               "not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.")
    assert tokens.stderr.startswith(refused + "\n"), tokens

    # ZooKeeper's shell on the broker's ZooKeeper
    shell = run("zookeeper-shell.sh", zk, "ls", "/brokers/ids")
    assert "[0]" in shell.stdout, shell

    # Kafka's launcher by class name
    by_class = run("kafka-run-class.sh", "kafka.admin.TopicCommand", "--bootstrap-server", bs, "--list").stdout
    assert topic in by_class.split()
    assert run("kafka-run-class.sh", code=1).stderr.startswith("USAGE: kafka-run-class.sh ")

    # the dev cluster's command (its own start/stop is tests/integration/cluster's)
    assert run("kafka-cluster.sh", "--help").stdout.startswith("usage: kafka-cluster.sh [-h]")
    run("kafka-cluster.sh", "status", "--dir", str(work / "no-cluster"), code=1)

    # the pipeline's generator through bin/pipeline.sh (its Spark jobs need install-pipeline.sh; see above)
    generated = run("pipeline.sh", "generate", "--bootstrap", bs, "--prefix", f"fresh-{uuid.uuid4().hex[:6]}.",
                    "--events", "20", "--partitions", "1", "--replication-factor", "1", timeout_s=180)
    assert generated.stdout.startswith("pipeline: generator: 20 events produced"), generated

    # the broker's own names of the start and stop scripts (kafka-server-*.sh run them)
    assert run("server-start.sh", "--version").stdout.startswith(run("kafka-server-start.sh", "--version").stdout[:5])
    assert run("server-stop.sh", "--dry-run").stdout.startswith("Would stop: "), "the dry run names the broker"

    # stop the broker, then ZooKeeper, with the stop scripts
    run("kafka-server-stop.sh")
    console = Path(cluster["console"]).read_text()
    assert "shut down completed" in console and "Traceback" not in console, console[-4000:]
    run("zookeeper-server-stop.sh")

    every = {p.name for p in (fresh.root / "bin").iterdir() if p.name.endswith(".sh")}
    assert every - fresh.ran == set(), f"bin/ scripts this test does not run: {sorted(every - fresh.ran)}"
