"""The pure parts of kafka-reassign-partitions and kafka-leader-election: Kafka's throttle lists, JSON formats,
option checks and output orders (the tools themselves are judged against Kafka's in
tests/integration/tools/test_tools_cluster_admin.py)."""
from __future__ import annotations

import json

import pytest

from tools.cli import leader_election as le
from tools.cli import reassign_partitions as rp
from tools.cli.options import CommandError, UsageError


def test_proposed_moves_and_throttle_lists_follow_kafka() -> None:
    current = {("t", 0): [0, 1], ("t", 1): [1, 2]}
    proposed = {("t", 0): [1, 2], ("t", 1): [2, 0]}
    moves = rp.proposed_moves({}, proposed, current)
    assert moves == {"t": {0: ({0, 1}, {2}), 1: ({1, 2}, {0})}}
    assert rp.leader_throttles(moves) == {"t": "0:0,0:1,1:1,1:2"}
    assert rp.follower_throttles(moves) == {"t": "0:2,1:0"}
    assert rp.reassigning_brokers(moves) == [0, 1, 2]


def test_a_running_reassignment_gives_the_sources_and_its_topic_keeps_throttles() -> None:
    ongoing = {("t", 0): ([1, 0], [1], [0]), ("u", 3): ([5, 4, 6], [6], [])}
    moves = rp.proposed_moves(ongoing, {("t", 0): [1]}, {("t", 0): [1, 0]})
    assert moves["t"][0] == ({0}, {1})  # sources: replicas less the adding ones
    assert moves["u"][3] == ({4, 5}, {6})
    assert rp.leader_throttles(moves) == {"t": "0:0", "u": "3:4,3:5"}
    assert rp.follower_throttles(moves) == {"t": "0:1", "u": "3:6"}


def test_throttle_entries_sort_as_strings_like_kafkas_treeset() -> None:
    moves = {"t": {10: ({1}, {2}), 2: ({1}, {3})}}
    assert rp.leader_throttles(moves) == {"t": "10:1,2:1"}


def test_reassignment_json_is_jacksons_compact_form_sorted() -> None:
    text = rp.reassignment_json({("b", 1): [2, 0], ("a", 10): [1], ("a", 2): [0]}, {("b", 1, 0): "/d"})
    assert text == ('{"version":1,"partitions":[{"topic":"a","partition":2,"replicas":[0],"log_dirs":["any"]},'
                    '{"topic":"a","partition":10,"replicas":[1],"log_dirs":["any"]},'
                    '{"topic":"b","partition":1,"replicas":[2,0],"log_dirs":["any","/d"]}]}')


def test_parse_reassignment_keeps_duplicates_and_log_dirs() -> None:
    text = json.dumps({"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "/x"]},
                                      {"topic": "a", "partition": 0, "replicas": [3]}]})
    targets, dirs = rp.parse_reassignment(text)
    assert targets == [(("a", 0), [1, 2]), (("a", 0), [3])]
    assert dirs == {("a", 0, 2): "/x"}
    with pytest.raises(rp.ToolError, match="Not supported version field value 2"):
        rp.parse_reassignment('{"version": 2, "partitions": []}')
    with pytest.raises(rp.ToolError, match=r"Size of replicas list \[1, 2\] is different from size of log dirs "
                                           r"list \[any\] for partition a-0"):
        rp.parse_reassignment('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2], '
                              '"log_dirs": ["any"]}]}')


def test_broker_list_parses_as_integer_parseint() -> None:
    assert rp._parse_broker_list("0,12,-1") == [0, 12, -1]
    for bad in ("0, 1", "0,", "x", "99999999999"):
        with pytest.raises(rp.ToolError, match="For input string"):
            rp._parse_broker_list(bad)


def test_action_checks_are_kafkas() -> None:
    parser = rp.build_parser()

    def check(*argv: str) -> str:
        return rp.validate(parser.parse(list(argv)))

    assert check("--bootstrap-server", "b:1", "--list") == "list"
    with pytest.raises(UsageError, match="exactly one action"):
        check("--bootstrap-server", "b:1")
    with pytest.raises(UsageError, match="Please specify --bootstrap-server"):
        check("--list")
    with pytest.raises(UsageError, match=r'Missing required argument "\[broker-list\]"'):
        check("--bootstrap-server", "b:1", "--generate", "--topics-to-move-json-file", "f")
    with pytest.raises(UsageError, match=r'Option "\[additional\]" can\'t be used with action "\[verify\]"'):
        check("--bootstrap-server", "b:1", "--verify", "--reassignment-json-file", "f", "--additional")


def test_move_states_text() -> None:
    states = {("t", 0, 2): ("completed", "/a", "/a", None), ("t", 0, 1): ("active", "/a", "/b", "/b"),
              ("s", 1, 1): ("cancelled", "/a", "/b", None), ("s", 0, 1): ("missing-dir", None, "/b", None)}
    assert rp.log_dir_states_text(states).splitlines() == [
        "Partition s-0 is not found in any live log dir on broker 1. There is likely an offline log directory on "
        "the broker.",
        "Partition s-1 on broker 1 is not being moved from log dir /a to /b.",
        "Reassignment of replica t-0-1 is still in progress.",
        "Reassignment of replica t-0-2 completed successfully."]


def test_election_report_orders_as_a_java_hashset_and_fails_on_errors(capsys: pytest.CaptureFixture) -> None:
    results = {("ra", 1): (0, None), ("le", 1): (0, None), ("ra", 0): (0, None), ("le", 0): (84, None),
               ("x", 0): (3, "The partition does not exist.")}
    assert le.report("PREFERRED", results) == 1
    out, err = capsys.readouterr()
    # the order of a java.util.HashSet<TopicPartition> holding these three (checked with Java)
    assert out.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions ra-0, le-1, ra-1",
        "Valid replica already elected for partitions le-0",
        "Error completing leader election (PREFERRED) for partition: x-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The partition does not exist."]
    assert err == "1 replica(s) could not be elected\n"


def test_election_data_file() -> None:
    assert le.parse_election_data('{"partitions": [{"topic": "a", "partition": 1}]}') == [("a", 1)]
    with pytest.raises(CommandError, match='missing "partitions" field'):
        le.parse_election_data('{"x": []}')
    with pytest.raises(CommandError, match=r"contains duplicate partitions: \[a-1\]"):
        le.parse_election_data('{"partitions": [{"topic": "a", "partition": 1}, {"topic": "a", "partition": 1}]}')
