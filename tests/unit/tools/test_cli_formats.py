"""Output and input formats of the tools: Java renderings, the console formatter and line reader, and the small
parsers of consumer-groups, configs, get-offsets, delete-records and broker-api-versions."""
from __future__ import annotations

import datetime
import uuid

import pytest

from tools.cli import configs, consumer_groups, delete_records, get_offsets
from tools.cli.broker_api_versions import KAFKA_API_KEYS, versions_text
from tools.cli.console_producer import LineMessageReader, ReaderError
from tools.cli.java_format import hashmap_order, java_string_hash, topic_partition_hash, uuid_text
from tools.cli.message_formatter import DefaultMessageFormatter, FormatterError
from tools.cli.options import CommandError, OptionParser


# ------------------------------------------------------------------------------------------------ Java renderings
def test_uuid_text_is_kafkas_url_safe_base64() -> None:
    u = uuid.UUID("0850b21e-68e1-4b38-b730-8e3f6441a9ae")
    assert uuid_text(u) == "CFCyHmjhSzi3MI4_ZEGprg"
    assert uuid_text(u.bytes) == uuid_text(u)
    assert uuid_text("CFCyHmjhSzi3MI4/ZEGprg") == "CFCyHmjhSzi3MI4_ZEGprg"  # librdkafka's text


def test_java_hashes_and_hashmap_order() -> None:
    assert java_string_hash("") == 0 and java_string_hash("a") == 97
    assert java_string_hash("cleanup.policy") == -537988164
    assert topic_partition_hash("cg", 0) == 31 * 31 + java_string_hash("cg")
    # what Kafka 3.9's tools printed in these cases (checked against the real tools)
    assert hashmap_order([("cg", 0), ("cg", 1)], hash_fn=lambda tp: topic_partition_hash(*tp)) == [("cg", 1), ("cg", 0)]
    assert hashmap_order(["producer_byte_rate", "consumer_byte_rate"], initial_capacity=2) == \
        ["consumer_byte_rate", "producer_byte_rate"]
    assert hashmap_order(["b", "a"], initial_capacity=2) == ["a", "b"]


def test_java_double_rendering() -> None:
    assert [configs.java_double(v) for v in (1024.0, 10485760.0, 1e7, 0.5, 1e-4, 50)] == \
        ["1024.0", "1.048576E7", "1.0E7", "0.5", "1.0E-4", "50.0"]


# ------------------------------------------------------------------------------------------------ console tools
def test_default_message_formatter_fields_and_separators() -> None:
    f = DefaultMessageFormatter({"print.timestamp": "true", "print.key": "true", "print.partition": "true",
                                 "print.offset": "true", "print.headers": "true", "key.separator": " | "})
    line = f.format((1, 1700000000000), 2, 7, [("h1", b"v1"), ("h2", None)], None, b"value")
    assert line == b"CreateTime:1700000000000 | Partition:2 | Offset:7 | h1:v1,h2:null | null | value\n"
    f = DefaultMessageFormatter({"print.value": "false", "print.offset": "true", "line.separator": ";"})
    assert f.format((0, -1), 0, 3, None, b"k", b"v") == b"Offset:3;"
    f = DefaultMessageFormatter({"print.headers": "true", "print.timestamp": "true", "null.literal": "<nil>"})
    assert f.format((2, 5), 0, 0, [], None, None) == b"LogAppendTime:5\tNO_HEADERS\t<nil>\n"


def test_formatter_deserializers() -> None:
    f = DefaultMessageFormatter({"print.key": "true",
                                 "key.deserializer": "org.apache.kafka.common.serialization.LongDeserializer",
                                 "value.deserializer": "org.apache.kafka.common.serialization.IntegerDeserializer"})
    assert f.format((1, 0), 0, 0, None, (42).to_bytes(8, "big"), (-1).to_bytes(4, "big", signed=True)) == b"42\t-1\n"
    with pytest.raises(FormatterError):
        f.format((1, 0), 0, 0, None, b"short", b"1234")
    with pytest.raises(ValueError, match="not available"):
        DefaultMessageFormatter({"value.deserializer": "com.example.AvroDeserializer"})


def test_line_reader_keys_headers_and_null_marker() -> None:
    r = LineMessageReader({"parse.key": "true", "parse.headers": "true", "null.marker": "NULL"})
    assert r.parse("h1:v1,h2:NULL\tk\tv") == (b"k", b"v", [("h1", b"v1"), ("h2", None)])
    assert r.parse("NULL\tNULL\tNULL") == (None, None, [])
    r = LineMessageReader({"parse.key": "true", "key.separator": "::"})
    assert r.parse("a::b::c") == (b"a", b"b::c", [])
    with pytest.raises(ReaderError, match="No key separator found on line number 2: 'abc'"):
        r.parse("abc")
    r = LineMessageReader({"parse.key": "true", "ignore.error": "true"})
    assert r.parse("abc") == (None, b"abc", [])
    r = LineMessageReader({"parse.headers": "true"})
    with pytest.raises(ReaderError, match="No header key separator found in pair 'bad' on line number 1"):
        r.parse("bad\tvalue")
    with pytest.raises(CommandError, match="headers.delimiter and headers.separator may not be equal"):
        LineMessageReader({"headers.delimiter": ",", "headers.separator": ","})


# ------------------------------------------------------------------------------------------------ consumer groups
def test_durations_and_datetimes() -> None:
    assert consumer_groups.parse_duration_ms("PT1H") == 3600000
    assert consumer_groups.parse_duration_ms("P1DT2M3.5S") == 86400000 + 123500
    assert consumer_groups.parse_duration_ms("-PT10S") == -10000
    with pytest.raises(consumer_groups.GroupError, match="Text cannot be parsed to a Duration"):
        consumer_groups.parse_duration_ms("1 hour")
    assert consumer_groups.parse_datetime_ms("2024-01-02T03:04:05.678Z") == \
        int(datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc).timestamp() * 1000)
    assert consumer_groups.parse_datetime_ms("2024-01-02T05:04:05.678+02:00") == \
        consumer_groups.parse_datetime_ms("2024-01-02T03:04:05.678Z")
    local = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000).astimezone()
    assert consumer_groups.parse_datetime_ms("2024-01-02T03:04:05.678") == int(local.timestamp() * 1000)
    with pytest.raises(consumer_groups.GroupError, match="does not contain a 'T'"):
        consumer_groups.parse_datetime_ms("2024-01-02 03:04:05")


def test_members_assignment_text() -> None:
    assert consumer_groups._assignment_text([("t", 10), ("t", 2), ("a", 0)]) == "a(0), t(10,2)"
    assert consumer_groups._assignment_text([]) == "-"


# ------------------------------------------------------------------------------------------------ configs
def _configs_opts(*argv: str):
    return configs.build_parser().parse(list(argv))


def test_add_config_keeps_bracketed_commas() -> None:
    o = _configs_opts("--add-config", "SCRAM-SHA-256=[iterations=8192,password=p=w,d],cleanup.policy=[compact,delete],"
                                      "ssl.endpoint.identification.algorithm=")
    assert configs.parse_configs_to_add(o) == {"SCRAM-SHA-256": "iterations=8192,password=p=w,d",
                                               "cleanup.policy": "compact,delete",
                                               "ssl.endpoint.identification.algorithm": ""}
    with pytest.raises(configs.ConfigArgError, match='must be in the format "key=val"'):
        configs.parse_configs_to_add(_configs_opts("--add-config", "novalue"))


def test_entity_names_follow_the_command_line_order() -> None:
    o = _configs_opts("--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-name", "c")
    assert configs.entity_types(o) == ["users", "clients"] and configs.entity_names(o) == ["", "c"]
    o = _configs_opts("--user", "alice", "--client-defaults")
    assert configs.entity_types(o) == ["users", "clients"] and configs.entity_names(o) == ["alice", ""]


@pytest.mark.parametrize("argv,message", [
    (["--describe", "--entity-type", "topics", "--entity-type", "brokers", "--bootstrap-server", "h:1"],
     "Only 'users' and 'clients' entity types may be specified together"),
    (["--describe", "--entity-type", "groups", "--bootstrap-server", "h:1"], "Invalid entity type groups"),
    (["--alter", "--entity-type", "topics", "--bootstrap-server", "h:1", "--add-config", "a=b"],
     "an entity name must be specified with --alter of topics"),
    (["--alter", "--entity-type", "brokers", "--entity-name", "x", "--bootstrap-server", "h:1", "--add-config", "a=b"],
     "must be a valid integer broker id"),
    (["--describe", "--entity-type", "topics"], "One of the required --bootstrap-server"),
])
def test_configs_argument_checks(argv: list, message: str) -> None:
    with pytest.raises(configs.ConfigArgError, match=message):
        configs.check_args(_configs_opts(*argv))


# ------------------------------------------------------------------------------------------------ get-offsets
def test_get_offsets_time_and_filters() -> None:
    assert [get_offsets.parse_time(t) for t in ("latest", "-2", "max-timestamp", "1700000000000")] == \
        [-1, -2, -3, 1700000000000]
    with pytest.raises(get_offsets.OffsetError, match="Malformed time argument x"):
        get_offsets.parse_time("x")
    p = get_offsets.build_parser()
    filters = get_offsets.build_filters(p.parse(["--topic-partitions", "t.*:1-3,:5-,u,v:-1", "--exclude-internal-topics"]))

    def selected(t: str, part: int) -> bool:
        return any(tf(t) and pf(part) for tf, pf in filters)
    assert selected("t1", 1) and selected("t1", 2) and not selected("t1", 3)
    assert selected("x", 5) and selected("x", 9) and not selected("x", 4)
    assert selected("u", 7) and selected("v", 0) and not selected("v", 1)
    assert not selected("__consumer_offsets", 5)
    with pytest.raises(get_offsets.OffsetError, match="cannot be used with --topic"):
        get_offsets.build_filters(p.parse(["--topic-partitions", "t", "--topic", "t"]))


# ------------------------------------------------------------------------------------------------ delete-records
def test_offset_json() -> None:
    assert delete_records.parse_offsets('{"partitions":[{"topic":"t","partition":1,"offset":-1}],"version":1}') == \
        [("t", 1, -1)]
    with pytest.raises(CommandError, match="The input string is not a valid JSON"):
        delete_records.parse_offsets("garbage")
    with pytest.raises(CommandError, match="duplicate topic partitions: t-1"):
        delete_records.parse_offsets('{"partitions":[{"topic":"t","partition":1,"offset":1},'
                                     '{"topic":"t","partition":1,"offset":2}]}')


# ------------------------------------------------------------------------------------------------ api versions
def test_api_versions_text() -> None:
    text = versions_text({0: (0, 11), 18: (0, 5), 47: (0, 0), 1000: (0, 1)})
    lines = text.splitlines()
    assert lines[0] == "(" and lines[-1] == ")"
    assert "\tProduce(0): 0 to 11 [usable: 11]," in lines
    assert "\tApiVersions(18): 0 to 5 [usable: 4]," in lines       # the client side stops at Kafka 3.9's v4
    assert "\tOffsetDelete(47): 0 [usable: 0]," in lines
    assert "\tFetch(1): UNSUPPORTED," in lines
    assert "\tUNKNOWN(1000): 0 to 1" in lines
    assert not any(line.startswith("\tVote(52)") for line in lines)  # controller-only APIs are not client APIs
    assert len(KAFKA_API_KEYS) == 88


def test_every_parser_builds() -> None:
    from tools.cli import broker_api_versions, console_consumer, console_producer, consumer_perf_test, topics

    for module in (topics, console_producer, console_consumer, consumer_groups, configs, get_offsets, delete_records,
                   broker_api_versions, consumer_perf_test):
        p = module.build_parser()
        assert isinstance(p, OptionParser) and p.help_table().startswith("Option")
