"""Security benchmark: this broker beside Apache Kafka 3.9.1, one broker each, same machine, same run, same clients.

Per broker, over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512):
  produce (acks=all, RF=1, 1 KB records) and consume throughput, broker CPU per record, with ratios to PLAINTEXT;
  authentication handshakes per second (one sequential client: TCP + TLS + SaslHandshake + SCRAM exchange);
and client quota accuracy (achieved / target) for a greedy producer at 1, 10 and 100 MB/s (PLAINTEXT).

TLS costs this broker more than plaintext does Kafka for one reason worth naming: fetch responses over TLS cannot go
out with sendfile(2) (the kernel would send the log bytes unencrypted), so the log slice is read into memory and
encrypted by OpenSSL in the event loop's thread, 64 KiB at a time (tools/bench/tls_consume_bench.py compares TLS
and plaintext consume alone, interleaved, with a perf profile of the broker).

    python -m tools.bench.security_bench [--records N] [--quick] [--only ours|kafka] [--json]
"""
from __future__ import annotations

import argparse
import json
import shutil
import socket
import ssl
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey, decode_response_with_header, encode_request
from broker.security.scram import ScramClient
from tests.harness.kafka import RealKafkaBroker
from tests.harness.security import ADMIN, ADMIN_PW, ALICE, ALICE_PW, SecurityPki, make_pki, plain_jaas, scram_jaas
from tests.integration.security.conftest import add_scram_user
from tools import producer_perf
from tools.bench.process_cpu import broker_cpu_seconds
from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
MB = 1024 * 1024


class Subject:
    """One broker (ours or Kafka) with three listeners."""

    def __init__(self, kind: str, workdir: Path, zk: str, pki: SecurityPki) -> None:
        self.kind, self.pki = kind, pki
        self.zk = f"{zk}/{kind}-{uuid.uuid4().hex[:6]}"
        self.ports = {n: free_port() for n in LISTENERS}
        ov = {"listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
              "sasl.enabled.mechanisms": "SCRAM-SHA-512",
              "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas(),
              "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas({ADMIN: ADMIN_PW}),
              "offsets.topic.replication.factor": "1", "num.partitions": "1",
              "group.initial.rebalance.delay.ms": "0", **pki.broker_ssl_props()}
        if kind == "ours":
            self.broker: Any = BrokerProcess(workdir / kind, self.zk, broker_id=0, port=self.ports["PLAINTEXT"],
                                             overrides=ov)
        else:
            self.broker = RealKafkaBroker(workdir / kind, self.zk, broker_id=0, port=self.ports["PLAINTEXT"],
                                          overrides=ov, full_jit=True)

    def start(self) -> None:
        add_scram_user(self.zk, ALICE, ALICE_PW, "SCRAM-SHA-512")
        self.broker.start(timeout=120)

    def stop(self) -> None:
        try:
            self.broker.stop()
        except Exception:
            self.broker.kill()

    def cpu_seconds(self) -> float:
        return broker_cpu_seconds(self.broker)

    def client(self, listener: str) -> Dict[str, str]:
        conf = {"bootstrap.servers": f"127.0.0.1:{self.ports[listener]}", "security.protocol": listener}
        if listener != "PLAINTEXT":
            conf.update(self.pki.client_ssl())
        if listener == "SASL_SSL":
            conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ALICE, "sasl.password": ALICE_PW})
        return conf


def create_topic(conf: Dict[str, str], name: str) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)


def bench_listener(s: Subject, listener: str, records: int) -> Dict[str, float]:
    conf = s.client(listener)
    topic = f"bench-{listener.lower()}-{uuid.uuid4().hex[:6]}"
    create_topic(conf, topic)
    props = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    cpu0 = s.cpu_seconds()
    r = producer_perf.run(conf["bootstrap.servers"], topic, records, 1000, -1, "all", "none", props,
                          warmup_records=min(20_000, records // 5))
    cpu_produce = s.cpu_seconds() - cpu0
    c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    c.assign([TopicPartition(topic, 0, 0)])
    total = records + min(20_000, records // 5)
    got, nbytes = 0, 0
    cpu1 = s.cpu_seconds()
    t0 = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < total and time.monotonic() < deadline:
        for m in c.consume(10_000, timeout=1.0):
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - t0
    cpu_consume = s.cpu_seconds() - cpu1
    c.close()
    return {"produce_records_per_s": r["records_per_s"], "produce_mb_per_s": r["mb_per_s"],
            "produce_cpu_us_per_record": cpu_produce / max(1, r["records"]) * 1e6,
            "consume_mb_per_s": nbytes / elapsed / 1e6, "consume_records_per_s": got / elapsed,
            "consume_cpu_us_per_record": cpu_consume / max(1, got) * 1e6}


def bench_handshakes(s: Subject, seconds: float) -> float:
    """Sequential full logins per second on SASL_SSL: TCP, TLS, SaslHandshake v1, SCRAM-SHA-512 (2 round trips)."""
    ctx = ssl.create_default_context(cafile=str(s.pki.ca_pem))
    ctx.check_hostname = False
    port = s.ports["SASL_SSL"]
    done = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                cid = [0]

                def call(key: int, version: int, body: dict) -> Any:
                    cid[0] += 1
                    tls.sendall(encode_request(key, version, cid[0], "hs-bench", body))
                    size = int.from_bytes(_recv(tls, 4), "big")
                    frame = size.to_bytes(4, "big") + _recv(tls, size)
                    return decode_response_with_header(key, version, frame)[1]
                assert call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
                client = ScramClient("SCRAM-SHA-512", ALICE, ALICE_PW)
                first = call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first_message()})
                final = call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final_message(first.auth_bytes)})
                assert final.error_code == 0, final.error_message
                client.verify_server_final(final.auth_bytes)
        done += 1
    return done / seconds


def _recv(sock: ssl.SSLSocket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def set_quota(s: Subject, client_id: str, rate: float) -> None:
    with socket.create_connection(("127.0.0.1", s.ports["PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.ALTER_CLIENT_QUOTAS, 1, 1, "bench", {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": client_id}],
            "ops": [{"key": "producer_byte_rate", "value": float(rate), "remove": False}]}]}))
        size = int.from_bytes(_recv(sock, 4), "big")  # type: ignore[arg-type]
        frame = size.to_bytes(4, "big") + _recv(sock, size)  # type: ignore[arg-type]
        r = decode_response_with_header(ApiKey.ALTER_CLIENT_QUOTAS, 1, frame)[1]
        assert r.entries[0].error_code == 0, r.entries[0].error_message


def bench_quota(s: Subject, rate_mb: float, warmup_s: float, measure_s: float) -> float:
    """A greedy producer with a producer_byte_rate quota: achieved / target over `measure_s` after `warmup_s`."""
    conf = s.client("PLAINTEXT")
    topic = f"quota-{uuid.uuid4().hex[:6]}"
    create_topic(conf, topic)
    client_id = f"q-{uuid.uuid4().hex[:6]}"
    set_quota(s, client_id, rate_mb * MB)
    time.sleep(2.0)  # every broker applies /config/changes within a moment
    p = Producer({**conf, "client.id": client_id, "acks": "1", "linger.ms": 5, "batch.size": 262144,
                  "queue.buffering.max.kbytes": 65536})
    value = b"q" * 1000
    measured = [0]
    t0 = time.monotonic()
    start_measure, end = t0 + warmup_s, t0 + warmup_s + measure_s

    def cb(err: Any, msg: Any) -> None:
        if err is None and start_measure <= time.monotonic() < end:
            measured[0] += len(value)
    while time.monotonic() < end:
        try:
            p.produce(topic, value, on_delivery=cb)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    p.purge()
    p.flush(10)
    return measured[0] / measure_s / (rate_mb * MB)


def run(kind: str, workdir: Path, zk: str, pki: SecurityPki, a: argparse.Namespace) -> Dict[str, Any]:
    s = Subject(kind, workdir, zk, pki)
    s.start()
    try:
        out: Dict[str, Any] = {}
        for listener in LISTENERS:
            out[listener] = bench_listener(s, listener, a.records)
        out["handshakes_per_s"] = bench_handshakes(s, 1.0 if a.quick else 10.0)
        # warm-up: a new client may first spend one span of quota (11 windows); a greedy producer at a few hundred
        # MB/s needs several seconds to drain that at 100 MB/s, so the measured window starts well after it
        out["quota"] = {str(r): bench_quota(s, r, 1.0 if a.quick else 25.0, 1.5 if a.quick else 30.0)
                        for r in (1, 10, 100)}
        return out
    finally:
        s.stop()


def ratio(x: float, y: float) -> str:
    return f"{x / y:.2f}x" if y else "n/a"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="small counts, to check the script works")
    ap.add_argument("--only", choices=("ours", "kafka"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.records = min(a.records, 5000)
    workdir = Path(tempfile.mkdtemp(prefix="security-bench-"))
    zk = ZooKeeperProcess(workdir / "zk", free_port())
    zk.start()
    results: Dict[str, Any] = {}
    failed: Dict[str, str] = {}
    try:
        pki = make_pki(workdir / "pki")
        for kind in ("ours", "kafka"):
            if a.only and a.only != kind:
                continue
            try:
                results[kind] = run(kind, workdir, zk.connect_string, pki, a)
            except Exception as exc:  # keep the other broker's figures; say what failed and where its logs are
                failed[kind] = f"{type(exc).__name__}: {exc}"
    finally:
        zk.stop()
        if not failed:
            shutil.rmtree(workdir, ignore_errors=True)
    for kind, why in failed.items():
        print(f"{kind}: did not complete ({why}); broker logs kept in {workdir / kind}")
    if not results:
        return 1
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    kinds = list(results)
    print(f"one broker each, one machine, 1 KB records, acks=all; columns: {' / '.join(kinds)}"
          + (" / ours:kafka" if len(kinds) == 2 else ""))
    rows = []
    for listener in LISTENERS:
        for key, label in (("produce_mb_per_s", "produce MB/s"), ("produce_cpu_us_per_record", "produce CPU us/rec"),
                           ("consume_mb_per_s", "consume MB/s"), ("consume_cpu_us_per_record", "consume CPU us/rec")):
            vals = [results[k][listener][key] for k in kinds]
            rows.append((f"{listener:<10} {label}", vals))
    rows.append(("SASL_SSL SCRAM-SHA-512 logins/s", [results[k]["handshakes_per_s"] for k in kinds]))
    for r in ("1", "10", "100"):
        rows.append((f"quota {r} MB/s achieved/target", [results[k]["quota"][r] for k in kinds]))
    for label, vals in rows:
        cells = "".join(f"{v:>14.2f}" for v in vals)
        extra = f"{ratio(vals[0], vals[1]):>12}" if len(vals) == 2 else ""
        print(f"{label:<40}{cells}{extra}")
    for k in kinds:
        pt = results[k]["PLAINTEXT"]
        print(f"{k}: vs PLAINTEXT -> produce MB/s SSL {ratio(results[k]['SSL']['produce_mb_per_s'], pt['produce_mb_per_s'])}"
              f", SASL_SSL {ratio(results[k]['SASL_SSL']['produce_mb_per_s'], pt['produce_mb_per_s'])}; "
              f"consume MB/s SSL {ratio(results[k]['SSL']['consume_mb_per_s'], pt['consume_mb_per_s'])}, "
              f"SASL_SSL {ratio(results[k]['SASL_SSL']['consume_mb_per_s'], pt['consume_mb_per_s'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
