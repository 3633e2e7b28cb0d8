"""Capture raw request frames from real clients into compat-tests/golden/.

Opens a TCP listener on 127.0.0.1, points confluent-kafka (librdkafka) and kafka-python at it,
answers ApiVersions, Metadata and Produce with our own encoder so the clients keep going, and
saves every distinct (api, version) request frame as
``compat-tests/golden/<api>_req_v<N>_<client>_<NNN>.hex`` (hex of the frame without its size prefix).

Usage: python tools/codegen/capture_golden.py [OUT_DIR]
"""
from __future__ import annotations

import socket
import sys
import threading
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from broker.protocol.api import (  # noqa: E402
    API_VERSIONS_RANGE, ApiKey, decode_request, decode_request_header, encode_response,
)
from broker.protocol.framing import RequestFramer  # noqa: E402

TOPIC = "golden-topic"
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


class Recorder:
    """Saves the first frame of each (api, version) per client."""

    def __init__(self, out_dir: Path, client: str) -> None:
        self.out_dir = out_dir
        self.client = client
        self.seen: set[tuple[int, int]] = set()
        self.counter = 0
        self.lock = threading.Lock()

    def record(self, api_key: int, version: int, frame: bytes) -> None:
        with self.lock:
            if (api_key, version) in self.seen:
                return
            self.seen.add((api_key, version))
            self.counter += 1
            name = ApiKey(api_key).name.lower() if api_key in ApiKey._value2member_map_ else f"api{api_key}"
            path = self.out_dir / f"{name}_req_v{version}_{self.client}_{self.counter:03d}.hex"
            path.write_text(frame.hex() + "\n")


def _respond(header: Any, request: Any, port: int) -> Any:
    key = header.api_key
    if key == ApiKey.API_VERSIONS:
        return {"api_keys": [{"api_key": int(k), "min_version": lo, "max_version": hi}
                             for k, (lo, hi) in API_VERSIONS_RANGE.items()]}
    if key == ApiKey.METADATA:
        names = [t.name for t in (request.topics or [])] or [TOPIC]
        return {
            "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": port}],
            "cluster_id": "golden-cluster",
            "controller_id": 0,
            "topics": [{"name": n, "topic_id": TOPIC_ID, "partitions": [
                {"partition_index": 0, "leader_id": 0, "leader_epoch": 0,
                 "replica_nodes": [0], "isr_nodes": [0]}]} for n in names],
        }
    if key == ApiKey.PRODUCE:
        return {"responses": [{"name": t.name, "partition_responses": [
            {"index": p.index, "base_offset": 0} for p in t.partition_data]} for t in request.topic_data]}
    if key == ApiKey.INIT_PRODUCER_ID:
        return {"producer_id": 1000, "producer_epoch": 0}
    if key == ApiKey.FIND_COORDINATOR:
        return {"node_id": 0, "host": "127.0.0.1", "port": port,
                "coordinators": [{"key": k, "node_id": 0, "host": "127.0.0.1", "port": port}
                                 for k in (request.coordinator_keys or [])]}
    return None


def serve(recorder: Recorder, stop: threading.Event) -> int:
    """Start the listener thread; returns the port."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    port = srv.getsockname()[1]

    def handle(conn: socket.socket) -> None:
        framer = RequestFramer(100 * 1024 * 1024)
        conn.settimeout(0.2)
        while not stop.is_set():
            try:
                data = conn.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            for frame in framer.feed(data):
                header, offset = decode_request_header(frame)
                recorder.record(header.api_key, header.api_version, bytes(frame))
                if not header.is_supported:
                    continue
                request = decode_request(header.api_key, header.api_version, frame, offset)
                body = _respond(header, request, port)
                if body is None:
                    continue
                if header.api_key == ApiKey.PRODUCE and request.acks == 0:
                    continue
                for part in encode_response(header.api_key, header.api_version, header.correlation_id, body):
                    conn.sendall(part)
        conn.close()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()
        srv.close()

    threading.Thread(target=accept_loop, daemon=True).start()
    return port


def run_confluent(port: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0, "enable.idempotence": True})
    p.produce(TOPIC, b"value", key=b"key")
    p.flush(5)
    AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=3)
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "golden-group",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    c.poll(2.0)
    c.close()


def run_kafka_python(port: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=3000, max_block_ms=3000)
    p.send(TOPIC, b"value", key=b"key").get(timeout=5)
    p.close(timeout=2)


def capture(out_dir: Path, client: str, run: Callable[[int], None]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    recorder = Recorder(out_dir, client)
    port = serve(recorder, stop)
    try:
        run(port)
    except Exception as exc:  # a client giving up still leaves the frames it sent
        print(f"{client}: {type(exc).__name__}: {exc}")
    finally:
        stop.set()
    print(f"{client}: captured {sorted(recorder.seen)}")


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else ROOT / "compat-tests" / "golden"
    capture(out_dir, "confluent", run_confluent)
    capture(out_dir, "kafkapython", run_kafka_python)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
