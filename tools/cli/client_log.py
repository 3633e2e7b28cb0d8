"""The log lines of Kafka's Java clients, as the tools print them on stderr (Kafka's config/tools-log4j.properties:
WARN and above, ``[%d] %p %m (%c)%n``), and the rate at which they come.

When a broker cannot be reached, Kafka's NetworkClient logs one warning per connection attempt::

    [2026-01-01 10:00:00,123] WARN [AdminClient clientId=adminclient-1] Connection to node -1
    (localhost/127.0.0.1:9999) could not be established. Node may not be available.
    (org.apache.kafka.clients.NetworkClient)

(one line), and attempts follow the reconnect backoff: 50 ms doubling up to 1 s (``reconnect.backoff.ms``,
``reconnect.backoff.max.ms``), so about 66 lines in a minute. Bootstrap servers are nodes -1, -2, ... in the order
given. This module gives:

- ``log_line``/``log``: one line in that layout (``ERROR`` lines may carry a second line, as Kafka's exception
  text does);
- ``ReconnectBackoff``: Kafka's backoff schedule, for clients that connect themselves (the protocol client);
- ``LibrdkafkaLog``: a confluent-kafka ``logger`` that turns librdkafka's log (``%3|...|FAIL|rdkafka#...`` lines,
  up to ~20 a second for one unreachable broker) into those warnings, at most one per node per Kafka backoff
  step; librdkafka's "all brokers are down" and plain disconnect notices, which Kafka logs below WARN, are
  dropped, and any other warning or error keeps librdkafka's text in Kafka's layout (rate-limited the same way);
- ``serve_logs``: a thread polling an AdminClient's main queue, where its log lines wait (a Producer or Consumer
  serves them from its own ``poll``/``flush``).
"""
from __future__ import annotations

import datetime
import ipaddress
import logging
import re
import socket
import sys
import threading
from time import monotonic
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["log_line", "log", "socket_address", "ReconnectBackoff", "connection_warning", "LibrdkafkaLog",
           "serve_logs", "client_label", "with_kafka_log", "NETWORK_CLIENT"]

NETWORK_CLIENT = "org.apache.kafka.clients.NetworkClient"
#: Kafka's client defaults: reconnect.backoff.ms, reconnect.backoff.max.ms
BACKOFF_MS, BACKOFF_MAX_MS = 50, 1000


def log_line(level: str, message: str, logger: str) -> str:
    """``[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)``, log4j's ISO8601 date in local time."""
    now = datetime.datetime.now()
    return f"[{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}] {level} {message} ({logger})"


def log(level: str, message: str, logger: str, stream: Any = None) -> None:
    print(log_line(level, message, logger), file=stream or sys.stderr, flush=True)


_addresses: Dict[Tuple[str, int], str] = {}


def socket_address(host: str, port: int) -> str:
    """Java's InetSocketAddress.toString: ``localhost/127.0.0.1:9999``, ``/127.0.0.1:9999`` for an address given as
    an IP literal, ``host/<unresolved>:9999`` when the name does not resolve."""
    key = (host, port)
    if key not in _addresses:
        try:
            ip = ipaddress.ip_address(host)
            _addresses[key] = f"/{_java_ip(ip)}:{port}"
        except ValueError:
            try:
                resolved = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0]
                _addresses[key] = f"{host}/{_java_ip(ipaddress.ip_address(resolved))}:{port}"
            except (OSError, ValueError):
                _addresses[key] = f"{host}/<unresolved>:{port}"
    return _addresses[key]


def _java_ip(ip: Any) -> str:
    if ip.version == 4:
        return str(ip)
    return "[" + ":".join(f"{int(ip.exploded.replace(':', '')[i:i + 4], 16):x}" for i in range(0, 32, 4)) + "]"


def client_label(role: str, client_id: str, group_id: Optional[str] = None) -> str:
    """The ``[AdminClient clientId=adminclient-1]`` prefix of a client's log lines."""
    label = f"{role} clientId={client_id}"
    if group_id:
        label += f", groupId={group_id}"
    return label


def connection_warning(label: str, node_id: int, host: str, port: int) -> str:
    return (f"[{label}] Connection to node {node_id} ({socket_address(host, port)}) could not be established. "
            "Node may not be available.")


class ReconnectBackoff:
    """Kafka's exponential reconnect backoff for one node: 50, 100, 200, 400, 800, 1000, 1000 ... ms."""

    def __init__(self, base_ms: int = BACKOFF_MS, max_ms: int = BACKOFF_MAX_MS) -> None:
        self.base_ms, self.max_ms = max(0, base_ms), max(base_ms, max_ms)
        self.failures = 0
        self.next_at = 0.0

    def failed(self, now: Optional[float] = None) -> float:
        """Record a failed attempt; returns the delay (s) before the next one."""
        delay = min(self.base_ms * (2 ** min(self.failures, 30)), self.max_ms) / 1000.0
        self.failures += 1
        self.next_at = (monotonic() if now is None else now) + delay
        return delay

    def reset(self) -> None:
        self.failures, self.next_at = 0, 0.0

    def ready(self, now: Optional[float] = None) -> bool:
        return (monotonic() if now is None else now) >= self.next_at


#: librdkafka's broker names: ``host:port/bootstrap``, ``host:port/<node id>``
_THREAD = re.compile(r"^\[thrd:[^\]]*\]: (?:(?P<broker>[^ ]+?:\d+/(?:bootstrap|-?\d+)): )?(?P<text>.*)$", re.S)
_BROKER = re.compile(r"^(?P<host>.+):(?P<port>\d+)/(?P<node>bootstrap|-?\d+)$")
_CONNECT_FAILED = ("Connect to ", "Connection refused", "Connection setup timed out", "connect() failed",
                   "Failed to resolve")
_DROPPED = ("brokers are down", "broker is down")


class LibrdkafkaLog:
    """A confluent-kafka ``logger`` (``conf["logger"]``): librdkafka's log as Kafka's client warnings on stderr,
    bounded by Kafka's reconnect backoff per node (so never more lines than Kafka's client would print)."""

    def __init__(self, label: str, bootstrap: str, write: Optional[Callable[[str], None]] = None) -> None:
        self.label = label
        self.bootstrap: List[str] = [s.strip() for s in bootstrap.split(",") if s.strip()]
        self._write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self._limits: Dict[Any, ReconnectBackoff] = {}
        self._lock = threading.Lock()
        self.lines = 0

    # confluent-kafka calls logger.log(level, "%s [%s] %s", facility, client name, text)
    def log(self, level: int, fmt: str, *args: Any) -> None:
        try:
            facility, _, text = (str(a) for a in args[:3])
        except ValueError:
            return
        if level < logging.WARNING:
            return
        self.handle(facility, text)

    def handle(self, facility: str, text: str) -> None:
        m = _THREAD.match(text)
        broker, body = (m.group("broker"), m.group("text")) if m else (None, text)
        if any(d in body for d in _DROPPED):
            return
        if facility == "FAIL" and body.startswith("Disconnected") and "state UP" in body:
            return  # an idle or closed connection: Kafka logs that below WARN
        node = self._node(broker) if broker else None
        if node is not None and facility == "FAIL" and any(c in body for c in _CONNECT_FAILED):
            key: Any = ("connect", node[0])
            line = log_line("WARN", connection_warning(self.label, *node), NETWORK_CLIENT)
        else:
            key = (facility, broker)
            line = log_line("WARN", f"[{self.label}] {_librdkafka_text(body)}", NETWORK_CLIENT)
        now = monotonic()
        with self._lock:
            limit = self._limits.setdefault(key, ReconnectBackoff())
            if not limit.ready(now):
                return
            limit.failed(now)
            self.lines += 1
        self._write(line)

    def _node(self, broker: str) -> Optional[Tuple[int, str, int]]:
        m = _BROKER.match(broker)
        if not m:
            return None
        host, port = m.group("host"), int(m.group("port"))
        if m.group("node") == "bootstrap":
            address = f"{host}:{port}"
            node_id = -(self.bootstrap.index(address) + 1) if address in self.bootstrap else -1
        else:
            node_id = int(m.group("node"))
        return node_id, host.strip("[]"), port


def _librdkafka_text(body: str) -> str:
    """librdkafka's text without its counters ("..., 3 identical error(s) suppressed")."""
    return re.sub(r",? ?\d+ identical error\(s\) suppressed", "", body).strip()


def serve_logs(client: Any, interval_s: float = 0.1) -> Callable[[], None]:
    """Poll ``client`` (an AdminClient) in a daemon thread so its log lines reach the logger; returns a stop
    function (also run at exit)."""
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            try:
                client.poll(interval_s)
            except Exception:  # the client is being torn down
                return

    t = threading.Thread(target=pump, name="librdkafka-log", daemon=True)
    t.start()

    def halt() -> None:
        stop.set()
        if t is not threading.current_thread():
            t.join(2.0)

    import atexit

    atexit.register(halt)
    return halt


def with_kafka_log(conf: Dict[str, Any], role: str, default_client_id: str,
                   group_id: Optional[str] = None) -> Dict[str, Any]:
    """``conf`` (a confluent-kafka configuration) with librdkafka's log routed through ``LibrdkafkaLog`` and Kafka's
    reconnect backoff (50 ms to 1 s) unless the user's properties set one."""
    out = dict(conf)
    label = client_label(role, str(out.get("client.id") or default_client_id), group_id)
    out.setdefault("reconnect.backoff.ms", BACKOFF_MS)
    out.setdefault("reconnect.backoff.max.ms", BACKOFF_MAX_MS)
    out["logger"] = LibrdkafkaLog(label, str(out.get("bootstrap.servers", "")))
    return out
