"""Tiered storage's topic keys answered as Kafka 3.9.1 (ZooKeeper mode, tiered storage off) answers them: the
same CreateTopics and IncrementalAlterConfigs responses from a real Kafka broker and ours (the differential
module's Pair: every field compared)."""
from __future__ import annotations

from tests.integration.test_differential_kafka import (  # noqa: F401  (kafka, ours, pair: fixtures)
    SET, TOPIC, Pair, create_topics, incremental, kafka, new_topic, ours, pair, topic_spec,
)


def test_remote_storage_topic_keys(pair: Pair) -> None:  # noqa: F811  (the imported fixture)
    for i, configs in enumerate((
            {"remote.storage.enable": "true"},
            {"remote.storage.enable": "true", "cleanup.policy": "compact"},
            {"remote.log.copy.disable": "true"},
            {"remote.log.delete.on.disable": "true", "remote.storage.enable": "true"},
            {"remote.storage.enable": "false", "local.retention.ms": "-1", "local.retention.bytes": "5"})):
        create_topics(pair, topic_spec(f"rs-create-{i}", 1, configs=configs))
    new_topic(pair, "rs-alter")
    incremental(pair, TOPIC, "rs-alter", [("remote.storage.enable", SET, "true")])
    incremental(pair, TOPIC, "rs-alter", [("remote.log.copy.disable", SET, "true")])
    incremental(pair, TOPIC, "rs-alter", [("remote.log.delete.on.disable", SET, "false"),
                                          ("local.retention.bytes", SET, "-2")])
