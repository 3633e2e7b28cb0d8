"""Metrics: the Prometheus endpoint mirroring Kafka's MBeans under the JMX exporter's names.

``stats`` holds what the hot paths write (plain counters, sample rings; no prometheus_client import),
``names`` the one table of exported names, ``collector`` turns both into Prometheus families at scrape time,
``endpoint`` serves them when ``broker.metrics.prometheus.port`` is set. docs/metrics.md lists every metric.
"""
