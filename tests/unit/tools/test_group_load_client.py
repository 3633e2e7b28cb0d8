"""The group load generator's own wire code and consumer protocol agree with the project's codec and Kafka's rules."""
from __future__ import annotations

from broker.coordinator.group.records import parse_subscribed_topics
from broker.protocol.api import ApiKey, encode_request, encode_response
from tools.bench.group_client import (decode_assignment, decode_subscription_topics, encode_assignment,
                                      encode_subscription, range_assign)
from tools.bench.group_wire import (encode_heartbeat_v4, encode_offset_commit_v8, heartbeat_v4_error,
                                    offset_commit_v8_errors)
from tools.cli.dump_log_decoders import consumer_assignment_json, consumer_subscription_json


def test_offset_commit_v8_bytes_match_the_codec() -> None:
    offsets = [("t-1", [(0, 5), (3, 1 << 40)]), ("tü", [(7, 0)])]
    ours = encode_offset_commit_v8(42, "member-1", "group-é", 9, "m-1-abc", offsets)
    body = {"group_id": "group-é", "generation_id_or_member_epoch": 9, "member_id": "m-1-abc",
            "group_instance_id": None, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                            "committed_metadata": ""} for p, o in ps]} for t, ps in offsets]}
    assert ours == encode_request(ApiKey.OFFSET_COMMIT, 8, 42, "member-1", body)


def test_heartbeat_v4_bytes_match_the_codec() -> None:
    ours = encode_heartbeat_v4(7, "c", "g", 3, "m")
    assert ours == encode_request(ApiKey.HEARTBEAT, 4, 7, "c", {"group_id": "g", "generation_id": 3,
                                                                 "member_id": "m", "group_instance_id": None})


def test_response_error_codes_are_read() -> None:
    resp = encode_response(ApiKey.OFFSET_COMMIT, 8, 5, {"throttle_time_ms": 0, "topics": [
        {"name": "a", "partitions": [{"partition_index": 0, "error_code": 0},
                                     {"partition_index": 1, "error_code": 27}]},
        {"name": "b" * 200, "partitions": [{"partition_index": 2, "error_code": 0}]}]})[0]
    assert offset_commit_v8_errors(memoryview(resp)[4:]) == {0: 2, 27: 1}
    hb = encode_response(ApiKey.HEARTBEAT, 4, 5, {"throttle_time_ms": 0, "error_code": 22})[0]
    assert heartbeat_v4_error(memoryview(hb)[4:]) == 22


def test_subscription_and_assignment_parse_as_kafka_tools_do() -> None:
    sub = encode_subscription(["b", "a"], generation_id=4)
    assert decode_subscription_topics(sub) == ["a", "b"]
    assert parse_subscribed_topics(sub) == ["a", "b"]
    assert consumer_subscription_json(sub) == {"topics": ["a", "b"], "userData": None, "ownedPartitions": [],
                                               "generationId": 4, "rackId": None}
    asg = encode_assignment({"t": [0, 2], "s": [1]})
    assert decode_assignment(asg) == {"s": [1], "t": [0, 2]}
    assert consumer_assignment_json(asg) == {"assignedPartitions": [{"topic": "s", "partitions": [1]},
                                                                    {"topic": "t", "partitions": [0, 2]}],
                                             "userData": None}


def test_range_assignor_as_kafka() -> None:
    """RangeAssignor's javadoc example: C0, C1 on t0, t1 of 3 partitions each."""
    plan = range_assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert plan == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}
    plan = range_assign({"m-b": ["t"], "m-a": ["t"], "m-c": ["t"]}, {"t": 10})
    assert plan == {"m-a": {"t": [0, 1, 2, 3]}, "m-b": {"t": [4, 5, 6]}, "m-c": {"t": [7, 8, 9]}}
    assert range_assign({"a": ["t"], "b": ["t"]}, {"t": 1}) == {"a": {"t": [0]}, "b": {}}
