"""Many idle client connections on a real broker (CI-sized: 1,000; tools/bench/idle_connections.py measures 10,000).

Every connection is accepted and answered (ApiVersions v3) up to max.connections, exactly the surplus is refused,
each idle connection costs the broker little memory, and produce/consume go on meanwhile (on the inter-broker
listener, which max.connections exempts, as in Kafka).
"""
from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey
from tests.harness.broker_process import free_port, running_broker
from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import produce_values
from tests.harness.waiting import wait_for
from tests.integration.broker.wire import ConnectionClosed, RawClient
from tools.bench.idle_connections import open_idle_connections

IDLE = 1000
SURPLUS = 100
#: RSS per idle connection allowed (measured about 3 KB; a task or a buffer per connection would exceed it)
MAX_RSS_PER_CONNECTION = 20 * 1024


def served(bootstrap: str) -> bool:
    try:
        with RawClient(bootstrap, timeout_s=5) as c:
            return c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    except (ConnectionClosed, OSError):
        return False


def test_a_thousand_idle_connections_and_max_connections(zookeeper: str, tmp_path: Path) -> None:
    internal, external = free_port(), free_port()
    overrides = {"listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
                 "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                 "inter.broker.listener.name": "INTERNAL", "max.connections": str(IDLE)}
    with running_broker(tmp_path, f"{zookeeper}/idle-{uuid.uuid4().hex[:8]}", broker_id=0, port=internal,
                        overrides=overrides) as b:
        assert b.pid is not None
        ext = f"127.0.0.1:{external}"
        topic = f"idle-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        broker = psutil.Process(b.pid)
        assert asyncio.run(open_idle_connections(ext, 10)).result.answered == 10  # warm: code paths imported
        time.sleep(0.5)
        rss_before = broker.memory_info().rss

        async def load() -> tuple:
            idle = await open_idle_connections(ext, IDLE, concurrency=64)
            surplus = await open_idle_connections(ext, SURPLUS, concurrency=16)
            return idle, surplus
        idle, surplus = asyncio.run(load())
        try:
            assert idle.result.answered == IDLE, idle.result.summary()
            assert surplus.result.answered == 0 and surplus.result.outcomes["closed"] == SURPLUS, \
                surplus.result.summary()
            assert b.output().count("configured maximum of 1000 connections (max.connections)") >= SURPLUS
            time.sleep(0.5)
            per_connection = (broker.memory_info().rss - rss_before) / IDLE
            assert per_connection <= MAX_RSS_PER_CONNECTION, f"{per_connection:.0f} bytes of RSS per idle connection"

            values = [f"v{i}".encode() for i in range(50)]
            produce_values(b.bootstrap, topic, values, partition=0)
            got = consume_from_start(b.bootstrap, [(topic, 0)], len(values))
            assert [m.value() for m in got] == values
            assert idle.count_open() == IDLE, "an idle connection was closed"
            assert not served(ext)
        finally:
            idle.close()
            surplus.close()
        wait_for(lambda: served(ext), 15, "a client to be served on EXTERNAL once the idle connections closed")
