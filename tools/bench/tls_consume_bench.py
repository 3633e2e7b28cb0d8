"""Consume over TLS beside consume over plaintext, one broker, the same log, interleaved rounds.

security_bench measures produce, consume, logins and quotas over three listeners and against Kafka; this one only
re-reads one topic, again and again, over PLAINTEXT and SSL alternately, so the two consume rows come from the same
log, the same minute and the same machine load, and a change to the TLS write path can be judged by them:

    python -m tools.bench.tls_consume_bench [--mb 200] [--rounds 2] [--record-size 1000]
        [--env NAME=VALUE ...] [--baseline DIR] [--perf OUT]

Per round and listener: consume MB/s (record values, client side; with ``--raw`` Fetch answer bytes) and the broker's CPU (user+system) per MB read.
``--baseline DIR`` starts a second broker from another checkout (DIR/bin/kafka-server-start.sh, e.g. a
``git archive`` of the commit before a change with its built extensions copied in) and interleaves it too, so
before and after are measured in one run. ``--env`` passes variables to the broker under test, ``--baseline-env`` to
the baseline (``--baseline .`` with two ``--env``s compares two settings of one checkout).
``--perf OUT`` records ``perf record -g`` of the broker under test during one extra SSL round and prints its
split by shared object (libcrypto: encryption; libc: copies; python: the interpreter).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from confluent_kafka import Consumer, TopicPartition

from broker.protocol.api import ApiKey, encode_request
from tests.harness.security import SecurityPki, make_pki
from tools import cluster, producer_perf
from tools.bench.process_cpu import tree_cpu_seconds
from tools.bench.security_bench import create_topic
from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port

LISTENERS = ("PLAINTEXT", "SSL")


class Subject:
    """One broker with a PLAINTEXT and an SSL listener, run from ``root`` (a checkout)."""

    def __init__(self, name: str, root: Path, workdir: Path, zk: str, pki: SecurityPki,
                 env: Dict[str, str]) -> None:
        self.name, self.root, self.pki, self.env = name, root, pki, env
        self.ports = {n: free_port() for n in LISTENERS}
        ov = {"listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
              "offsets.topic.replication.factor": "1", "num.partitions": "1", **pki.broker_ssl_props()}
        self.broker = BrokerProcess(workdir / name, f"{zk}/{name}-{uuid.uuid4().hex[:6]}", port=self.ports["PLAINTEXT"],
                                    overrides=ov)
        self.topic = f"tls-consume-{uuid.uuid4().hex[:6]}"

    def start(self) -> None:
        script = self.root / "bin" / "kafka-server-start.sh"
        with _command(script):
            self.broker.start(timeout=120, extra_env=self.env)

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.broker.pid)

    def minor_faults(self) -> int:
        """Page faults served without I/O (a fresh page of a new allocation, mostly) since the broker started."""
        try:
            return int(Path(f"/proc/{self.broker.pid}/stat").read_text().rsplit(")", 1)[1].split()[7])
        except (OSError, ValueError, IndexError):
            return 0

    def client(self, listener: str) -> Dict[str, str]:
        conf = {"bootstrap.servers": f"127.0.0.1:{self.ports[listener]}", "security.protocol": listener}
        if listener == "SSL":
            conf.update(self.pki.client_ssl())
        return conf


@contextlib.contextmanager
def _command(script: Path) -> Iterator[None]:
    """Start a broker from another checkout: tools.cluster runs its own ``bin`` otherwise."""
    saved = cluster.broker_command
    cluster.broker_command = lambda: [str(script)]  # type: ignore[assignment]
    try:
        yield
    finally:
        cluster.broker_command = saved  # type: ignore[assignment]


def consume_all(s: Subject, listener: str, records: int) -> Dict[str, float]:
    conf = s.client(listener)
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800})
    c.assign([TopicPartition(s.topic, 0, 0)])
    got, nbytes = 0, 0
    cpu0, faults0 = s.cpu_seconds(), s.minor_faults()
    t0 = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        for m in c.consume(10_000, timeout=1.0):
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - t0
    cpu, faults = s.cpu_seconds() - cpu0, s.minor_faults() - faults0
    c.close()
    if got < records:
        raise RuntimeError(f"{s.name} {listener}: {got} of {records} records in 300 s")
    mb = nbytes / 1e6
    return {"mb_per_s": mb / elapsed, "cpu_ms_per_mb": cpu / mb * 1e3, "faults_per_mb": faults / mb,
            "seconds": elapsed}


def raw_fetch(s: Subject, listener: str, megabytes: float) -> Dict[str, float]:
    """Fetch v11 of the topic's first MB (partition_max_bytes 1 MiB) again and again, on one connection, the answer
    read with recv_into and not decoded: the client costs little beside the broker (TLS: OpenSSL's decryption)."""
    req = bytes(encode_request(ApiKey.FETCH, 11, 1, "tls-bench", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": s.topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}))
    buf = memoryview(bytearray(4 << 20))
    with contextlib.ExitStack() as stack:
        sock: Any = stack.enter_context(socket.create_connection(("127.0.0.1", s.ports[listener]), timeout=30))
        if listener == "SSL":
            ctx = ssl.create_default_context(cafile=str(s.pki.ca_pem))
            ctx.check_hostname = False
            sock = stack.enter_context(ctx.wrap_socket(sock, server_hostname="localhost"))

        def fetch() -> int:
            sock.sendall(req)
            got = 0
            while got < 4:
                got += sock.recv_into(buf[got:4])
            size = 4 + int.from_bytes(buf[:4], "big")
            while got < size:
                pos = got % len(buf)
                n = sock.recv_into(buf[pos:], min(size - got, len(buf) - pos))
                if not n:
                    raise ConnectionError("closed")
                got += n
            return size
        fetch()  # the connection's first answer (and TLS's first records) are not measured
        total = 0
        cpu0, faults0 = s.cpu_seconds(), s.minor_faults()
        t0 = time.perf_counter()
        while total < megabytes * 1e6:
            total += fetch()
        elapsed = time.perf_counter() - t0
        cpu, faults = s.cpu_seconds() - cpu0, s.minor_faults() - faults0
    mb = total / 1e6
    return {"mb_per_s": mb / elapsed, "cpu_ms_per_mb": cpu / mb * 1e3, "faults_per_mb": faults / mb,
            "seconds": elapsed}


def perf_split(s: Subject, records: int, out: Path) -> str:
    assert s.broker.pid is not None
    pids = [str(s.broker.pid)]
    with contextlib.suppress(Exception):
        import psutil
        pids += [str(p.pid) for p in psutil.Process(s.broker.pid).children(recursive=True)]
    rec = subprocess.Popen(["perf", "record", "-F", "1999", "-g", "-o", str(out), "-p", ",".join(pids)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        consume_all(s, "SSL", records)
    finally:
        rec.send_signal(2)
        rec.wait(30)
    report = subprocess.run(["perf", "report", "-i", str(out), "--no-children", "--sort", "dso", "--stdio", "-g",
                             "none"], capture_output=True, text=True).stdout
    return "\n".join(line for line in report.splitlines() if line.strip() and not line.startswith("#"))


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the topic re-read each round")
    ap.add_argument("--record-size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the broker under test")
    ap.add_argument("--baseline", type=Path, help="another checkout to measure beside this one")
    ap.add_argument("--baseline-env", action="append", default=[], help="NAME=VALUE for the baseline broker")
    ap.add_argument("--raw", action="store_true",
                    help="a raw Fetch client (1 MiB answers, not decoded) instead of confluent-kafka's consumer")
    ap.add_argument("--perf", type=Path, help="perf.data path: profile one SSL round of the broker under test")
    a = ap.parse_args(argv)
    records = int(a.mb * 1e6 / a.record_size)
    workdir = Path(tempfile.mkdtemp(prefix="tls-consume-bench-"))
    zk = ZooKeeperProcess(workdir / "zk", free_port())
    zk.start()
    subjects: List[Subject] = []
    try:
        pki = make_pki(workdir / "pki")
        env = dict(kv.split("=", 1) for kv in a.env)
        subjects.append(Subject("this", cluster.ROOT, workdir, zk.connect_string, pki, env))
        if a.baseline:
            subjects.append(Subject("baseline", a.baseline.resolve(), workdir, zk.connect_string, pki,
                                    dict(kv.split("=", 1) for kv in a.baseline_env)))
        for s in subjects:
            s.start()
            conf = s.client("PLAINTEXT")
            create_topic(conf, s.topic)
            producer_perf.run(conf["bootstrap.servers"], s.topic, records, a.record_size, -1, "1", "none", {})
        print(f"load average before: {os.getloadavg()[0]:.2f}; {records} records x {a.record_size} B per read",
              flush=True)
        rows: Dict[str, List[Dict[str, float]]] = {}
        for r in range(a.rounds):
            for listener in LISTENERS:
                for s in subjects:
                    res = raw_fetch(s, listener, a.mb) if a.raw else consume_all(s, listener, records)
                    rows.setdefault(f"{s.name} {listener}", []).append(res)
                    print(f"round {r + 1} {s.name:<8} {listener:<9} {res['mb_per_s']:8.1f} MB/s "
                          f"{res['cpu_ms_per_mb']:7.2f} CPU ms/MB {res['faults_per_mb']:7.1f} faults/MB  (load {os.getloadavg()[0]:.2f})", flush=True)
        print("mean:")
        for key, vals in rows.items():
            mbs = sum(v["mb_per_s"] for v in vals) / len(vals)
            cpu = sum(v["cpu_ms_per_mb"] for v in vals) / len(vals)
            faults = sum(v["faults_per_mb"] for v in vals) / len(vals)
            print(f"  {key:<20} {mbs:8.1f} MB/s {cpu:7.2f} CPU ms/MB {faults:7.1f} faults/MB")
        if a.perf:
            print(perf_split(subjects[0], records, a.perf))
        return 0
    finally:
        for s in subjects:
            with contextlib.suppress(Exception):
                s.broker.stop()
        zk.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
