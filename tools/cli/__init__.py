"""Kafka's command-line tools, with Kafka's names, flags and output, for this broker (and any Kafka broker).

One module per tool (``python -m tools.cli.<tool>``, wrapped by ``bin/kafka-<tool>.sh``) on a small shared core:

- ``options``: joptsimple-style option parsing and help tables, as Kafka's tools print them;
- ``client_config``: client properties in Kafka's Java names (``--command-config`` and friends) mapped to
  confluent-kafka/librdkafka settings and to the settings of the raw protocol client;
- ``protocol_client``: a small blocking Kafka client on the project's own codec, for the APIs confluent-kafka's
  AdminClient lacks (client quotas, offset delete, per-broker ApiVersions ...);
- ``command``: running a tool's ``main`` with Kafka's exit codes and error lines.

Each tool's ``main(argv=None) -> int`` is also a console entry point (pyproject.toml).
"""
