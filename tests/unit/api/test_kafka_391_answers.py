"""Answers corrected after the differential checks against a real Kafka 3.9.1 broker
(tests/integration/test_differential_kafka.py): each test pins one detail Kafka sends, at the function that builds it."""
from __future__ import annotations

import asyncio
import types
from typing import Any

from broker.api import api_versions, list_offsets, produce
from broker.api.configs import _broker_entity, _entry_dict, _is_java_int, _logger_entries, invalid_value_message
from broker.api.registry import ApiRegistry
from broker.cluster.topic_names import colliding_topics, invalid_topic_reason
from broker.config.defs import BROKER_CONFIGS, TOPIC_SYNONYMS
from broker.config.topic_defs import TOPIC_CONFIGS, validate_topic_configs
from broker.config.types import ConfigError, ConfigSource, ConfigType, InvalidConfigError
from broker.errors import ErrorCode
from broker.replica.manager import ProduceResult


def ns(**kw: Any) -> Any:
    return types.SimpleNamespace(**kw)


def test_api_versions_unsupported_version_lists_only_api_versions() -> None:
    reg = ApiRegistry()
    reg.register(18, "API_VERSIONS", 0, 4, None)  # type: ignore[arg-type]
    reg.register(0, "PRODUCE", 0, 11, None)  # type: ignore[arg-type]
    assert sorted(k["api_key"] for k in reg.api_versions_body()["api_keys"]) == [0, 18]
    assert reg.api_versions_body(error_code=35)["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_api_versions_checks_client_software_from_v3() -> None:
    good = ns(client_software_name="confluent-kafka-python", client_software_version="2.5.0-rdkafka-2.5.0")
    assert api_versions.valid_client_software(good, 3)
    for name, version in (("bad name!", "1.0"), ("ok", "-1"), ("", "1.0"), ("ok", "1.")):
        assert not api_versions.valid_client_software(ns(client_software_name=name, client_software_version=version), 3)
    assert api_versions.valid_client_software(ns(client_software_name="bad name!", client_software_version=""), 2)
    ctx = ns(api_version=3)
    r = asyncio.run(api_versions.handle(ctx, ns(client_software_name="a b", client_software_version="1"),
                                        registry=None))  # type: ignore[arg-type]
    assert (r["error_code"], r["api_keys"]) == (ErrorCode.INVALID_REQUEST, [])


def test_topic_name_reasons_use_kafka_wording() -> None:
    assert invalid_topic_reason("") == "Topic name is invalid: the empty string is not allowed"
    assert invalid_topic_reason("a/b") == ("Topic name is invalid: 'a/b' contains one or more characters other than "
                                           "ASCII alphanumerics, '.', '_' and '-'")
    assert invalid_topic_reason("a" * 250) == (f"Topic name is invalid: the length of '{'a' * 250}' is longer than "
                                               "the max allowed length 249")
    assert invalid_topic_reason("ok.name") is None


def test_colliding_topics() -> None:
    existing = ["a.b", "a_b", "x", "a-b"]
    assert colliding_topics("a_b", existing) == ["a.b"]
    assert colliding_topics("a.b", ["a_b", "a.b"]) == ["a_b"]
    assert colliding_topics("ab", existing) == []


def test_list_offsets_duplicate_partitions() -> None:
    topics = [ns(name="t", partitions=[ns(partition_index=0), ns(partition_index=1), ns(partition_index=0)]),
              ns(name="u", partitions=[ns(partition_index=0)]), ns(name="u", partitions=[ns(partition_index=0)])]
    assert list_offsets.duplicate_partitions(topics) == {("t", 0), ("u", 0)}


def test_produce_partition_answer_follows_kafka_error_rules() -> None:
    too_large = ProduceResult(ErrorCode.MESSAGE_TOO_LARGE, -1, -1, 0, [], "batch too large")
    assert produce.partition_answer(0, too_large)["log_start_offset"] == -1
    assert produce.partition_answer(0, too_large)["error_message"] is None
    control = ProduceResult(ErrorCode.INVALID_RECORD, -1, -1, 5, [], "clients may not write control records")
    assert (produce.partition_answer(0, control)["log_start_offset"],
            produce.partition_answer(0, control)["error_message"]) == (5, None)
    named = ProduceResult(ErrorCode.INVALID_RECORD, -1, -1, 5, [(1, "bad key")], "One or more records were rejected")
    assert produce.partition_answer(0, named)["error_message"] == "One or more records were rejected"
    ok = ProduceResult(0, 7, -1, 0, [], None)
    assert (produce.partition_answer(3, ok)["base_offset"], produce.partition_answer(3, ok)["index"]) == (7, 3)


def test_describe_configs_entry_details() -> None:
    entry = next(e for e in _logger_entries() if e.name == "root")
    d = _entry_dict(entry, 4, True, True)
    assert (d["config_type"], d["documentation"], d["is_default"]) == (ConfigType.UNKNOWN, "", False)
    assert d["value"] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
    default = types.SimpleNamespace(name="x", value="1", is_sensitive=False, read_only=False,
                                    source=ConfigSource.DEFAULT_CONFIG, synonyms=[], config_type=ConfigType.INT,
                                    documentation="d")
    assert _entry_dict(default, 0, True, False)["is_default"] is False  # Kafka 3.9 never sets it


def test_broker_resource_names() -> None:
    assert _is_java_int("7") and _is_java_int("-3") and not _is_java_int("zero") and not _is_java_int("99999999999")
    assert _broker_entity(0, "zero")[1] == "Broker id must be an integer, but it is: zero"
    assert _broker_entity(0, "3")[1] == "Unexpected broker id, expected 0 or empty string, but received 3"
    assert _broker_entity(0, "3", altering=True)[1] == "Unexpected broker id, expected 0, but received 3"


def test_topic_value_errors_are_prefixed_with_the_resource() -> None:
    try:
        validate_topic_configs({"retention.ms": "never"})
    except InvalidConfigError as exc:
        assert isinstance(exc.__cause__, ConfigError)
        assert invalid_value_message("t", exc) == (
            "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
            "Invalid value never for configuration retention.ms: Not a number of type LONG")
    else:
        raise AssertionError("retention.ms=never accepted")
    try:
        validate_topic_configs({"no.such": "1"})
    except InvalidConfigError as exc:
        assert not isinstance(exc.__cause__, ConfigError)  # an unknown name keeps its own message


def test_kafka_391_topic_configs_and_synonyms() -> None:
    assert {"remote.log.copy.disable", "remote.log.delete.on.disable"} <= set(TOPIC_CONFIGS)
    assert TOPIC_SYNONYMS["local.retention.ms"] == [("log.local.retention.ms", 1)]
    assert TOPIC_SYNONYMS["local.retention.bytes"] == [("log.local.retention.bytes", 1)]
    assert TOPIC_SYNONYMS["message.format.version"] == [("log.message.format.version", 1)]
    assert BROKER_CONFIGS["log.local.retention.ms"].default == -2


def test_fetch_entries_for_unknown_partitions_and_failed_reads() -> None:
    from broker.api.fetch import _partition_entry
    from broker.replica.manager import ReadResult
    assert _partition_entry(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)["aborted_transactions"] == []
    assert _partition_entry(0, 0, ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))["aborted_transactions"] == []
    out_of_range = _partition_entry(0, 0, ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE))
    assert (out_of_range["aborted_transactions"], out_of_range["high_watermark"]) == (None, -1)


def test_failed_log_read_reports_no_offsets() -> None:
    from broker.replica.manager import _read_logs, _ReadJob
    from broker.storage.errors import OffsetOutOfRangeError
    from broker.storage.log_offsets import LogOffsets

    class Log:
        high_watermark, log_end_offset, log_start_offset, last_stable_offset = 12, 12, 3, 12
        offsets = LogOffsets(3, 3, 12)

        def read(self, *a: Any, **kw: Any) -> Any:
            raise OffsetOutOfRangeError("offset 50 is past the log end 12")

    from broker.replica.partition import Partition
    plog: Any = Log()
    p = Partition("t", 0, 1, log=plog)
    res = _read_logs([_ReadJob(("t", 0), p, plog, 50, 1000, "hw", -1)], 1000, True)[("t", 0)]
    assert (res.error_code, res.high_watermark, res.last_stable_offset, res.log_start_offset, res.records) == (
        ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1, None)


def test_admin_refuses_colliding_names_and_words_errors_as_kafka() -> None:
    from broker.cluster.admin import AdminManager
    meta = ns(topics={"a.b": None}, topic=lambda n: None, live_broker_ids=lambda: [0], brokers={0: ns(rack=None)})
    admin = AdminManager(ns(get=lambda k: 1), meta, None, None, None)  # type: ignore[arg-type]
    r = admin._plan("a_b", 1, 1, [], {})
    assert (r.error_code, r.error_message) == (ErrorCode.INVALID_TOPIC_EXCEPTION,
                                               "Topic 'a_b' collides with existing topics: a.b")
    assert admin._plan("c", 0, 1, [], {}).error_message == "Number of partitions must be larger than 0."
    assert admin._plan("c", 1, -2, [], {}).error_message == "Replication factor must be larger than 0."
    assert admin._plan("c", -1, -1, [(1, [0])], {}).error_message == (
        "partitions should be a consecutive 0-based integer sequence")
    assert admin._plan("c", -1, -1, [(0, [0, 0])], {}).error_message == (
        "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(0, 0))")
    assert asyncio.run(admin.delete_topic("nope", 1000)) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)


def test_find_coordinator_messages() -> None:
    from broker.api import find_coordinator
    from broker.errors import KAFKA_INVALID_REQUEST_MESSAGE

    async def ensure() -> int:
        return 0

    coordinator = ns(ensure_offsets_topic=ensure, partition_for=lambda key: 0)
    endpoint = ns(host="h", port=9092)
    metadata = ns(partition=lambda t, p: ns(leader=0), brokers={0: ns(broker_id=0, endpoint=lambda name: endpoint)})

    def ask(version: int, body: dict) -> dict:
        ctx = ns(api_version=version, listener_name="PLAINTEXT")
        return asyncio.run(find_coordinator.handle(ctx, ns(**body), coordinator=coordinator,  # type: ignore[arg-type]
                                                   metadata=metadata))  # type: ignore[arg-type]

    v4 = ask(4, {"key_type": 0, "coordinator_keys": ["g"]})["coordinators"][0]
    assert (v4["error_code"], v4["error_message"], v4["port"]) == (0, "", 9092)
    v3 = ask(3, {"key_type": 0, "key": "g"})
    assert (v3["error_code"], v3["error_message"]) == (0, "NONE")
    bad = ask(4, {"key_type": 5, "coordinator_keys": ["x"]})["coordinators"][0]
    assert (bad["error_code"], bad["error_message"]) == (ErrorCode.INVALID_REQUEST, KAFKA_INVALID_REQUEST_MESSAGE)
