"""kafka-leader-election, kafka-reassign-partitions and zookeeper-shell on a 3-broker cluster of the project's brokers
(bin/ processes on a real ZooKeeper), judged by Apache Kafka 3.9.1's own LeaderElectionCommand,
ReassignPartitionsCommand and ZooKeeperMainWithTlsSupportForKafka run against the same cluster.

Both tool families act on the same cluster, each on its own topics: ``<name>Aa`` for Kafka's tools and ``<name>BB``
for ours (equal Java hash codes, so the HashSet orders Kafka's tools print in are the same), set up alike, so that
each pair of outputs is equal once the family is masked. What is random (``--generate``'s proposal) is masked and
checked for validity instead; where Kafka prints a Java stack trace after an error line, only the lines before it
are compared. The effects are checked too: leaders, replica sets and the throttle configs (with a stock client).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.harness.cluster_ops import matches_kafka_assignment, module_cluster, produce_values, wait_for
from tests.harness.kafka import kafka_classpath
from tests.integration.tools.kafka_tools import ToolRun, run_kafka_batch, run_tool, without_log_lines
from tools.cluster import ROOT, LocalCluster

pytestmark = pytest.mark.slow

Command = Tuple[str, Sequence[str], Optional[str]]
FAMILIES = {"kafka": "Aa", "ours": "BB"}
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three project brokers; no automatic preferred-leader rebalance, so the elections are the tools' own."""
    with module_cluster(Path(tmp_path_factory.mktemp("admin-tools")), zookeeper, 3,
                        overrides={"auto.leader.rebalance.enable": "false"}) as c:
        yield c


# ------------------------------------------------------------------------------------------------ helpers
def both(cluster: LocalCluster, tool: str, args: Sequence[str], files: Optional[Dict[str, object]] = None,
         tmp: Optional[Path] = None) -> Tuple[ToolRun, ToolRun]:
    """Kafka's tool on the Aa family, then ours on the BB family: ``{bs}`` is the cluster, ``{F}`` the family,
    ``{file:name}`` a JSON file written from ``files[name]`` with the family filled in."""
    runs = []
    for who, fam in FAMILIES.items():
        expanded = []
        for a in args:
            a = a.replace("{bs}", cluster.bootstrap).replace("{F}", fam)
            m = re.fullmatch(r"\{file:(\w+)\}", a)
            if m:
                assert files is not None and tmp is not None
                path = tmp / f"{m.group(1)}-{fam}.json"
                path.write_text(json.dumps(files[m.group(1)]).replace("{F}", fam))
                a = str(path)
            expanded.append(a)
        runs.append(run_kafka_batch([(tool, expanded, None)])[0] if who == "kafka" else run_tool(tool, *expanded))
    return runs[0], runs[1]


def masked(text: str, paths: bool = True) -> str:
    text = re.sub(r"(Aa|BB)\b", "<F>", re.sub(r"(Aa|BB)(?=[-.\"])", "<F>", text))
    return re.sub(r"/\S*/(\w+)-<F>\.json", r"<dir>/\1-<F>.json", text) if paths else text


def before_trace(text: str) -> str:
    """The lines before a Java stack trace (its exception line and ``\\tat`` lines)."""
    out = []
    for line in text.splitlines():
        if line.startswith("\tat ") or re.match(r"^[a-z]+(\.[a-zA-Z_$0-9]+)+(Exception|Error)\b", line):
            break
        out.append(line)
    return "\n".join(out)


def assert_same(kafka: ToolRun, ours: ToolRun, what: str, stderr_first_line: bool = True) -> None:
    k = (kafka.code, masked(before_trace(kafka.stdout)))
    o = (ours.code, masked(before_trace(ours.stdout)))
    assert o == k, f"{what}: stdout differs\nKafka's: {k!r}\nours:    {o!r}\nour stderr: {ours.stderr[-2000:]}"
    if stderr_first_line:
        ke = masked((without_log_lines(kafka.stderr).strip().splitlines() or [""])[0])
        oe = masked((without_log_lines(ours.stderr).strip().splitlines() or [""])[0])
        assert oe == ke, f"{what}: stderr differs\nKafka's: {kafka.stderr[-1500:]!r}\nours:    {ours.stderr!r}"


def ok(run: ToolRun) -> ToolRun:
    assert run.code == 0, f"exit {run.code}\nstdout: {run.stdout}\nstderr: {run.stderr[-3000:]}"
    return run


def create(cluster: LocalCluster, name: str, assignment: str) -> None:
    ok(run_tool("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", name,
                "--replica-assignment", assignment))


def partitions(cluster: LocalCluster, topic: str) -> Dict[int, Tuple[int, List[int]]]:
    """partition -> (leader, replicas), through a stock client."""
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=15)
    return {p.id: (p.leader, list(p.replicas)) for p in md.topics[topic].partitions.values()}


def no_reassignments(cluster: LocalCluster) -> bool:
    return "No partition reassignments found." in ok(run_tool("reassign-partitions", "--bootstrap-server",
                                                              cluster.bootstrap, "--list")).stdout


def reorder(cluster: LocalCluster, tmp: Path, replicas: Dict[Tuple[str, int], List[int]]) -> None:
    """Change preferred leaders without moving data: the same replicas in another order (the leader stays)."""
    f = tmp / "reorder.json"
    f.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                          for (t, p), r in replicas.items()]}))
    ok(run_tool("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--execute",
                "--reassignment-json-file", str(f)))
    wait_for(lambda: no_reassignments(cluster) and all(
        partitions(cluster, t)[p][1] == r for (t, p), r in replicas.items()), 60, "reordered replicas")


def configs(cluster: LocalCluster, rtype: int, name: str, keys: Sequence[str]) -> Dict[str, str]:
    """The dynamic (non-default) values of ``keys`` on a broker or topic."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    res = ConfigResource(rtype, name)
    entries = admin.describe_configs([res])[res].result(30)
    return {k: e.value for k, e in entries.items() if k in keys and not e.is_default and e.value is not None}


BROKER, TOPIC = ConfigResource.Type.BROKER, ConfigResource.Type.TOPIC


# ------------------------------------------------------------------------------------------------ options
def test_help_and_command_line_errors_match_kafka(cluster: LocalCluster, tmp_path: Path) -> None:
    """--help is Kafka's table byte for byte; each bad command line fails as Kafka's tool fails (same exit code,
    same first line on each stream: Kafka follows some with a stack trace)."""
    bs = cluster.bootstrap
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]}')
    sizes = tmp_path / "sizes.json"
    sizes.write_text('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]}')
    empty = tmp_path / "empty.json"
    empty.write_text('{"partitions": []}')
    dup_topics = tmp_path / "topics.json"
    dup_topics.write_text('{"topics": [{"topic": "a"}, {"topic": "a"}], "version": 1}')
    dup_parts = tmp_path / "dup-parts.json"
    dup_parts.write_text('{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}')
    cases: List[Tuple[str, List[str]]] = [
        ("leader-election", ["--help"]),
        ("leader-election", []),
        ("leader-election", ["--bootstrap-server", bs]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "preferred"]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "sometimes", "--all-topic-partitions"]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "preferred", "--topic", "t"]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "preferred", "--partition", "1",
                             "--all-topic-partitions"]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "UNCLEAN", "--topic", "t", "--partition",
                             "0", "--all-topic-partitions"]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "preferred", "--partition", "x"]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "preferred", "--path-to-json-file",
                             str(tmp_path / "missing.json")]),
        ("leader-election", ["--bootstrap-server", bs, "--election-type", "preferred", "--path-to-json-file",
                             str(dup_parts)]),
        ("leader-election", ["--bootstrap-server", bs, "--nope"]),
        ("reassign-partitions", ["--help"]),
        ("reassign-partitions", []),
        ("reassign-partitions", ["--list"]),
        ("reassign-partitions", ["--bootstrap-server", bs]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--list", "--verify"]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--execute"]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--generate", "--broker-list", "0"]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--list", "--throttle", "5"]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--verify", "--reassignment-json-file", str(bad),
                                 "--additional"]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(bad),
                                 "--throttle", "fast"]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(bad)]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(sizes)]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(empty)]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--execute", "--reassignment-json-file",
                                 str(tmp_path / "missing.json")]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--generate", "--broker-list", "0,0",
                                 "--topics-to-move-json-file", str(dup_topics)]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--generate", "--broker-list", "0,x",
                                 "--topics-to-move-json-file", str(dup_topics)]),
        ("reassign-partitions", ["--bootstrap-server", bs, "--generate", "--broker-list", "0,1",
                                 "--topics-to-move-json-file", str(dup_topics)]),
    ]
    theirs = run_kafka_batch([(tool, args, None) for tool, args in cases])
    for (tool, args), k in zip(cases, theirs):
        o = run_tool(tool, *args)
        what = f"kafka-{tool} {' '.join(args)}"
        assert k.code == 1, f"{what}: Kafka's tool exited {k.code}: {k.stdout} {k.stderr[-1000:]}"
        assert_same(k, o, what)
        if args in (["--help"], []):
            assert o.stderr == k.stderr, f"{what}: help differs\nKafka's:\n{k.stderr}\nours:\n{o.stderr}"


# ------------------------------------------------------------------------------------------------ elections
def test_leader_election_matches_kafka(cluster: LocalCluster, tmp_path: Path) -> None:
    """Preferred elections of one partition, of a JSON file's partitions and of all partitions, unclean elections
    where a leader is alive, and elections of a partition that does not exist: Kafka's lines, and the leaders
    really move to the preferred replicas."""
    for fam in FAMILIES.values():
        create(cluster, f"le{fam}", "0:1:2,0:1:2,1:2:0")
    wait_for(lambda: all(partitions(cluster, f"le{f}")[0][0] == 0 for f in FAMILIES.values()), 30, "leaders")
    # preferred leaders 1 and 2 for partitions 0 and 1, while broker 0 still leads them
    reorder(cluster, tmp_path, {(f"le{f}", p): r for f in FAMILIES.values()
                                for p, r in ((0, [1, 0, 2]), (1, [2, 1, 0]))})
    for fam in FAMILIES.values():
        assert {p: lr[0] for p, lr in partitions(cluster, f"le{fam}").items()} == {0: 0, 1: 0, 2: 1}

    election_file = {"partitions": [{"topic": "le{F}", "partition": 1}, {"topic": "le{F}", "partition": 2}]}
    steps: List[Tuple[List[str], str]] = [
        (["--election-type", "preferred", "--topic", "le{F}", "--partition", "0"],
         "Successfully completed leader election (PREFERRED) for partitions le<F>-0"),
        (["--election-type", "PREFERRED", "--topic", "le{F}", "--partition", "0"],
         "Valid replica already elected for partitions le<F>-0"),
        (["--election-type", "preferred", "--path-to-json-file", "{file:election}"],
         "Successfully completed leader election (PREFERRED) for partitions le<F>-1\n"
         "Valid replica already elected for partitions le<F>-2"),
        (["--election-type", "unclean", "--topic", "le{F}", "--partition", "1"],
         "Valid replica already elected for partitions le<F>-1"),
        (["--election-type", "preferred", "--topic", "nosuch{F}", "--partition", "0"],
         "Error completing leader election (PREFERRED) for partition: nosuch<F>-0: "
         "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"),
    ]
    for args, expected in steps:
        k, o = both(cluster, "leader-election", ["--bootstrap-server", "{bs}", *args],
                    {"election": election_file}, tmp_path)
        assert_same(k, o, " ".join(args))
        assert masked(o.stdout).startswith(expected), o.stdout
    assert o.code == 1 and o.stderr.strip() == "1 replica(s) could not be elected"
    wait_for(lambda: all({p: lr[0] for p, lr in partitions(cluster, f"le{f}").items()} == {0: 1, 1: 2, 2: 1}
                         for f in FAMILIES.values()), 30, "the elected leaders")

    # --all-topic-partitions: both families' partition 0 made non-preferred again before each tool's run
    def all_partitions(tool_family: str, new_order: List[int]) -> ToolRun:
        reorder(cluster, tmp_path, {(f"le{f}", 0): new_order for f in FAMILIES.values()})
        args = ["--bootstrap-server", cluster.bootstrap, "--election-type", "preferred", "--all-topic-partitions"]
        run = run_kafka_batch([("leader-election", args, None)])[0] if tool_family == "kafka" \
            else run_tool("leader-election", *args)
        wait_for(lambda: all(partitions(cluster, f"le{f}")[0][0] == new_order[0] for f in FAMILIES.values()), 30,
                 "the preferred leaders")
        return run

    ok(run_tool("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
                "--all-topic-partitions"))  # nothing else in the cluster left to elect
    k = all_partitions("kafka", [2, 1, 0])
    o = all_partitions("ours", [0, 2, 1])
    assert_same(k, o, "--all-topic-partitions")
    assert ok(o).stdout == "Successfully completed leader election (PREFERRED) for partitions leAa-0, leBB-0\n"


# ------------------------------------------------------------------------------------------------ reassignment
def test_generate_execute_verify_match_kafka(cluster: LocalCluster, tmp_path: Path) -> None:
    """--generate (current assignment, a valid proposal of Kafka's algorithm), --execute with a throttle (the
    throttle configs Kafka's tool sets), --verify once done (throttles cleared), --list, and the errors of bad
    reassignments."""
    for fam in FAMILIES.values():
        create(cluster, f"ra{fam}", "0:1,1:2")
    topics = {"topics": [{"topic": "ra{F}"}], "version": 1}
    k, o = both(cluster, "reassign-partitions", ["--bootstrap-server", "{bs}", "--generate", "--broker-list",
                                                 "0,1,2", "--topics-to-move-json-file", "{file:topics}"],
                {"topics": topics}, tmp_path)

    def proposal_masked(run: ToolRun) -> str:
        return re.sub(r"(Proposed partition reassignment configuration\n).*", r"\1<proposal>", run.stdout)

    assert (o.code, masked(proposal_masked(o))) == (k.code, masked(proposal_masked(k))), (k.stdout, o.stdout)
    assert o.stdout.startswith('Current partition replica assignment\n{"version":1,"partitions":[{"topic":"raBB",'
                               '"partition":0,"replicas":[0,1],"log_dirs":["any","any"]},{"topic":"raBB",'
                               '"partition":1,"replicas":[1,2],"log_dirs":["any","any"]}]}\n\n')
    proposal = json.loads(o.stdout.rstrip("\n").splitlines()[-1])
    placed = {e["partition"]: e["replicas"] for e in proposal["partitions"]}
    assert [e["log_dirs"] for e in proposal["partitions"]] == [["any", "any"]] * 2
    assert matches_kafka_assignment(placed, [0, 1, 2], 2), placed

    for args in (["--generate", "--broker-list", "0", "--topics-to-move-json-file", "{file:topics}"],
                 ["--generate", "--broker-list", "0,1", "--topics-to-move-json-file", "{file:missing}"]):
        k, o = both(cluster, "reassign-partitions", ["--bootstrap-server", "{bs}", *args],
                    {"topics": topics, "missing": {"topics": [{"topic": "nosuch{F}"}]}}, tmp_path)
        assert_same(k, o, " ".join(args))
        assert o.code == 1 and o.stdout.startswith("Error: "), o.stdout

    target = {"version": 1, "partitions": [{"topic": "ra{F}", "partition": 0, "replicas": [1, 2]},
                                           {"topic": "ra{F}", "partition": 1, "replicas": [2, 0]}]}
    for bad in ({"partitions": [{"topic": "ra{F}", "partition": 0, "replicas": [1, 7]}]},
                {"partitions": [{"topic": "ra{F}", "partition": 5, "replicas": [1, 2]}]},
                {"partitions": [{"topic": "nosuch{F}", "partition": 0, "replicas": [1, 2]}]}):
        k, o = both(cluster, "reassign-partitions", ["--bootstrap-server", "{bs}", "--execute",
                                                     "--reassignment-json-file", "{file:bad}"], {"bad": bad}, tmp_path)
        assert_same(k, o, json.dumps(bad))
        assert o.code == 1 and o.stdout.startswith("Error: "), o.stdout

    # --execute with a throttle, one family after the other (a running reassignment blocks the next --execute)
    runs: Dict[str, Tuple[ToolRun, Dict[str, str], Dict[str, str]]] = {}
    for who, fam in FAMILIES.items():
        f = tmp_path / f"target-{fam}.json"
        f.write_text(json.dumps(target).replace("{F}", fam))
        args = ["--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(f),
                "--throttle", "50000000"]
        run = run_kafka_batch([("reassign-partitions", args, None)])[0] if who == "kafka" \
            else run_tool("reassign-partitions", *args)
        topic_cfg = configs(cluster, TOPIC, f"ra{fam}", TOPIC_THROTTLE_KEYS)
        broker_cfg = configs(cluster, BROKER, "0", THROTTLE_KEYS)
        wait_for(lambda: no_reassignments(cluster), 60, "the reassignment to finish")
        verify_args = ["--bootstrap-server", cluster.bootstrap, "--verify", "--reassignment-json-file", str(f)]
        verified = run_kafka_batch([("reassign-partitions", verify_args, None)])[0] if who == "kafka" \
            else run_tool("reassign-partitions", *verify_args)
        runs[who] = (run, topic_cfg, broker_cfg)
        runs[who + "-verify"] = (verified, configs(cluster, TOPIC, f"ra{fam}", TOPIC_THROTTLE_KEYS),
                                 configs(cluster, BROKER, "0", THROTTLE_KEYS))
        assert {p: r for p, (_, r) in partitions(cluster, f"ra{fam}").items()} == {0: [1, 2], 1: [2, 0]}
    for step in ("", "-verify"):
        k_run, k_topic, k_broker = runs["kafka" + step]
        o_run, o_topic, o_broker = runs["ours" + step]
        assert_same(k_run, o_run, "--execute --throttle" if not step else "--verify")
        assert (o_topic, o_broker) == (k_topic, k_broker), (step, k_topic, k_broker, o_topic, o_broker)
    assert runs["ours"][1] == {"leader.replication.throttled.replicas": "0:0,0:1,1:1,1:2",
                               "follower.replication.throttled.replicas": "0:2,1:0"}
    assert runs["ours"][2] == {"leader.replication.throttled.rate": "50000000",
                               "follower.replication.throttled.rate": "50000000"}
    assert runs["ours-verify"][1:] == ({}, {})
    assert runs["ours-verify"][0].stdout == ("Status of partition reassignment:\n"
                                             "Reassignment of partition raBB-0 is completed.\n"
                                             "Reassignment of partition raBB-1 is completed.\n\n"
                                             "Clearing broker-level throttles on brokers 0,1,2\n"
                                             "Clearing topic-level throttles on topic raBB\n")
    k, o = both(cluster, "reassign-partitions", ["--bootstrap-server", "{bs}", "--list"])
    assert_same(k, o, "--list")
    assert o.stdout == "No partition reassignments found.\n"


def test_running_reassignment_list_verify_additional_cancel_match_kafka(cluster: LocalCluster,
                                                                        tmp_path: Path) -> None:
    """A reassignment held back by a 1 KB/s throttle: --list and --verify show it running (and --verify keeps the
    throttles), a second --execute is refused without --additional, --additional changes the throttle, --cancel
    stops it, puts the replicas back and clears the throttles."""
    for fam in FAMILIES.values():
        create(cluster, f"slow{fam}", "0")
        produce_values(cluster.bootstrap, f"slow{fam}", [os.urandom(10000) for _ in range(300)], partition=0)
    target = {"version": 1, "partitions": [{"topic": "slow{F}", "partition": 0, "replicas": [1]}]}
    results: Dict[str, List[ToolRun]] = {}
    for who, fam in FAMILIES.items():
        f = tmp_path / f"slow-{fam}.json"
        f.write_text(json.dumps(target).replace("{F}", fam))
        base = ["--bootstrap-server", cluster.bootstrap]
        commands: List[List[str]] = [
            base + ["--execute", "--reassignment-json-file", str(f), "--throttle", "1024"],
            base + ["--list"],
            base + ["--verify", "--reassignment-json-file", str(f)],
            base + ["--execute", "--reassignment-json-file", str(f), "--throttle", "2048"],
            base + ["--execute", "--reassignment-json-file", str(f), "--throttle", "2048", "--additional"],
        ]
        runs = []
        for args in commands:
            runs.append(run_kafka_batch([("reassign-partitions", args, None)])[0] if who == "kafka"
                        else run_tool("reassign-partitions", *args))
            if args[2] == "--verify":  # a running reassignment keeps its throttles
                assert configs(cluster, TOPIC, f"slow{fam}", TOPIC_THROTTLE_KEYS) == {
                    "leader.replication.throttled.replicas": "0:0", "follower.replication.throttled.replicas": "0:1"}
        assert configs(cluster, BROKER, "1", THROTTLE_KEYS) == {"leader.replication.throttled.rate": "2048",
                                                                "follower.replication.throttled.rate": "2048"}
        cancel = base + ["--cancel", "--reassignment-json-file", str(f)]
        runs.append(run_kafka_batch([("reassign-partitions", cancel, None)])[0] if who == "kafka"
                    else run_tool("reassign-partitions", *cancel))
        wait_for(lambda: no_reassignments(cluster) and partitions(cluster, f"slow{fam}")[0][1] == [0], 60,
                 "the cancelled reassignment's replicas back")
        assert configs(cluster, TOPIC, f"slow{fam}", TOPIC_THROTTLE_KEYS) == {}
        assert configs(cluster, BROKER, "1", THROTTLE_KEYS) == {}
        results[who] = runs
    names = ["--execute", "--list", "--verify", "--execute again", "--execute --additional", "--cancel"]
    for name, k, o in zip(names, results["kafka"], results["ours"]):
        assert_same(k, o, name)
    ours = [r.stdout for r in results["ours"]]
    assert ours[1] == "Current partition reassignments:\nslowBB-0: replicas: 1,0. adding: 1. removing: 0.\n"
    assert ours[2] == "Status of partition reassignment:\nReassignment of partition slowBB-0 is still in progress.\n\n"
    assert results["ours"][3].code == 1 and ours[3].startswith("Cannot execute because there is an existing")
    assert ours[5] == ("Successfully cancelled partition reassignment for: slowBB-0\n"
                       "None of the specified partition moves are active.Clearing broker-level throttles on brokers "
                       "0,1,2\nClearing topic-level throttles on topic slowBB\n")


def test_log_dir_move_within_a_broker_matches_kafka(cluster: LocalCluster, tmp_path: Path) -> None:
    """``log_dirs`` naming the replica's own log dir: the move is accepted at once and --verify reports it done."""
    for fam in FAMILIES.values():
        create(cluster, f"ld{fam}", "1")
    log_dir = str(cluster.broker(1).log_dir)
    target = {"version": 1, "partitions": [{"topic": "ld{F}", "partition": 0, "replicas": [1],
                                            "log_dirs": [log_dir]}]}
    for action in ("--execute", "--verify"):
        k, o = both(cluster, "reassign-partitions", ["--bootstrap-server", "{bs}", action,
                                                     "--reassignment-json-file", "{file:target}"],
                    {"target": target}, tmp_path)
        assert_same(k, o, action)
        ok(o)
    assert "Reassignment of replica ldBB-0-1 completed successfully." in o.stdout


def test_unclean_election_of_an_offline_partition_matches_kafka(cluster: LocalCluster, tmp_path: Path) -> None:
    """Partitions whose only in-sync replica is down: a preferred election fails as Kafka's does, an unclean one
    makes the live out-of-sync replica the leader (--admin.config read as Kafka reads it)."""
    for fam in FAMILIES.values():
        create(cluster, f"un{fam}", "2:0")
    wait_for(lambda: all(partitions(cluster, f"un{f}")[0][0] == 2 for f in FAMILIES.values()), 30, "leaders")
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text("request.timeout.ms=20000\nclient.id=election-test\n")
    cluster.broker(0).stop()
    cluster.broker(2).stop()
    cluster.broker(0).start()
    try:
        wait_for(lambda: all(partitions(cluster, f"un{f}")[0][0] == -1 for f in FAMILIES.values()), 60,
                 "the partitions offline")
        for election, code in (("preferred", 1), ("unclean", 0), ("unclean", 0)):
            k, o = both(cluster, "leader-election", ["--bootstrap-server", "{bs}", "--admin.config",
                                                     str(admin_config), "--election-type", election, "--topic",
                                                     "un{F}", "--partition", "0"])
            assert_same(k, o, f"--election-type {election}")
            assert o.code == code, o
            if election == "preferred":  # the controller's reason, worded as Kafka's controller words it
                assert o.stdout == ("Error completing leader election (PREFERRED) for partition: unBB-0: "
                                    "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: Failed to "
                                    "elect leader for partition unBB-0 under strategy "
                                    "PreferredReplicaPartitionLeaderElectionStrategy\n")
        assert masked(o.stdout) == "Valid replica already elected for partitions un<F>-0\n"
        assert masked(k.stdout) == "Valid replica already elected for partitions un<F>-0\n"
        wait_for(lambda: all(partitions(cluster, f"un{f}")[0][0] == 0 for f in FAMILIES.values()), 30,
                 "the unclean leaders")
    finally:
        cluster.broker(2).start()
    wait_for(lambda: all(len(set(p.isrs)) == 2 for t in ("unAa", "unBB") for p in AdminClient(
        {"bootstrap.servers": cluster.bootstrap}).list_topics(t, timeout=15).topics[t].partitions.values()), 60,
        "broker 2 back in sync")


# ------------------------------------------------------------------------------------------------ zookeeper-shell
def _kafka_zookeeper_shell(args: Sequence[str]) -> ToolRun:
    """Kafka 3.9.1's zookeeper-shell.sh: ZooKeeperMainWithTlsSupportForKafka with Kafka's tools-log4j settings."""
    r = subprocess.run(["java", "-Xmx256m", f"-Dlog4j.configuration=file:{ROOT / 'config/tools-log4j.properties'}",
                        "-cp", kafka_classpath(), "org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka",
                        "-server", *args], capture_output=True, text=True, timeout=120)
    return ToolRun(r.returncode, r.stdout, r.stderr)


def _zookeeper_shell(args: Sequence[str], stdin: Optional[str] = None) -> ToolRun:
    r = subprocess.run([str(ROOT / "bin/zookeeper-shell.sh"), *args], input=stdin, capture_output=True, text=True,
                       timeout=120, cwd="/")
    return ToolRun(r.returncode, r.stdout, r.stderr)


#: ZooKeeperMain's event thread prints "WATCHER::" and the connection's WatchedEvent in pieces that can land inside
#: the command's own output (in Kafka's zookeeper-shell as in ours: both are ZooKeeper's CLI), e.g. "[0, " WatchedEvent
#: "1, 2]"; a clean-clone run met it once.
_WATCHER = re.compile(r"WATCHER::|WatchedEvent state:\S+ type:\S+ path:\S+(?: zxid: -?\d+)?")


def _shell_output(stdout: str) -> Tuple[str, str]:
    """(the "Connecting to" line, the command's output with the watcher's pieces and every line break removed)."""
    first, _, rest = stdout.partition("\n")
    return first, _WATCHER.sub("", rest).replace("\n", "")


def test_zookeeper_shell_matches_kafkas(cluster: LocalCluster) -> None:
    """Reads of the cluster's znodes (its chroot in the connect string), a missing znode and an unknown command
    print what Kafka's zookeeper-shell prints, with the same exit codes; interactive commands from stdin work."""
    zk = cluster.zk_connect
    for args in (["ls", "/brokers/ids"], ["get", "/brokers/ids/0"], ["ls", "/nosuch"], ["stat", "/nosuch"]):
        k = _kafka_zookeeper_shell([zk, *args])
        o = _zookeeper_shell([zk, *args])
        assert o.code == k.code, (args, k, o)
        assert _shell_output(o.stdout)[1] == _shell_output(k.stdout)[1], (args, k.stdout, o.stdout)
        assert _shell_output(o.stdout)[0] == _shell_output(k.stdout)[0] == f"Connecting to {zk}"
        strip = re.compile(r"^\[[^\]]+\] ", re.M)
        assert strip.sub("", o.stderr) == strip.sub("", k.stderr), (args, k.stderr, o.stderr)
    assert _shell_output(_zookeeper_shell([zk, "ls", "/brokers/ids"]).stdout)[1] == "[0, 1, 2]"
    interactive = _zookeeper_shell([zk], stdin="get /controller\nquit\n")
    assert interactive.code == 0 and '"brokerid":' in _shell_output(interactive.stdout)[1], interactive
    usage = _zookeeper_shell([])
    assert usage.code == 1 and usage.stdout.startswith("USAGE: ") and "zookeeper_host:port[/path]" in usage.stdout
    refused = _zookeeper_shell([zk, "-zk-tls-config-file", "/tmp/x.properties", "ls", "/"])
    assert refused.code == 1 and "not supported by this broker's tools" in refused.stderr
