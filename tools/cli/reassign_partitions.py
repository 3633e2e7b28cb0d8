"""kafka-reassign-partitions.sh: move partitions between brokers (and log dirs), as Kafka 3.9's
ReassignPartitionsCommand.

    kafka-reassign-partitions.sh --bootstrap-server b:9092 --generate --topics-to-move-json-file t.json --broker-list 1
    kafka-reassign-partitions.sh --bootstrap-server b:9092 --execute --reassignment-json-file r.json [--throttle N]
    kafka-reassign-partitions.sh --bootstrap-server b:9092 --verify --reassignment-json-file r.json
    kafka-reassign-partitions.sh --bootstrap-server b:9092 --cancel --reassignment-json-file r.json
    kafka-reassign-partitions.sh --bootstrap-server b:9092 --list

Output, throttles and errors are Kafka's: ``--execute --throttle`` sets ``leader/follower.replication.throttled.rate``
on the brokers involved and ``leader/follower.replication.throttled.replicas`` on the topics (``--additional``
updates them for a running reassignment), ``--verify`` (unless ``--preserve-throttles``) clears them once no
reassignment is running; ``log_dirs`` other than ``any`` move replicas between log dirs (AlterReplicaLogDirs,
retried until ``--timeout``). Failures print ``Error: <message>`` on stdout and exit 1; where Kafka then prints a
Java stack trace, this tool does not. The reassignment, listing and config calls go through the protocol client
(``tools/cli/reassign_admin.py``).
"""
from __future__ import annotations

import json
import re
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from broker.cluster.assignment import assign_replicas_to_brokers

from .command import client_config, protocol_client, tool_main
from .java_format import hashmap_order, java_string_hash, topic_partition_hash
from .options import CommandError, OptionParser, Options, UsageError
from .protocol_client import ProtocolClientError
from .reassign_admin import (DELETE, SET, AdminCallError, ReassignAdmin, Reassignment, Replica, TopicPartition,
                             replica_text)

SUMMARY = "This tool helps to move topic partitions between replicas."
ANY_LOG_DIR = "any"
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
BROKER_LEVEL_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
CANNOT_EXECUTE = ("Cannot execute because there is an existing partition assignment.  Use --additional to override "
                  "this and create a new partition assignment in addition to the existing one. The --additional flag "
                  "can also be used to change the throttle by resubmitting the current reassignment.")
RUN_VERIFY = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
              "is removed.")
_REQUIRED = {"verify": ("reassignment-json-file",), "generate": ("topics-to-move-json-file", "broker-list"),
             "execute": ("reassignment-json-file",), "cancel": ("reassignment-json-file",), "list": ()}
_PERMITTED = {"verify": ("bootstrap-server", "command-config", "preserve-throttles"),
              "generate": ("bootstrap-server", "broker-list", "command-config", "disable-rack-aware"),
              "execute": ("additional", "bootstrap-server", "command-config", "throttle",
                          "replica-alter-log-dirs-throttle", "timeout"),
              "cancel": ("bootstrap-server", "command-config", "preserve-throttles", "timeout"),
              "list": ("bootstrap-server", "command-config")}

Target = Tuple[TopicPartition, List[int]]


class ToolError(Exception):
    """A failure Kafka's tool prints as ``Error: <message>`` (``terse``: the message alone), exit 1."""

    def __init__(self, message: str, terse: bool = False) -> None:
        super().__init__(message)
        self.terse = terse


# ------------------------------------------------------------------------------------------------ options
def build_parser(lenient: bool = False) -> OptionParser:
    """Kafka's options; ``lenient`` takes the Long ones as text (joptsimple converts them only when read)."""
    p = OptionParser(SUMMARY)
    long_type = "String" if lenient else "Long"
    p.arg("bootstrap-server", "REQUIRED: the server(s) to use for bootstrapping.", "Server(s) to use for bootstrapping")
    p.arg("command-config", "Property file containing configs to be passed to Admin Client.",
          "Admin client property file")
    p.flag("generate", "Generate a candidate partition reassignment configuration. Note that this only generates a "
                       "candidate assignment, it does not execute it.")
    p.flag("execute", "Kick off the reassignment as specified by the --reassignment-json-file option.")
    p.flag("verify", "Verify if the reassignment completed as specified by the --reassignment-json-file option. If "
                     "there is a throttle engaged for the replicas specified, and the rebalance has completed, the "
                     "throttle will be removed")
    p.arg("reassignment-json-file", "The JSON file with the partition reassignment configurationThe format to use "
                                    "is - \n{\"partitions\":\n\t[{\"topic\": \"foo\",\n\t  \"partition\": 1,\n\t  "
                                    "\"replicas\": [1,2,3],\n\t  \"log_dirs\": [\"dir1\",\"dir2\",\"dir3\"] }],\n"
                                    "\"version\":1\n}\nNote that \"log_dirs\" is optional. When it is specified, its "
                                    "length must equal the length of the replicas list. The value in this list can "
                                    "be either \"any\" or the absolution path of the log directory on the broker. If "
                                    "absolute log directory path is specified, the replica will be moved to the "
                                    "specified log directory on the broker.", "manual assignment json file path")
    p.arg("topics-to-move-json-file", "Generate a reassignment configuration to move the partitions of the specified "
                                      "topics to the list of brokers specified by the --broker-list option. The "
                                      "format to use is - \n{\"topics\":\n\t[{\"topic\": \"foo\"},{\"topic\": "
                                      "\"foo1\"}],\n\"version\":1\n}", "topics to reassign json file path")
    p.arg("broker-list", "The list of brokers to which the partitions need to be reassigned in the form \"0,1,2\". "
                         "This is required if --topics-to-move-json-file is used to generate reassignment "
                         "configuration", "brokerlist")
    p.flag("disable-rack-aware", "Disable rack aware replica assignment")
    p.arg("throttle", "The movement of partitions between brokers will be throttled to this value (bytes/sec). This "
                      "option can be included with --execute when a reassignment is started, and it can be altered "
                      "by resubmitting the current reassignment along with the --additional flag. The throttle rate "
                      "should be at least 1 KB/s.", "throttle", value_type=long_type, default=-1)
    p.arg("replica-alter-log-dirs-throttle", "The movement of replicas between log directories on the same broker "
                                             "will be throttled to this value (bytes/sec). This option can be "
                                             "included with --execute when a reassignment is started, and it can be "
                                             "altered by resubmitting the current reassignment along with the "
                                             "--additional flag. The throttle rate should be at least 1 KB/s.",
          "replicaAlterLogDirsThrottle", value_type=long_type, default=-1)
    p.arg("timeout", "The maximum time in ms to wait for log directory replica assignment to begin.", "timeout",
          value_type=long_type, default=10000)
    p.flag("additional", "Execute this reassignment in addition to any other ongoing ones. This option can also be "
                         "used to change the throttle of an ongoing reassignment.")
    p.flag("cancel", "Cancel an active reassignment.")
    p.flag("list", "List all active partition reassignments.")
    p.flag("preserve-throttles", "Do not modify broker or topic throttles.")
    return p


def validate(o: Options) -> str:
    """validateAndParseArgs: the one action, its required and permitted options (usage errors as Kafka's)."""
    actions = [a for a in ACTIONS if o.has(a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS))
    action = actions[0]
    if not o.has("bootstrap-server"):
        raise UsageError("Please specify --bootstrap-server")
    for name in _REQUIRED[action]:
        if not o.has(name):
            raise UsageError(f'Missing required argument "[{name}]"')
    for name in o.given():
        if name != action and name not in _REQUIRED[action] and name not in _PERMITTED[action]:
            raise UsageError(f'Option "[{name}]" can\'t be used with action "[{action}]"')
    return action


# ------------------------------------------------------------------------------------------------ JSON
def read_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        raise ToolError(f"Unable to read file {path}") from None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise ToolError(str(e)) from None


def _version(data: Any) -> int:
    if not isinstance(data, dict):
        raise ToolError("The input string is not a valid JSON object")
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    return 1


def parse_reassignment(text: str) -> Tuple[List[Target], Dict[Replica, str]]:
    """Kafka's parsePartitionReassignmentData: (partition, replicas) in file order (duplicates kept, to be
    reported) and the replicas given a log dir other than ``any``."""
    data = _json(text)
    _version(data)
    targets: List[Target] = []
    log_dirs: Dict[Replica, str] = {}
    for entry in data.get("partitions") or []:
        try:
            topic, partition = str(entry["topic"]), int(entry["partition"])
            replicas = [int(r) for r in entry["replicas"]]
            dirs = [str(d) for d in entry["log_dirs"]] if "log_dirs" in entry else [ANY_LOG_DIR] * len(replicas)
        except (KeyError, TypeError, ValueError):
            raise ToolError(f"Invalid partition entry: {json.dumps(entry)}") from None
        if len(replicas) != len(dirs):
            raise ToolError(f"Size of replicas list [{', '.join(map(str, replicas))}] is different from size of log "
                            f"dirs list [{', '.join(dirs)}] for partition {topic}-{partition}")
        targets.append(((topic, partition), replicas))
        for r, d in zip(replicas, dirs):
            if d != ANY_LOG_DIR:
                log_dirs[(topic, partition, r)] = d
    return targets, log_dirs


def parse_topics(text: str) -> List[str]:
    data = _json(text)
    _version(data)
    try:
        return [str(t["topic"]) for t in data.get("topics") or []]
    except (KeyError, TypeError):
        raise ToolError("Invalid topics entry") from None


def reassignment_json(parts: Dict[TopicPartition, List[int]], log_dirs: Optional[Dict[Replica, str]] = None) -> str:
    """formatAsReassignmentJson: Jackson's compact JSON, partitions sorted by topic then partition."""
    dirs = log_dirs or {}
    entries = [{"topic": t, "partition": p, "replicas": parts[(t, p)],
                "log_dirs": [dirs.get((t, p, r), ANY_LOG_DIR) for r in parts[(t, p)]]} for t, p in sorted(parts)]
    return json.dumps({"version": 1, "partitions": entries}, separators=(",", ":"))


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _int_set_text(values: Set[int]) -> str:
    """A Java HashSet<Integer>'s toString."""
    return "[" + ", ".join(str(v) for v in hashmap_order(sorted(values), hash_fn=_int_hash)) + "]"


def _int_hash(v: int) -> int:
    return v


def _duplicates(items: Sequence[Any]) -> List[Any]:
    seen: Set[Any] = set()
    dups: List[Any] = []
    for x in items:
        if x in seen and x not in dups:
            dups.append(x)
        seen.add(x)
    return dups


# ------------------------------------------------------------------------------------------------ --generate
def _parse_broker_list(text: str) -> List[int]:
    out = []
    for piece in text.split(","):
        if not re.fullmatch(r"[+-]?\d+", piece) or not -2 ** 31 <= int(piece) < 2 ** 31:
            raise ToolError(f'For input string: "{piece}"')
        out.append(int(piece))
    return out


def generate(admin: ReassignAdmin, topics_json: str, broker_list: str, rack_aware: bool) -> None:
    brokers = _parse_broker_list(broker_list)
    dups = _duplicates(brokers)
    if dups:
        raise ToolError(f"Broker list contains duplicate entries: {_int_set_text(set(dups))}")
    topics = parse_topics(topics_json)
    dup_topics = _duplicates(topics)
    if dup_topics:
        raise ToolError("List of topics to reassign contains duplicate entries: "
                        f"[{', '.join(hashmap_order(dup_topics))}]")
    current: Dict[TopicPartition, List[int]] = {}
    for t, parts in _describe(admin, topics).items():
        for p, replicas in parts.items():
            current[(t, p)] = replicas
    wanted = set(brokers)
    racks = {b: (rack if rack_aware else None) for b, rack in admin.nodes().items() if b in wanted}
    rackless = sum(1 for r in racks.values() if r is None)
    if rack_aware and rackless not in (0, len(racks)):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                        "replica assignment without rack information.")
    proposed: Dict[TopicPartition, List[int]] = {}
    by_topic: Dict[str, List[int]] = {}
    for t, p in current:
        by_topic.setdefault(t, []).append(p)
    for t, parts in by_topic.items():
        rf = len(current[(t, sorted(parts)[0])])
        try:
            plan = assign_replicas_to_brokers(racks, len(parts), rf)
        except ValueError as e:
            raise ToolError(str(e)) from None
        for p, replicas in plan.items():
            proposed[(t, p)] = replicas
    print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")


def _describe(admin: ReassignAdmin, topics: Sequence[str]) -> Dict[str, Dict[int, List[int]]]:
    try:
        return admin.describe_topics(topics)
    except AdminCallError as e:
        raise ToolError(str(e)) from None


# ------------------------------------------------------------------------------------------------ --execute
def execute(admin: ReassignAdmin, additional: bool, text: str, inter_broker_throttle: int, log_dir_throttle: int,
            timeout_ms: int) -> None:
    targets, log_dirs = parse_reassignment(text)
    if not targets:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in targets):
        raise ToolError("Partition replica list cannot be empty")
    dup_parts = _duplicates([tp for tp, _ in targets])
    if dup_parts:
        ordered = hashmap_order(dup_parts, hash_fn=lambda tp: topic_partition_hash(*tp))
        raise ToolError("Partition reassignment contains duplicate topic partitions: "
                        + ",".join(_tp(tp) for tp in ordered))
    dup_replicas = [(tp, _duplicates(replicas)) for tp, replicas in targets if _duplicates(replicas)]
    if dup_replicas:
        raise ToolError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{_tp(tp)} contains multiple entries for "
            + ",".join(str(b) for b in hashmap_order(sorted(set(d)), hash_fn=_int_hash)) for tp, d in dup_replicas))
    proposed = dict(targets)
    ongoing = admin.list_reassignments()
    if not additional and ongoing:
        raise ToolError(CANNOT_EXECUTE, terse=True)
    brokers = {b for replicas in proposed.values() for b in replicas}
    known = set(admin.nodes())
    unknown = [b for b in hashmap_order(sorted(brokers), hash_fn=_int_hash) if b not in known]
    if unknown:
        raise ToolError(f"Unknown broker id {unknown[0]}")
    current = _current_assignment(admin, set(proposed))
    print("Current partition replica assignment\n\n"
          f"{reassignment_json({tp: r for tp, r in current.items() if tp in proposed})}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    if inter_broker_throttle >= 0 or log_dir_throttle >= 0:
        print(RUN_VERIFY)
        if inter_broker_throttle >= 0:
            moves = proposed_moves(ongoing, proposed, current)
            _alter(admin, {}, {t: [(LEADER_REPLICAS, SET, v)] for t, v in leader_throttles(moves).items()},
                   {t: [(FOLLOWER_REPLICAS, SET, v)] for t, v in follower_throttles(moves).items()})
            _alter(admin, {b: [(LEADER_RATE, SET, str(inter_broker_throttle)),
                               (FOLLOWER_RATE, SET, str(inter_broker_throttle))] for b in reassigning_brokers(moves)})
            print(f"The inter-broker throttle limit was set to {inter_broker_throttle} B/s")
        if log_dir_throttle >= 0:
            moving = {b for _, _, b in log_dirs}
            _alter(admin, {b: [(LOG_DIRS_RATE, SET, str(log_dir_throttle))] for b in moving})
            print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    errors = admin.alter_reassignments({tp: list(r) for tp, r in proposed.items()})
    if errors:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(
            f"{_tp(tp)}: {errors[tp]}" for tp in sorted(errors)), terse=True)
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
          + ",".join(_tp(tp) for tp in sorted(proposed)))
    if log_dirs:
        execute_moves(admin, log_dirs, timeout_ms)


def _alter(admin: ReassignAdmin, brokers: Dict[int, List[Tuple[str, int, Optional[str]]]],
           *topic_ops: Dict[str, List[Tuple[str, int, Optional[str]]]]) -> None:
    topics: Dict[str, List[Tuple[str, int, Optional[str]]]] = {}
    for ops in topic_ops:
        for t, o in ops.items():
            topics.setdefault(t, []).extend(o)
    try:
        admin.alter_configs(brokers, topics)
    except AdminCallError as e:
        raise ToolError(str(e)) from None


def _current_assignment(admin: ReassignAdmin, parts: Set[TopicPartition]) -> Dict[TopicPartition, List[int]]:
    """getReplicaAssignmentForPartitions: a missing partition fails with ``Unable to find partition: ...``."""
    described = _describe(admin, sorted({t for t, _ in parts}))
    current = {(t, p): r for t, ps in described.items() for p, r in ps.items() if (t, p) in parts}
    missing = [tp for tp in hashmap_order(sorted(parts), hash_fn=lambda tp: topic_partition_hash(*tp))
               if tp not in current]
    if missing:
        raise ToolError("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Unable to find partition: "
                        + ", ".join(_tp(tp) for tp in missing))
    return current


#: topic -> partition -> (sources, destinations)
MoveMap = Dict[str, Dict[int, Tuple[Set[int], Set[int]]]]


def proposed_moves(ongoing: Dict[TopicPartition, Reassignment], proposed: Dict[TopicPartition, List[int]],
                   current: Dict[TopicPartition, List[int]]) -> MoveMap:
    """calculateProposedMoveMap: the running reassignments' moves, then the proposed ones (sources from a running
    reassignment of the partition if any, else its current replicas)."""
    moves: MoveMap = {}
    for (t, p), (replicas, adding, _) in ongoing.items():
        moves.setdefault(t, {})[p] = (set(replicas) - set(adding), set(adding))
    for (t, p), replicas in proposed.items():
        part_moves = moves.setdefault(t, {})
        if p in part_moves:
            sources = set(part_moves[p][0])
        elif (t, p) in current:
            sources = set(current[(t, p)])
        else:
            raise ToolError(f"Trying to reassign a topic partition {t}-{p} with 0 replicas")
        part_moves[p] = (sources, set(replicas) - sources)
    return moves


def leader_throttles(moves: MoveMap) -> Dict[str, str]:
    """``partition:source`` for every source replica, sorted as strings (Kafka's TreeSet<String>)."""
    return {t: ",".join(sorted({f"{p}:{s}" for p, (srcs, _) in parts.items() for s in srcs}))
            for t, parts in moves.items()}


def follower_throttles(moves: MoveMap) -> Dict[str, str]:
    return {t: ",".join(sorted({f"{p}:{d}" for p, (srcs, dests) in parts.items() for d in dests if d not in srcs}))
            for t, parts in moves.items()}


def reassigning_brokers(moves: MoveMap) -> List[int]:
    return sorted({b for parts in moves.values() for srcs, dests in parts.values() for b in srcs | dests})


def execute_moves(admin: ReassignAdmin, moves: Dict[Replica, str], timeout_ms: int) -> None:
    """Ask for log-dir moves until each is accepted (a replica new to a broker is not there yet at first)."""
    start = time.monotonic()
    pending = dict(moves)
    while True:
        try:
            completed = admin.alter_replica_log_dirs(pending)
        except AdminCallError as e:
            raise ToolError(str(e)) from None
        for r in sorted(completed, key=lambda r: (r[2], r[0], r[1])):
            print(f"Successfully started moving log directory to {pending[r]} for replica {r[0]}-{r[1]} with "
                  f"broker {r[2]} ")
        for r in completed:
            pending.pop(r, None)
        if not pending:
            return
        if (time.monotonic() - start) * 1000 >= timeout_ms:
            raise ToolError(f"Timed out before log directory move{'' if len(pending) == 1 else 's'} could be started "
                            "for: " + ",".join(replica_text(r) for r in sorted(pending, key=lambda r: (r[2], r[0],
                                                                                                        r[1]))),
                            terse=True)
        time.sleep(0.1)


# ------------------------------------------------------------------------------------------------ --verify
def verify(admin: ReassignAdmin, text: str, preserve_throttles: bool) -> None:
    targets, log_dirs = parse_reassignment(text)
    ongoing = admin.list_reassignments()
    lines = ["Status of partition reassignment:"]
    not_found = sorted({t for (t, p), _ in targets if (t, p) not in ongoing})
    described = _describe_lenient(admin, not_found)
    for tp, target in sorted(dict(targets).items()):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {_tp(tp)} is still in progress.")
            continue
        current = described.get(tp[0], {}).get(tp[1], [])
        if current == target:
            lines.append(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                         f"{','.join(map(str, current))} rather than {','.join(map(str, target))}.")
    print("\n".join(lines))
    states = log_dir_states(admin, log_dirs)
    print(log_dir_states_text(states))
    moves_ongoing = any(s[0] == "active" for s in states.values())
    if not ongoing and not moves_ongoing and not preserve_throttles:
        clear_all_throttles(admin, targets)


def _describe_lenient(admin: ReassignAdmin, topics: Sequence[str]) -> Dict[str, Dict[int, List[int]]]:
    """Topics one by one, an unknown one as no replicas (Kafka's topicDescriptionFutureToState)."""
    out: Dict[str, Dict[int, List[int]]] = {}
    for t in topics:
        try:
            out.update(admin.describe_topics([t]))
        except AdminCallError as e:
            if e.code != 3:
                raise ToolError(str(e)) from None
    return out


#: replica -> (state, current dir, target dir, future dir); state: missing-replica, missing-dir, active,
#: cancelled, completed
MoveState = Tuple[str, Optional[str], str, Optional[str]]


def log_dir_states(admin: ReassignAdmin, targets: Dict[Replica, str]) -> Dict[Replica, MoveState]:
    if not targets:
        return {}
    try:
        infos = admin.describe_replica_log_dirs(targets)
    except AdminCallError as e:
        raise ToolError(str(e)) from None
    out: Dict[Replica, MoveState] = {}
    for replica, target in targets.items():
        if replica not in infos:
            out[replica] = ("missing-replica", None, target, None)
            continue
        cur, fut = infos[replica]
        if cur is None:
            out[replica] = ("missing-dir", None, target, None)
        elif fut is None:
            out[replica] = ("completed" if cur == target else "cancelled", cur, target, None)
        else:
            out[replica] = ("active", cur, target, fut)
    return out


def log_dir_states_text(states: Dict[Replica, MoveState]) -> str:
    lines = []
    for r in sorted(states, key=lambda r: (r[2], r[0], r[1])):
        state, cur, target, fut = states[r]
        t, p, b = r
        if state == "missing-dir":
            lines.append(f"Partition {t}-{p} is not found in any live log dir on broker {b}. There is likely an "
                         "offline log directory on the broker.")
        elif state == "missing-replica":
            lines.append(f"Partition {t}-{p} cannot be found in any live log directory on broker {b}.")
        elif state == "active":
            if target == fut:
                lines.append(f"Reassignment of replica {replica_text(r)} is still in progress.")
            else:
                lines.append(f"Partition {t}-{p} on broker {b} is being moved to log dir {fut} instead of {target}.")
        elif state == "cancelled":
            lines.append(f"Partition {t}-{p} on broker {b} is not being moved from log dir {cur} to {target}.")
        else:
            lines.append(f"Reassignment of replica {replica_text(r)} completed successfully.")
    return "\n".join(lines)


def clear_all_throttles(admin: ReassignAdmin, targets: List[Target]) -> None:
    """Every broker's throttle rates (the cluster's and the targets' brokers) and the targets' topics' throttled
    replica lists, printed in Kafka's HashSet orders."""
    brokers: List[int] = list(admin.nodes())
    for _, replicas in targets:
        brokers.extend(b for b in replicas if b not in brokers)
    brokers = hashmap_order(sorted(set(brokers)), hash_fn=_int_hash)
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          + ",".join(map(str, brokers)))
    _alter(admin, {b: [(n, DELETE, None) for n in BROKER_LEVEL_THROTTLES] for b in brokers})
    topics = hashmap_order(list(dict.fromkeys(t for (t, _), _ in targets)), hash_fn=java_string_hash)
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    _alter(admin, {}, {t: [(n, DELETE, None) for n in TOPIC_LEVEL_THROTTLES] for t in topics})


# ------------------------------------------------------------------------------------------------ --cancel, --list
def cancel(admin: ReassignAdmin, text: str, preserve_throttles: bool, timeout_ms: int) -> None:
    targets, log_dirs = parse_reassignment(text)
    parts = {tp for tp, _ in targets}
    running = admin.list_reassignments(parts) if parts else {}
    to_cancel = {tp for tp, (_, adding, removing) in running.items() if not adding or removing}
    if to_cancel:
        errors = admin.alter_reassignments({tp: None for tp in to_cancel})
        if errors:
            raise ToolError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                            + "\n".join(f"{_tp(tp)}: {errors[tp]}" for tp in sorted(errors)), terse=True)
        print(f"Successfully cancelled partition reassignment{'' if len(to_cancel) == 1 else 's'} for: "
              + ",".join(_tp(tp) for tp in sorted(to_cancel)))
    else:
        print("None of the specified partition reassignments are active.")
    moving = {r: s[1] for r, s in log_dir_states(admin, log_dirs).items() if s[0] == "active"}
    if not moving:
        sys.stdout.write("None of the specified partition moves are active.")  # Kafka: print, no line end
    else:
        execute_moves(admin, {r: d for r, d in moving.items() if d is not None}, timeout_ms)
    if not preserve_throttles:
        clear_all_throttles(admin, targets)


def list_reassignments(admin: ReassignAdmin) -> None:
    ongoing = admin.list_reassignments()
    lines = []
    for tp in sorted(ongoing):
        replicas, adding, removing = ongoing[tp]
        line = f"{_tp(tp)}: replicas: {','.join(map(str, replicas))}."
        if adding:
            line += f" adding: {','.join(map(str, adding))}."
        if removing:
            line += f" removing: {','.join(map(str, removing))}."
        lines.append(line)
    print("Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found.")


# ------------------------------------------------------------------------------------------------ main
def _run(argv: Sequence[str], parser: OptionParser) -> int:
    if not argv:
        raise UsageError(SUMMARY)
    try:
        o = parser.parse(argv)
    except UsageError as e:  # Kafka converts --throttle/--timeout values only when it runs the action
        if not str(e).startswith("Cannot parse argument"):
            raise
        validate(build_parser(lenient=True).parse(argv))
        raise CommandError(f"Error: {e}", stream="stdout") from None
    action = validate(o)
    try:
        cfg = client_config(o, extra=None)
        with protocol_client(cfg) as pc:
            pc.client_id = cfg.client_id or "reassign-partitions-tool"
            admin = ReassignAdmin(pc, cfg.default_api_timeout_ms)
            if action == "verify":
                verify(admin, read_file(o.value("reassignment-json-file")), o.has("preserve-throttles"))
            elif action == "generate":
                generate(admin, read_file(o.value("topics-to-move-json-file")), o.value("broker-list"),
                         not o.has("disable-rack-aware"))
            elif action == "execute":
                execute(admin, o.has("additional"), read_file(o.value("reassignment-json-file")),
                        o.value("throttle"), o.value("replica-alter-log-dirs-throttle"), o.value("timeout"))
            elif action == "cancel":
                cancel(admin, read_file(o.value("reassignment-json-file")), o.has("preserve-throttles"),
                       o.value("timeout"))
            else:
                list_reassignments(admin)
    except ToolError as e:
        raise CommandError(str(e) if e.terse else f"Error: {e}", stream="stdout") from None
    except (AdminCallError, ProtocolClientError) as e:  # Kafka prints every failure on stdout
        raise CommandError(f"Error: {e}", stream="stdout") from None
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
