"""Kafka's connection quotas on a real broker: max.connections.per.ip (and overrides), max.connections (the
inter-broker listener exempt), max.connection.creation.rate, and the per-IP connection_creation_rate quota."""
from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from broker.protocol.api import ApiKey
from tests.harness.broker_process import BrokerProcess, free_port, running_broker
from tests.integration.broker.wire import ConnectionClosed, RawClient


def api_versions(c: RawClient) -> int:
    return c.request(ApiKey.API_VERSIONS, 0, {}).error_code


@pytest.fixture
def make_broker(zookeeper: str, tmp_path: Path) -> Iterator:
    with ExitStack() as stack:
        def make(overrides: Dict[str, str], port: int | None = None) -> BrokerProcess:
            return stack.enter_context(running_broker(tmp_path / uuid.uuid4().hex[:6],
                                                      f"{zookeeper}/cl-{uuid.uuid4().hex[:8]}", broker_id=0,
                                                      port=port, overrides=overrides))
        yield make


def served(bootstrap: str, source_ip: str | None = None) -> bool:
    try:
        with RawClient(bootstrap, timeout_s=5, source_ip=source_ip) as c:
            return api_versions(c) == 0
    except (ConnectionClosed, OSError):
        return False


def test_max_connections_per_ip_and_overrides(make_broker) -> None:
    """Clients come from 127.0.0.2/127.0.0.3: the broker's own connections (controller to itself) come from
    127.0.0.1 and count there, as in Kafka."""
    b = make_broker({"max.connections.per.ip": "3", "max.connections.per.ip.overrides": "127.0.0.1:50,127.0.0.3:5"})
    held: List[RawClient] = [RawClient(b.bootstrap, source_ip="127.0.0.2") for _ in range(3)]
    try:
        assert all(api_versions(c) == 0 for c in held)
        assert not served(b.bootstrap, "127.0.0.2"), "a 4th connection from the same IP must be refused"
        assert "Rejected connection from 127.0.0.2, address already has the configured maximum of 3 connections." \
            in b.output()
        assert served(b.bootstrap, "127.0.0.4")  # another IP is not affected
        held.pop().close()
        deadline = time.monotonic() + 5
        while not served(b.bootstrap, "127.0.0.2"):  # a slot is free again once the broker saw the close
            assert time.monotonic() < deadline
            time.sleep(0.05)
        more = [RawClient(b.bootstrap, source_ip="127.0.0.3") for _ in range(5)]  # the override
        try:
            assert all(api_versions(c) == 0 for c in more)
            assert not served(b.bootstrap, "127.0.0.3")
        finally:
            for c in more:
                c.close()
    finally:
        for c in held:
            c.close()


def test_max_connections_exempts_the_inter_broker_listener(make_broker) -> None:
    internal, external = free_port(), free_port()
    b = make_broker({"listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
                     "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                     "inter.broker.listener.name": "INTERNAL", "max.connections": "2"}, port=internal)
    ext = f"127.0.0.1:{external}"
    held = [RawClient(ext) for _ in range(2)]
    try:
        assert all(api_versions(c) == 0 for c in held)
        assert not served(ext)
        assert "(max.connections)" in b.output()
        more = [RawClient(b.bootstrap) for _ in range(3)]  # the inter-broker listener is not counted
        try:
            assert all(api_versions(c) == 0 for c in more)
        finally:
            for c in more:
                c.close()
    finally:
        for c in held:
            c.close()


def test_max_connection_creation_rate_delays_new_connections(make_broker) -> None:
    b = make_broker({"max.connection.creation.rate": "5"})
    t0 = time.monotonic()
    clients = [RawClient(b.bootstrap, timeout_s=30) for _ in range(15)]
    try:
        assert all(api_versions(c) == 0 for c in clients)  # all served...
        elapsed = time.monotonic() - t0
    finally:
        for c in clients:
            c.close()
    # ...but no faster than 5 per second after the first second's worth: 10 more need about 2 s
    assert elapsed >= 1.6, f"15 connections at max.connection.creation.rate=5 were served in {elapsed:.2f} s"


def test_ip_connection_creation_rate_quota_closes_excess_connections(make_broker) -> None:
    b = make_broker({})
    with RawClient(b.bootstrap) as c:
        r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "ip", "entity_name": "127.0.0.5"}],
            "ops": [{"key": "connection_creation_rate", "value": 2.0, "remove": False}]}]})
        assert r.entries[0].error_code == 0
        d = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"strict": False, "components": [
            {"entity_type": "ip", "match_type": 0, "match": "127.0.0.5"}]})
        assert [(v.key, v.value) for e in d.entries for v in e.values] == [("connection_creation_rate", 2.0)]
        bad = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "ip", "entity_name": "127.0.0.5"}],
            "ops": [{"key": "connection_creation_rate", "value": 2.5, "remove": False}]}]})
        assert bad.entries[0].error_code != 0  # an int quota
    deadline = time.monotonic() + 10
    while "Connection creation rate quota of ip 127.0.0.5 now 2.0" not in b.output():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    results = [served(b.bootstrap, "127.0.0.5") for _ in range(6)]
    assert results[:2] == [True, True] and not all(results), results
    assert all(served(b.bootstrap, "127.0.0.6") for _ in range(6))  # other IPs have no quota
    assert "exceeded its connection_creation_rate quota" in b.output()
