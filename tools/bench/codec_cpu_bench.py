"""Broker CPU per small request, generated-Python codecs against the compiled ones (issue 19).

    .venv/bin/python -m tools.bench.codec_cpu_bench [--requests 3000] [--rounds 3]

Starts one ZooKeeper and two brokers, one with ``BROKER_NATIVE_CODECS=0`` (generated Python only) and one with the
compiled decoders and encoders (the default). Each round sends, through one raw socket per broker, one request at a
time: ApiVersions v3, Heartbeat v4 (unknown group: the coordinator answers at once), Produce v9 (acks=1, one ~100 B
batch to one partition) and Fetch v13 (one partition, max_wait_ms=0), and measures the broker's CPU over them
(``process_cpu.CpuMeter``, to the nanosecond). Rounds alternate between the brokers, so both see the same machine
load; the best round per (broker, request) is printed, in µs of broker CPU per request, with the ratio.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol.api import ApiKey, decode_response, encode_request  # noqa: E402
from broker.protocol.records.builder import build_batch  # noqa: E402
from tests.harness.broker_process import BrokerProcess  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402
from tools.bench.broker_bench import create_topic  # noqa: E402
from tools.bench.process_cpu import CpuMeter  # noqa: E402

_I32 = struct.Struct(">i")
TOPIC = "codec-cpu"


class Client:
    """One blocking connection; one request in flight."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            c = self.sock.recv(n)
            if not c:
                raise ConnectionError("broker closed the connection")
            chunks.append(c)
            n -= len(c)
        return b"".join(chunks)

    def exchange(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        size = _I32.unpack(self._read(4))[0]
        return self._read(size)

    def call(self, key: ApiKey, version: int, body: dict[str, Any]) -> Any:
        return decode_response(key, version, self.exchange(encode_request(key, version, 1, "codec-cpu", body)),
                               has_size_prefix=False)


def requests(client: Client) -> dict[str, bytes]:
    """The frames of each measured request (the topic exists: its id is read from Metadata)."""
    md = client.call(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
    topic_id = md.topics[0].topic_id
    batch = build_batch([(None, b"x" * 60, [])])
    return {
        "ApiVersions v3": encode_request(ApiKey.API_VERSIONS, 3, 2, "codec-cpu", {
            "client_software_name": "codec-cpu", "client_software_version": "1.0"}),
        "Heartbeat v4": encode_request(ApiKey.HEARTBEAT, 4, 3, "codec-cpu", {
            "group_id": "no-such-group", "generation_id": 1, "member_id": "m-1"}),
        "Produce v9 (1 partition, ~100 B)": encode_request(ApiKey.PRODUCE, 9, 4, "codec-cpu", {
            "acks": 1, "timeout_ms": 30000, "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}),
        "Fetch v13 (1 partition)": encode_request(ApiKey.FETCH, 13, 5, "codec-cpu", {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 4096}]}]}),
    }


def measure(pid: int, send: Callable[[bytes], bytes], frame: bytes, n: int) -> float:
    """µs of broker CPU per request over ``n`` requests."""
    for _ in range(200):
        send(frame)
    meter = CpuMeter(pid)
    for _ in range(n):
        send(frame)
    return meter.seconds() / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="codec-cpu-"))
    zk = ZooKeeperServer()
    zk.start()
    modes = {"python": {"BROKER_NATIVE_CODECS": "0"}, "compiled": {"BROKER_NATIVE_CODECS": "1"}}
    brokers: dict[str, BrokerProcess] = {}
    try:
        for mode, env in modes.items():
            (work / mode).mkdir()
            b = brokers[mode] = BrokerProcess(work / mode, f"{zk.connect_string}/{mode}",
                                              overrides={"num.partitions": "1"})
            b.start(extra_env=env)
            create_topic(b.bootstrap, TOPIC)
        clients = {mode: Client(b.bootstrap) for mode, b in brokers.items()}
        frames = {mode: requests(c) for mode, c in clients.items()}
        best: dict[tuple[str, str], float] = {}
        for _ in range(a.rounds):
            for label in frames["python"]:
                for mode, b in brokers.items():
                    assert b.proc is not None
                    us = measure(b.proc.pid, clients[mode].exchange, frames[mode][label], a.requests)
                    best[(mode, label)] = min(us, best.get((mode, label), us))
        print(f"{'request':34} {'python µs CPU':>14} {'compiled µs CPU':>16} {'ratio':>6}")
        for label in frames["python"]:
            p, c = best[("python", label)], best[("compiled", label)]
            ratio = f"{p / c:5.2f}x" if c else "    -"
            print(f"{label:34} {p:14.1f} {c:16.1f} {ratio}")
    finally:
        for b in brokers.values():
            b.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
