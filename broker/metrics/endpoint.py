"""The Prometheus endpoint (opt-in: ``broker.metrics.prometheus.port``): prometheus_client's threaded HTTP server.

The server runs on its own daemon threads (one per scrape), so a scrape never runs on, or waits for, the event
loop; it serves ``/metrics`` (any path, as prometheus_client does) from a registry holding only this broker's
collector and the process collector (``process_*``: CPU, memory, open files).

Start and stop are blocking (bind, thread start, shutdown handshake): call them from an executor.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Optional, Tuple

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from broker.metrics.collector import BrokerCollector, MetricsSources
from broker.stats import BrokerTopicStats, RequestMetrics

log = logging.getLogger(__name__)


class MetricsEndpoint:
    """Owns the statistics the hot paths write to and the HTTP server that exposes them."""

    def __init__(self, sources: MetricsSources, port: int, host: str = "") -> None:
        self.port = port
        self.host = host
        self.requests = RequestMetrics()
        self.topics = BrokerTopicStats()
        self.registry = CollectorRegistry()
        self.registry.register(BrokerCollector(sources, self.requests, self.topics))
        ProcessCollector(registry=self.registry)
        self._server: Optional[Any] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def bound_port(self) -> int:
        """The port serving scrapes (the chosen one when the config asked for port 0)."""
        return int(self._server.server_port) if self._server is not None else self.port

    def start(self) -> None:
        """Bind and serve (blocking; OSError if the port is taken)."""
        server_and_thread: Tuple[Any, threading.Thread] = start_http_server(
            self.port, addr=self.host or "0.0.0.0", registry=self.registry)
        self._server, self._thread = server_and_thread
        log.info("Prometheus metrics endpoint listening on %s:%d", self.host or "0.0.0.0", self.bound_port)

    def stop(self) -> None:
        """Stop serving and close the socket (blocking: waits for the serving loop to end)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


__all__ = ["MetricsEndpoint"]
