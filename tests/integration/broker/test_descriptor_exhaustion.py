"""Out of file descriptors, nothing that matters fails: a real broker process with its RLIMIT_NOFILE lowered by
``prlimit`` on the running process (no test-only code path in the broker).

- With the budget spent by idle client connections, new clients are refused (one WARN line, not one per
  connection), while the ZooKeeper session stays (same czxid of /brokers/ids/0), an existing acks=all producer
  keeps being acknowledged across segment rolls, an existing consumer reads every acknowledged record, and new
  clients are served again once the idle connections close.
- With no descriptor left at all (accept() itself fails with EMFILE), the broker logs one WARN line instead of
  asyncio's traceback per retry, and serves the connections that waited in the listen backlog once descriptors
  are back; the ZooKeeper session survives.
"""
from __future__ import annotations

import asyncio
import resource
import socket
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import psutil
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from broker.protocol.api import ApiKey
from tests.harness.broker_process import BrokerProcess, free_port, running_broker
from tests.harness.clients import consume_from_start
from tests.harness.waiting import wait_for
from tests.integration.broker.wire import ConnectionClosed, RawClient
from tools.bench.idle_connections import open_idle_connections

RESERVE = 64  # broker.fd.reserve
CLIENT_SLOTS = 48  # descriptors left for new client connections once the limit is lowered


def lower_soft_limit(pid: int, soft: int) -> None:
    """prlimit on the running broker. Only the soft limit: a hard limit, once lowered, cannot be raised again here."""
    hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def make_broker(zookeeper: str, tmp_path: Path) -> Iterator:
    with ExitStack() as stack:
        def make(overrides: Dict[str, str], port: Optional[int] = None) -> Tuple[BrokerProcess, str]:
            chroot = f"{zookeeper}/fd-{uuid.uuid4().hex[:8]}"
            b = stack.enter_context(running_broker(tmp_path / uuid.uuid4().hex[:6], chroot, broker_id=0, port=port,
                                                   overrides={"broker.fd.reserve": str(RESERVE), **overrides}))
            # at the end, before the clean shutdown (which writes checkpoints): its descriptors back
            stack.callback(lambda: b.is_alive() and lower_soft_limit(b.pid, 20000))  # type: ignore[arg-type]
            return b, chroot
        yield make


def broker_epoch(chroot: str) -> int:
    zk = KazooClient(hosts=chroot, timeout=15)
    zk.start(timeout=15)
    try:
        return int(zk.get("/brokers/ids/0")[1].czxid)
    finally:
        zk.stop()
        zk.close()


def served(bootstrap: str) -> bool:
    """A new connection is answered (ApiVersions)."""
    try:
        with RawClient(bootstrap, timeout_s=5) as c:
            return c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    except (ConnectionClosed, OSError):
        return False


def segment_files(b: BrokerProcess, topic: str) -> List[str]:
    return sorted(p.name for p in (b.log_dir / f"{topic}-0").glob("*.log"))


def two_listeners(make_broker) -> Tuple[BrokerProcess, str, str]:  # type: ignore[no-untyped-def]
    """Brokers on a listener of their own (INTERNAL), clients on EXTERNAL, as Kafka recommends for max.connections:
    (broker, its ZooKeeper chroot, the EXTERNAL bootstrap)."""
    internal, external = free_port(), free_port()
    b, chroot = make_broker({"listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
                             "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                             "inter.broker.listener.name": "INTERNAL"}, port=internal)
    return b, chroot, f"127.0.0.1:{external}"


def test_clients_are_refused_first_and_what_matters_keeps_working(make_broker) -> None:
    b, chroot, bootstrap = two_listeners(make_broker)
    assert b.pid is not None
    assert "File descriptors: limit 20000" in b.output()
    topic = f"fd-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "8192"})])[topic].result(30)
    acked: List[Tuple[int, bytes]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, f"delivery failed: {err}"
        acked.append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 4096,
                         "message.timeout.ms": 30000})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fd", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: List[Tuple[int, bytes]] = []

    def produce_and_read(n: int, label: str) -> None:
        for i in range(n):
            producer.produce(topic, value=f"{label}-{i}-".encode().ljust(200, b"x"), on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(60) == 0, f"[{label}] records were not acknowledged"
        deadline = time.monotonic() + 60
        while len(read) < len(acked) and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                assert not m.error(), m.error()
                read.append((m.offset(), m.value()))
        assert read == acked, f"[{label}] the consumer did not read back exactly what was acknowledged"

    try:
        produce_and_read(20, "before")
        epoch = broker_epoch(chroot)
        segments_before = segment_files(b, topic)

        # Leave CLIENT_SLOTS descriptors above what is open now and the reserve, then exceed them.
        limit = psutil.Process(b.pid).num_fds() + RESERVE + CLIENT_SLOTS
        lower_soft_limit(b.pid, limit)
        time.sleep(1.2)  # the budget reads the limit again at its next count (once a second)
        since = len(b.output())
        idle = asyncio.run(open_idle_connections(bootstrap, 3 * CLIENT_SLOTS, concurrency=8, timeout_s=15))
        try:
            r = idle.result
            assert 0 < r.answered <= CLIENT_SLOTS and r.outcomes["closed"] == 3 * CLIENT_SLOTS - r.answered, \
                r.summary()
            out = b.output()[since:]
            assert out.count("Refusing new connections on listener EXTERNAL") == 1, out[-3000:]
            assert not served(bootstrap), "a new client must be refused while the reserve is all that is left"
            assert served(b.bootstrap), "the inter-broker listener may still use half the reserve"

            # Exhausted for new clients: the existing producer and consumer go on, across segment rolls.
            produce_and_read(300, "exhausted")
            assert len(segment_files(b, topic)) > len(segments_before) + 5, segment_files(b, topic)
            time.sleep(3)  # ZooKeeper pings (kazoo opens an epoll descriptor for each wait)
            assert broker_epoch(chroot) == epoch, "the broker lost its ZooKeeper session"
            produce_and_read(10, "later")
        finally:
            idle.close()
        wait_for(lambda: served(bootstrap), 15, "a new client to be served once the idle connections closed")
        assert b.output()[since:].count("Accepting new connections again") == 1
        got = consume_from_start(bootstrap, [(topic, 0)], len(acked))
        assert [(m.offset(), m.value()) for m in got] == acked
        assert broker_epoch(chroot) == epoch
        out = b.output()
        for bad in ("session expired", "Traceback", "ERROR"):
            assert bad not in out, f"{bad!r} in the broker output:\n{out[-4000:]}"
    finally:
        consumer.close()


def test_a_failed_accept_is_one_line_and_the_backlog_is_served_after(make_broker) -> None:
    b, chroot = make_broker({})
    assert b.pid is not None
    epoch = broker_epoch(chroot)
    since = len(b.output())
    waiting = [RawClient.__new__(RawClient) for _ in range(3)]
    lower_soft_limit(b.pid, 3)  # no new descriptor at all (0-2 are taken)
    try:
        for c in waiting:  # connected by the kernel, queued in the listen backlog: accept() fails
            c.sock = socket.create_connection(("127.0.0.1", b.port), timeout=10)
            c._correlation_id = 0
        time.sleep(2.5)  # asyncio pauses accepting for 1 s after each failure: three rounds
    finally:
        lower_soft_limit(b.pid, 20000)
    try:
        for c in waiting:
            assert c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    finally:
        for c in waiting:
            c.close()
    out = b.output()[since:]
    assert out.count("Error while accepting connections on listener PLAINTEXT: Too many open files") == 1, out
    assert "socket.accept() out of system resource" not in out and "Traceback" not in out, out
    assert broker_epoch(chroot) == epoch, "the broker lost its ZooKeeper session"
    assert served(b.bootstrap)


def test_the_reserve_is_a_dynamic_per_broker_config(make_broker) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    b, _, bootstrap = two_listeners(make_broker)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    def set_reserve(value: str) -> None:
        resource_ = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
            ConfigEntry("broker.fd.reserve", value, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource_])[resource_].result(30)

    set_reserve("19990")  # of a limit of 20,000: no client fits any more
    wait_for(lambda: not served(bootstrap), 15, "new clients to be refused under the new reserve")
    assert "broker.fd.reserve=19990" in b.output()
    set_reserve("-1")
    wait_for(lambda: served(bootstrap), 15, "new clients to be served again")


def test_startup_warns_when_the_estimate_is_close_to_the_limit(make_broker) -> None:
    b, _ = make_broker({"broker.storage.segment.file.cache.size": "17000"})  # + reserve 64: over 80 % of 20,000
    out = b.output()
    assert "File descriptors: limit 20000" in out and "with the segment file cache of 17000" in out, out
    assert "WARN File descriptors: the logs on disk and the reserve need about" in out, out
