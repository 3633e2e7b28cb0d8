from broker.storage.config import LONG_MAX, LogConfig

import pytest


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.cleanup_policy == ("delete",)
    assert c.compression_type == "producer"
    assert c.file_delete_delay_ms == 60000
    assert c.flush_messages == LONG_MAX
    assert c.message_timestamp_type == "CreateTime"


def test_from_props_parses_kafka_keys_and_round_trips() -> None:
    c = LogConfig.from_props({"segment.bytes": "1000", "cleanup.policy": "compact,delete",
                              "unclean.leader.election.enable": "true", "min.cleanable.dirty.ratio": "0.1",
                              "message.timestamp.type": "LogAppendTime", "x.unknown": "1"})
    assert c.segment_bytes == 1000 and c.compact and c.delete
    assert c.unclean_leader_election_enable is True
    assert c.min_cleanable_dirty_ratio == 0.1
    assert c.log_append_time
    assert c.extra == {"x.unknown": "1"}
    assert LogConfig.from_props(c.to_props()) == c


def test_from_props_with_base_and_bad_values() -> None:
    base = LogConfig(retention_ms=5)
    assert LogConfig.from_props({"segment.ms": "7"}, base).retention_ms == 5
    with pytest.raises(ValueError):
        LogConfig.from_props({"segment.bytes": "abc"})
    with pytest.raises(ValueError):
        LogConfig.from_props({"message.timestamp.type": "Nope"})
