"""The broker's ZooKeeper session expires (process frozen past the session timeout): it must
re-register ``/brokers/ids/<id>`` and go on serving, without a restart."""
from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.harness.broker_process import BrokerProcess


def test_reregisters_after_session_expiry(zk_chroot: str, tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, zk_chroot, overrides={"zookeeper.session.timeout.ms": "2000"})
    b.start()
    zk = KazooClient(hosts=zk_chroot)
    zk.start(timeout=10)
    try:
        _, stat1 = zk.get("/brokers/ids/0")
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("expiry", 1, 1)])["expiry"].result(30)

        assert b.proc is not None
        b.proc.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 30
            while zk.exists("/brokers/ids/0") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert zk.exists("/brokers/ids/0") is None, "session did not expire while the broker was frozen"
        finally:
            b.proc.send_signal(signal.SIGCONT)

        deadline = time.monotonic() + 30
        while not zk.exists("/brokers/ids/0") and time.monotonic() < deadline:
            time.sleep(0.1)
        data, stat2 = zk.get("/brokers/ids/0")
        assert stat2.ephemeralOwner != stat1.ephemeralOwner, "expected a registration from a new session"
        assert json.loads(data)["endpoints"] == [f"PLAINTEXT://{b.bootstrap}"]
        assert b.is_alive()

        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce("expiry", b"after-expiry")
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g{uuid.uuid4().hex[:4]}",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("expiry", 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = [m.value() for m in c.consume(10, 0.5) if not m.error()]
        c.close()
        assert got == [b"after-expiry"]
        assert "session expired" in b.output().lower() or "expired" in b.output()
    finally:
        zk.stop()
        zk.close()
        assert b.stop() == 0
