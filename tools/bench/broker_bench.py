"""End-to-end broker benchmark: real ZooKeeper, real broker processes, confluent-kafka clients.

    .venv/bin/python -m tools.bench.broker_bench [--records 1000000] [--quick] [--peers kafka,tansu]
        [--only lz4,gzip] [--rounds 2]

Prints, per scenario and target, client-side records/s, MB/s and ack latency, and the broker process's own CPU
(user+system of its process tree from /proc via psutil) per record. Scenarios: ack latency at 1,000 records/s,
how fast a consumer parked in Fetch (fetch.wait.max.ms=500) sees a new record, produce N x 100 B (acks=1/all x
none/lz4/gzip/snappy/zstd) and consume them back, produce 10 KiB acks=all per codec, produce+consume 10 KiB.

``--peers kafka,tansu`` runs every scenario against Apache Kafka 3.9.1 (ZooKeeper mode, kafka-server-start.sh's
JVM options, warmed by one unmeasured pass of each scenario just before its measured one) and Tansu 0.6.0 (memory
storage engine: it keeps records in RAM, no disk) too, interleaved per scenario (ours, kafka, tansu, then the
next scenario), a fresh topic per run, the same client settings, and prints ours/peer ratios. A missing peer
fails at once with the line that installs it. The machine's other load moves absolute figures: compare the
ratios of one run. ``--only`` keeps the scenarios whose rows name one of the given words (``lz4``, ``10KiB``,
``latency``); ``--rounds N`` repeats the whole interleaved sequence N times and prints each figure's median over
the rounds. Nothing here asserts: it prints figures.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence


from tests.harness.broker_process import BrokerProcess
from tests.harness.kafka import KAFKA_LIBS
from tests.harness.zookeeper import ZooKeeperServer
from tools import consumer_perf, producer_perf
from tools.bench.process_cpu import CpuMeter
from tools.cluster import ROOT, free_port

PEERS = ("kafka", "tansu")
TANSU_VERSION = "0.6.0"
TANSU_BIN = ROOT / ".cache" / f"tansu-{TANSU_VERSION}" / "bin" / "tansu"
CODECS = ("lz4", "gzip", "snappy", "zstd")
#: kafka-server-start.sh's JVM options (the test harness's are sized for tests)
KAFKA_JVM_OPTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]

Result = Dict[str, Any]  # figures, or {"error": text} for a run that failed


class PeerMissing(RuntimeError):
    """A peer broker asked for with --peers is not installed: the message says how to install it."""


def parse_peers(text: str) -> List[str]:
    """``kafka,tansu`` -> ["kafka", "tansu"]: known names only, each once, in the order given."""
    out: List[str] = []
    for part in text.split(","):
        name = part.strip().lower()
        if not name:
            continue
        if name not in PEERS:
            raise argparse.ArgumentTypeError(f"unknown peer {name!r}: choose from {', '.join(PEERS)}")
        if name not in out:
            out.append(name)
    return out


def check_peer_installed(name: str) -> None:
    """Fail loudly, in one line, when a peer's binaries are missing (a silent skip would hide the comparison)."""
    if name == "kafka":
        if not (KAFKA_LIBS / ".complete").exists():
            raise PeerMissing(f"Kafka 3.9.1 not installed in {KAFKA_LIBS}: run bash scripts/install-test.sh")
        if shutil.which("java") is None:
            raise PeerMissing("java not found on PATH (Kafka peer): run bash scripts/install-test.sh")
    elif name == "tansu" and not (os.access(TANSU_BIN, os.X_OK) and (TANSU_BIN.parent.parent / ".features").exists()):
        raise PeerMissing(f"Tansu {TANSU_VERSION} not installed at {TANSU_BIN}: run bash scripts/install-bench.sh")


def ratio(ours: float, peer: float) -> float:
    """ours/peer; NaN when either side is missing, zero or NaN."""
    if not (isinstance(ours, (int, float)) and isinstance(peer, (int, float))):
        return float("nan")
    if math.isnan(ours) or math.isnan(peer) or peer == 0:
        return float("nan")
    return ours / peer


def _num(r: Result, *keys: str) -> float:
    for k in keys:
        if k in r:
            return float(r[k])
    return float("nan")


def format_table(results: Dict[str, Dict[str, Result]], targets: Sequence[str]) -> str:
    """One line per scenario and target; peers get ours/peer ratios of rec/s and of broker CPU per record
    (rec/s ratio > 1: ours faster; µs/rec ratio < 1: ours cheaper)."""
    head = (f"{'scenario':40s} {'target':6s} {'rec/s':>10s} {'MB/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} "
            f"{'cpu s':>7s} {'us/rec':>7s} {'x rec/s':>8s} {'x us/rec':>8s}")
    lines = [head]
    for name, per_target in results.items():
        ours = per_target.get("ours", {})
        for t in targets:
            r = per_target.get(t)
            if r is None:
                continue
            if "error" in r:
                lines.append(f"{name:40s} {t:6s} ERROR {r['error']}")
                continue
            rps, us = _num(r, "records_per_s"), _num(r, "broker_cpu_us_per_record")
            x_rps = x_us = ""
            if t != "ours":
                x_rps = f"{ratio(_num(ours, 'records_per_s'), rps):8.2f}"
                x_us = f"{ratio(_num(ours, 'broker_cpu_us_per_record'), us):8.2f}"
            lines.append(f"{name:40s} {t:6s} {rps:10.0f} {_num(r, 'mb_per_s'):8.1f} "
                         f"{_num(r, 'latency_p50_ms', 'p50_ms'):8.2f} {_num(r, 'latency_p99_ms', 'p99_ms'):8.2f} "
                         f"{_num(r, 'broker_cpu_s'):7.3f} {us:7.3f} {x_rps:>8s} {x_us:>8s}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ targets
class Target:
    """One broker under test: a name, a bootstrap address and the pid whose CPU is charged to it."""

    name = ""
    warm = False  # run each scenario once unmeasured first (the JVM's JIT)

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        raise NotImplementedError


class Ours(Target):
    name = "ours"

    def __init__(self, work: Path, zk: str) -> None:
        self.b = BrokerProcess(work / "ours", f"{zk}/bench", overrides={"num.partitions": "1"})

    def start(self) -> None:
        self.b.start()

    def stop(self) -> None:
        self.b.stop()

    @property
    def bootstrap(self) -> str:
        return str(self.b.bootstrap)

    @property
    def pid(self) -> int:
        assert self.b.proc is not None
        return self.b.proc.pid


class Kafka(Target):
    name = "kafka"
    warm = True

    def __init__(self, work: Path, zk: str) -> None:
        from tests.harness.kafka import RealKafkaBroker

        class KafkaServerStart(RealKafkaBroker):
            def jvm_options(self) -> list:
                return list(KAFKA_JVM_OPTS)

        self.b = KafkaServerStart(work / "kafka", f"{zk}/bench-kafka", broker_id=0,
                                  overrides={"num.partitions": "1", "offsets.topic.replication.factor": "1"})

    def start(self) -> None:
        self.b.start(timeout=180)

    def stop(self) -> None:
        self.b.stop()

    @property
    def bootstrap(self) -> str:
        return self.b.bootstrap

    @property
    def pid(self) -> int:
        assert self.b.proc is not None
        return self.b.proc.pid


class Tansu(Target):
    """``tansu broker`` with the memory storage engine, run in its own directory (it reads a ``.env`` there)."""

    name = "tansu"

    def __init__(self, work: Path) -> None:
        self.dir = work / "tansu"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in ("STORAGE_ENGINE", "LISTENER_URL",
                                                                 "ADVERTISED_LISTENER_URL", "CLUSTER_ID")}
        with open(self.dir / "tansu.out", "ab") as out:
            self.proc = subprocess.Popen(
                [str(TANSU_BIN), "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/", "--silent"],
                cwd=str(self.dir), env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + 60
        import socket
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.proc.returncode}: "
                                   f"{(self.dir / 'tansu.out').read_text(errors='replace')[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError("tansu did not listen within 60 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


# ------------------------------------------------------------------------------------------------ scenarios
def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def delete_topics(bootstrap: str, names: List[str]) -> None:
    """Best effort: frees a memory-backed peer's RAM and everyone's page cache between scenarios."""
    if not names:
        return
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics(names, operation_timeout=30).values():
        try:
            f.result(30)
        except Exception:  # noqa: BLE001 - a peer without DeleteTopics keeps them: the figures do not depend on it
            pass


def pct(values: List[float], q: float) -> float:
    return producer_perf.percentile(sorted(values), q)


def fetch_wakeup_latency(bootstrap: str, topic: str, samples: int) -> Dict[str, float]:
    """Producer sends one timestamped record every ~20 ms; a consumer parked in Fetch reads them."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wake", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
    lat: List[float] = []
    done = threading.Event()

    def consume() -> None:
        while not done.is_set():
            m = c.poll(0.2)
            if m is not None and not m.error():
                lat.append((time.perf_counter() - float(m.value() or b"nan")) * 1000.0)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(1.0)  # let the consumer reach its first long poll
    for _ in range(samples):
        p.produce(topic, repr(time.perf_counter()).encode())
        p.poll(0)
        time.sleep(0.02)
    p.flush(10)
    deadline = time.monotonic() + 5
    while len(lat) < samples and time.monotonic() < deadline:
        time.sleep(0.05)
    done.set()
    t.join()
    c.close()
    return {"samples": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "max_ms": max(lat or [0])}


@dataclass
class Run:
    """One scenario against one target: the topics it made (deleted afterwards) and the rows it measured."""
    target: Target
    topics: List[str] = field(default_factory=list)
    rows: Dict[str, Result] = field(default_factory=dict)

    def topic(self, label: str) -> str:
        safe = "".join(ch if ch.isalnum() else "-" for ch in label)
        name = f"bench-{safe}-{uuid.uuid4().hex[:6]}"
        create_topic(self.target.bootstrap, name)
        self.topics.append(name)
        return name

    def produce(self, row: str, n: int, size: int, acks: str, codec: str, throughput: float = -1,
                props: Optional[Dict[str, str]] = None) -> str:
        t = self.topic(row)
        meter = CpuMeter(self.target.pid)
        r = producer_perf.run(self.target.bootstrap, t, n, size, throughput, acks, codec, props or {})
        r["broker_cpu_s"] = meter.seconds()
        r["broker_cpu_us_per_record"] = r["broker_cpu_s"] / max(1, r["records"]) * 1e6
        self.rows[row] = r
        return t

    def consume(self, row: str, topic: str, n: int) -> None:
        meter = CpuMeter(self.target.pid)
        r = consumer_perf.run(self.target.bootstrap, topic, n, 300, {})
        r["broker_cpu_s"] = meter.seconds()
        r["broker_cpu_us_per_record"] = r["broker_cpu_s"] / max(1, r.get("records", n)) * 1e6
        self.rows[row] = r


Scenario = Callable[[Run], None]


def produce_row(row: str, n: int, size: int, acks: str, codec: str, throughput: float = -1,
                props: Optional[Dict[str, str]] = None) -> Scenario:
    """A scenario of one produce row."""
    def scenario(r: Run) -> None:
        r.produce(row, n, size, acks, codec, throughput, props)
    scenario.rows = (row,)  # type: ignore[attr-defined]
    return scenario


def labelled(fn: Scenario, *rows: str) -> Scenario:
    """``fn`` with the names of the rows it measures, which ``--only`` matches."""
    fn.rows = rows  # type: ignore[attr-defined]
    return fn


def scenario_rows(sc: Scenario) -> Sequence[str]:
    rows: Sequence[str] = getattr(sc, "rows", ())
    return rows


def select(scs: List[Scenario], only: Sequence[str]) -> List[Scenario]:
    """The scenarios one of whose rows contains one of the words of ``only`` (all of them when it is empty)."""
    if not only:
        return scs
    return [sc for sc in scs if any(w in row for row in scenario_rows(sc) for w in only)]


def median_rows(rounds: List[Dict[str, Dict[str, Result]]]) -> Dict[str, Dict[str, Result]]:
    """Per row and target, each numeric figure's median over the rounds that did not fail (a row every round of
    which failed keeps its first error)."""
    out: Dict[str, Dict[str, Result]] = {}
    for results in rounds:
        for row, per_target in results.items():
            for t in per_target:
                out.setdefault(row, {}).setdefault(t, {})
    for row, per_target in out.items():
        for t in per_target:
            runs = [r[row][t] for r in rounds if t in r.get(row, {})]
            ok = [r for r in runs if "error" not in r]
            if not ok:
                per_target[t] = runs[0]
                continue
            merged: Result = {}
            for key in ok[0]:
                vals = [r[key] for r in ok if isinstance(r.get(key), (int, float))]
                merged[key] = statistics.median(vals) if len(vals) == len(ok) else ok[0][key]
            merged["rounds"] = len(ok)
            per_target[t] = merged
    return out


def scenarios(records: int, large: int, quick: bool) -> List[Scenario]:
    """The scenario list, in run order. Latency first: after the bulk scenarios the kernel is still writing back
    hundreds of MB of dirty pages, which stalls appends (measured: p99 ~20 ms instead of ~3 ms)."""
    n_lat = 2000 if quick else 10000
    out: List[Scenario] = [
        produce_row("latency@1000rps acks=1", n_lat, 100, "1", "none", 1000, {"linger.ms": "0"}),
        produce_row("latency@1000rps acks=all", n_lat, 100, "all", "none", 1000, {"linger.ms": "0"}),
    ]

    def wake(r: Run) -> None:
        r.rows["fetch wake-up (fetch.wait.max.ms=500)"] = fetch_wakeup_latency(
            r.target.bootstrap, r.topic("wake"), 100 if quick else 500)
    out.append(labelled(wake, "fetch wake-up (fetch.wait.max.ms=500)"))

    def small_none(r: Run) -> None:
        t = r.produce(f"{records}x100B acks=1 none", records, 100, "1", "none")
        r.consume(f"consume {records}x100B", t, records)
    out.append(labelled(small_none, f"{records}x100B acks=1 none", f"consume {records}x100B"))
    out.append(produce_row(f"{records}x100B acks=all none", records, 100, "all", "none"))
    for codec in CODECS:
        for acks in ("1", "all"):
            out.append(produce_row(f"{records}x100B acks={acks} {codec}", records, 100, acks, codec))
    for codec in CODECS:
        out.append(produce_row(f"{large}x10KiB acks=all {codec}", large, 10240, "all", codec))

    def large_none(r: Run) -> None:
        t = r.produce(f"{large}x10KiB acks=1 none", large, 10240, "1", "none")
        r.consume(f"consume {large}x10KiB", t, large)
    out.append(labelled(large_none, f"{large}x10KiB acks=1 none", f"consume {large}x10KiB"))
    return out


def run_one(scenario: Scenario, target: Target) -> Dict[str, Result]:
    run = Run(target)
    try:
        scenario(run)
    finally:
        delete_topics(target.bootstrap, run.topics)
    return run.rows


def missing_peer(peers: Sequence[str]) -> Optional[str]:
    """Why one of ``peers`` cannot run here (not installed), or None."""
    for p in peers:
        try:
            check_peer_installed(p)
        except PeerMissing as e:
            return str(e)
    return None


@contextmanager
def running_targets(prefix: str, peers: Sequence[str]) -> Iterator[List[Target]]:
    """Ours, then each peer (kafka, tansu), started beside one ZooKeeper in a fresh work directory; all stopped
    (in reverse) and the directory removed on the way out."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    zk = ZooKeeperServer()
    started: List[Target] = []
    try:
        zk.start()
        targets: List[Target] = [Ours(work, zk.connect_string)]
        for p in peers:
            targets.append(Kafka(work, zk.connect_string) if p == "kafka" else Tansu(work))
        for t in targets:
            t.start()
            started.append(t)
        yield targets
    finally:
        for t in reversed(started):
            t.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--large-records", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="small counts, to check the script works")
    ap.add_argument("--peers", type=parse_peers, default=[],
                    help="comma-separated peers to run beside ours: kafka, tansu")
    ap.add_argument("--only", type=lambda text: [w.strip() for w in text.split(",") if w.strip()], default=[],
                    help="comma-separated words: run only the scenarios whose rows contain one (lz4, 10KiB, ...)")
    ap.add_argument("--rounds", type=int, default=1, help="repeat the interleaved run; print medians")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.records, a.large_records = 20_000, 1_000
    missing = missing_peer(a.peers)
    if missing:
        print(f"broker_bench: {missing}", file=sys.stderr)
        return 2
    chosen = select(scenarios(a.records, a.large_records, a.quick), a.only)
    if not chosen:
        print(f"broker_bench: no scenario's row contains any of {a.only}", file=sys.stderr)
        return 2
    rounds: List[Dict[str, Dict[str, Result]]] = []
    with running_targets("broker-bench-", a.peers) as targets:
        names = [t.name for t in targets]
        for i, sc in ((i, sc) for _ in range(max(1, a.rounds)) for i, sc in enumerate(chosen)):
            if i == 0:
                rounds.append({})
            results = rounds[-1]
            for t in targets:
                try:
                    if t.warm:
                        run_one(sc, t)
                    rows = run_one(sc, t)
                except Exception as e:  # noqa: BLE001 - one target's failure is a row of the table, not the run's end
                    rows = {f"scenario {i}": {"error": f"{type(e).__name__}: {e}"[:200]}}
                for row, r in rows.items():
                    results.setdefault(row, {})[t.name] = r
                print(f"broker_bench: {t.name}: {', '.join(rows)} done", file=sys.stderr, flush=True)

    results = median_rows(rounds) if len(rounds) > 1 else (rounds[0] if rounds else {})
    if a.json:
        print(json.dumps(results, indent=1))
        return 0
    print(format_table(results, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
