"""Capture golden request frames from real clients talking to the real broker, through a TCP proxy.

The broker listens on one port and advertises the proxy's port, so every connection a client
opens (bootstrap and per-broker) goes through the proxy. The proxy saves the first request
frame of each (API, version) per client as
``compat-tests/golden/<api>_req_v<N>_<client>_<NNN>.hex`` (frame without its size prefix).

    python -m tools.codegen.capture_proxy [--out compat-tests/golden] [--clients java,confluent,kafkapython,kcat]

It starts its own ZooKeeper and broker (tests/harness), runs each client through a few
scenarios (admin, produce, consume), and writes only frames of (API, version) pairs not
already captured for that client.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from broker.protocol.api import ApiKey, decode_request_header  # noqa: E402
from broker.protocol.exceptions import ProtocolError  # noqa: E402
from broker.protocol.framing import RequestFramer  # noqa: E402
from tests.harness.broker_process import BrokerProcess, free_port  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402


def _snake(name: str) -> str:
    return name.lower()


class Proxy:
    """Forwards 127.0.0.1:listen_port to the broker; records request frames for the current client label."""

    def __init__(self, listen_port: int, target_port: int, out_dir: Path) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self.out_dir = out_dir
        self.client = "unknown"
        self.seen: Set[Tuple[str, int, int]] = set()
        self.written: List[Path] = []
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", listen_port))
        self._server.listen(64)
        self._stop = False
        for name in os.listdir(out_dir):
            m = re.match(r"(.+)_req_v(\d+)_([a-z]+)_\d+\.hex$", name)
            if m:
                key = next((k for k in ApiKey if _snake(k.name) == m.group(1)), None)
                if key is not None:
                    self.seen.add((m.group(3), int(key), int(m.group(2))))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                c, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                c.close()
                continue
            threading.Thread(target=self._pump, args=(c, upstream, RequestFramer(1 << 30)), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, c), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket,
              framer: Optional[RequestFramer] = None) -> None:
        """Copy src to dst until either side closes; with a framer, record each request frame on the way."""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if framer is not None:
                    for frame in framer.feed(data):
                        self._record(bytes(frame))
        except (OSError, ProtocolError):
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _record(self, frame: bytes) -> None:
        try:
            header, _ = decode_request_header(frame)
        except Exception:
            return
        try:
            name = _snake(ApiKey(header.api_key).name)
        except ValueError:
            return
        with self._lock:
            key = (self.client, header.api_key, header.api_version)
            if key in self.seen:
                return
            self.seen.add(key)
            n = len([p for p in os.listdir(self.out_dir) if p.endswith(".hex")]) + 1
            path = self.out_dir / f"{name}_req_v{header.api_version}_{self.client}_{n:03d}.hex"
            path.write_text(frame.hex() + "\n")
            self.written.append(path)

    def close(self) -> None:
        self._stop = True
        self._server.close()


def run_confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t = f"gold-c-{uuid.uuid4().hex[:4]}"
    admin.create_topics([NewTopic(t, 1, 1, config={"retention.ms": "100000"})])[t].result(20)
    admin.create_partitions([NewPartitions(t, 2)])[t].result(20)
    res = ConfigResource(ConfigResource.Type.TOPIC, t)
    admin.describe_configs([res])[res].result(20)
    admin.describe_cluster().result(20)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4"})
    for i in range(10):
        p.produce(t, key=b"k", value=b"v%d" % i, headers=[("h", b"x")])
    p.flush(20)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "gold", "enable.auto.commit": False})
    c.assign([TopicPartition(t, 0, 0)])
    c.consume(10, 2.0)
    c.offsets_for_times([TopicPartition(t, 0, 0)], timeout=10)
    c.close()
    admin.delete_topics([t])[t].result(20)


def run_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    t = f"gold-k-{uuid.uuid4().hex[:4]}"
    admin.create_topics([NewTopic(t, 1, 1)])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", acks="all")
    for i in range(10):
        p.send(t, key=b"k", value=b"v%d" % i, headers=[("h", b"x")])
    p.flush(20)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(t, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    c.poll(2000)
    c.offsets_for_times({tp: 0})
    c.end_offsets([tp])
    c.close()
    admin.delete_topics([t])
    admin.close()


def run_java(bootstrap: str) -> None:
    import importlib.util
    spec = importlib.util.spec_from_file_location("jars", ROOT / "compat-tests" / "java" / "jars.py")
    assert spec and spec.loader
    jars = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(jars)
    cmd = jars.java_command("admin,produce-consume:lz4", bootstrap, f"gold-j-{uuid.uuid4().hex[:4]}")
    subprocess.run(cmd, check=False, capture_output=True, timeout=180)


def run_kcat(bootstrap: str) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise RuntimeError("kcat is not installed")
    t = f"gold-kc-{uuid.uuid4().hex[:4]}"
    subprocess.run([kcat, "-b", bootstrap, "-L"], check=True, capture_output=True, timeout=60)
    subprocess.run([kcat, "-b", bootstrap, "-P", "-t", t, "-z", "snappy"], input=b"a\nb\n", check=True,
                   capture_output=True, timeout=60)
    subprocess.run([kcat, "-b", bootstrap, "-C", "-t", t, "-o", "beginning", "-e"], check=True,
                   capture_output=True, timeout=60)


CLIENTS: Dict[str, Callable[[str], None]] = {"confluent": run_confluent, "kafkapython": run_kafka_python,
                                             "java": run_java, "kcat": run_kcat}


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "compat-tests" / "golden"))
    ap.add_argument("--clients", default=",".join(CLIENTS))
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="golden-"))
    zk = ZooKeeperServer()
    zk.start()
    proxy_port, broker_port = free_port(), free_port()
    broker = BrokerProcess(work, f"{zk.connect_string}/golden", port=broker_port,
                           overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
    proxy = Proxy(proxy_port, broker_port, out)
    try:
        broker.start()
        for name in a.clients.split(","):
            proxy.client = name
            CLIENTS[name](f"127.0.0.1:{proxy_port}")
            time.sleep(0.5)
    finally:
        proxy.close()
        broker.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)
    for p in proxy.written:
        print(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
    print(f"{len(proxy.written)} new golden frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
