"""Kafka's client log lines and their rate (tools/cli/client_log.py), and the protocol client's retries of an
unreachable broker (issue 17): no more connection warnings than Kafka's reconnect backoff allows."""
from __future__ import annotations

import re
import socket
import time
from typing import List

import pytest

from tools.cli import client_log
from tools.cli.client_log import LibrdkafkaLog, ReconnectBackoff, log_line, socket_address
from tools.cli.protocol_client import NodeAssignmentTimeout, ProtocolClient


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_log_line_is_log4j_tools_layout() -> None:
    line = log_line("WARN", "hello", "org.apache.kafka.clients.NetworkClient")
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] WARN hello \(org\.apache\.kafka\.clients\."
                        r"NetworkClient\)", line), line


def test_socket_address_as_java_prints_it() -> None:
    assert socket_address("127.0.0.1", 9) == "/127.0.0.1:9"
    assert socket_address("localhost", 9999) in ("localhost/127.0.0.1:9999", "localhost/[0:0:0:0:0:0:0:1]:9999")
    assert socket_address("::1", 9) == "/[0:0:0:0:0:0:0:1]:9"


def test_reconnect_backoff_is_kafkas_schedule() -> None:
    b = ReconnectBackoff()
    assert [round(b.failed(0.0) * 1000) for _ in range(8)] == [50, 100, 200, 400, 800, 1000, 1000, 1000]
    b.reset()
    assert b.ready(0.0) and round(b.failed(0.0) * 1000) == 50


FAIL = ("[thrd:localhost:9999/bootstrap]: localhost:9999/bootstrap: Connect to ipv4#127.0.0.1:9999 failed: "
        "Connection refused (after 0ms in state CONNECT)")


def test_librdkafka_connection_failures_become_kafkas_warning_at_kafkas_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    out: List[str] = []
    now = [100.0]
    monkeypatch.setattr(client_log, "monotonic", lambda: now[0])
    log = LibrdkafkaLog("AdminClient clientId=adminclient-1", "localhost:9998,localhost:9999", out.append)
    for _ in range(600):  # librdkafka: one line every 10 ms for 6 s (the issue saw ~18 a second)
        log.log(40, "%s [%s] %s", "FAIL", "rdkafka#producer-1", FAIL)
        now[0] += 0.01
    # Kafka: attempts 50, 100, 200, 400, 800 ms apart, then one a second: 10 in 6 s
    assert 8 <= len(out) <= 11, len(out)
    assert out[0].endswith("WARN [AdminClient clientId=adminclient-1] Connection to node -2 (localhost/127.0.0.1:9999) "
                           "could not be established. Node may not be available. "
                           "(org.apache.kafka.clients.NetworkClient)"), out[0]


def test_librdkafka_notices_kafka_does_not_log_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    out: List[str] = []
    log = LibrdkafkaLog("Producer clientId=console-producer", "localhost:9999", out.append)
    log.log(40, "%s [%s] %s", "ERROR", "rdkafka#producer-1", "[thrd:app]: rdkafka#producer-1: 1/1 brokers are down")
    log.log(40, "%s [%s] %s", "FAIL", "rdkafka#producer-1",
            "[thrd:127.0.0.1:9092/1]: 127.0.0.1:9092/1: Disconnected (after 5000ms in state UP)")
    log.log(20, "%s [%s] %s", "CONFWARN", "rdkafka#producer-1", "[thrd:app]: informational")
    assert out == []
    log.log(30, "%s [%s] %s", "SSL", "rdkafka#producer-1",
            "[thrd:ssl://h:9093/bootstrap]: ssl://h:9093/bootstrap: SSL handshake failed")
    assert len(out) == 1 and "WARN [Producer clientId=console-producer] " in out[0] and "SSL handshake failed" in out[0]


def test_protocol_client_retries_at_kafkas_backoff_then_names_the_call(capsys: pytest.CaptureFixture[str]) -> None:
    pc = ProtocolClient(f"127.0.0.1:{_free_port()}", retry_timeout_s=1.2, log_label="AdminClient clientId=x")
    start = time.monotonic()
    with pytest.raises(NodeAssignmentTimeout) as e:
        pc.refresh_metadata(call="listTopics")
    assert 1.1 <= time.monotonic() - start < 5
    assert str(e.value) == ("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
                            "Call: listTopics")
    warns = [line for line in capsys.readouterr().err.splitlines() if " WARN " in line]
    assert 4 <= len(warns) <= 6, warns  # attempts at 0, 50, 150, 350 and 750 ms; the next would be at 1550
    assert all("[AdminClient clientId=x] Connection to node -1 (/127.0.0.1:" in w for w in warns)


def test_protocol_client_without_retries_fails_at_once() -> None:
    pc = ProtocolClient(f"127.0.0.1:{_free_port()}")
    start = time.monotonic()
    with pytest.raises(Exception) as e:
        pc.refresh_metadata()
    assert time.monotonic() - start < 1 and "Cannot connect" in str(e.value)
