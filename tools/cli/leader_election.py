"""kafka-leader-election.sh: a preferred or unclean leader election, as Kafka 3.9's LeaderElectionCommand.

    kafka-leader-election.sh --bootstrap-server localhost:9092 --election-type preferred --all-topic-partitions
    kafka-leader-election.sh --bootstrap-server localhost:9092 --election-type unclean --topic t --partition 0
    kafka-leader-election.sh --bootstrap-server localhost:9092 --election-type preferred --path-to-json-file f.json

Prints Kafka's lines: ``Successfully completed leader election (PREFERRED) for partitions t-0, t-1``, ``Valid
replica already elected for partitions ...`` and, per failure, ``Error completing leader election (PREFERRED) for
partition: t-0: <Java exception>``; failures end with ``N replica(s) could not be elected`` on stderr, exit 1.
Partitions print in the order of the Java HashSet Kafka collects them in.

The election is an ElectLeaders request to the controller through the protocol client (confluent-kafka's
``elect_leaders`` fails in the version the project uses). Where Kafka prints a stack trace after an error message
on stderr, this tool prints the message alone.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

from .client_config import build_client_config, load_properties_file
from .command import protocol_client, tool_main
from .java_format import exception_line, hashmap_order, topic_partition_hash
from .options import CommandError, OptionParser, UsageError
from .protocol_client import ProtocolClientError

SUMMARY = ("This tool attempts to elect a new leader for a set of topic partitions. The type of elections supported "
           "are preferred replicas and unclean replicas.")
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
#: the tool's default.api.timeout.ms (Kafka: 30 s, request.timeout.ms half of it) unless the config sets one
TIMEOUT_MS = 30000

TopicPartition = Tuple[str, int]


def build_parser(lenient: bool = False) -> OptionParser:
    """Kafka's options; ``lenient`` takes --partition as text (joptsimple converts it only when it is read)."""
    p = OptionParser(SUMMARY)
    p.arg("bootstrap-server", "A hostname and port for the broker to connect to, in the form host:port. Multiple "
                              "comma separated URLs can be given. REQUIRED.", "host:port")
    p.arg("admin.config", "Configuration properties files to pass to the admin client", "config file")
    p.arg("path-to-json-file", "The JSON file with the list  of partition for which leader elections should be "
                               "performed. This is an example format. \n{\"partitions\":\n\t[{\"topic\": \"foo\", "
                               "\"partition\": 1},\n\t {\"topic\": \"foobar\", \"partition\": 2}]\n}\nNot allowed if "
                               "--all-topic-partitions or --topic flags are specified.", "Path to JSON file")
    p.arg("topic", "Name of topic for which to perform an election. Not allowed if --path-to-json-file or "
                   "--all-topic-partitions is specified.", "topic name")
    p.arg("partition", "Partition id for which to perform an election. REQUIRED if --topic is specified.",
          "partition id", value_type="String" if lenient else "Integer")
    p.flag("all-topic-partitions", "Perform election on all of the eligible topic partitions based on the type of "
                                   "election (see the --election-type flag). Not allowed if --topic or "
                                   "--path-to-json-file is specified.")
    p.arg("election-type", "Type of election to attempt. Possible values are \"preferred\" for preferred leader "
                           "election or \"unclean\" for unclean leader election. If preferred election is selection, "
                           "the election is only performed if the current leader is not the preferred leader for the "
                           "topic partition. If unclean election is selected, the election is only performed if there "
                           "are no leader for the topic partition. REQUIRED.", "election type",
          value_type="[PREFERRED,UNCLEAN]")
    return p


def parse_election_data(text: str) -> List[TopicPartition]:
    """The partitions of Kafka's election JSON (``{"partitions": [{"topic": .., "partition": ..}]}``)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise CommandError("Replica election data is empty") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise CommandError('Replica election data is missing "partitions" field')
    out: List[TopicPartition] = []
    for entry in data["partitions"] or []:
        try:
            out.append((str(entry["topic"]), int(entry["partition"])))
        except (KeyError, TypeError, ValueError):
            raise CommandError(f"Invalid partition entry: {json.dumps(entry)}") from None
    dups = sorted({tp for tp in out if out.count(tp) > 1})
    if dups:
        raise CommandError("Replica election data contains duplicate partitions: "
                           f"[{', '.join(f'{t}-{p}' for t, p in dups)}]")
    return list(dict.fromkeys(out))


def _validate(o: Any) -> None:
    """LeaderElectionCommandOptions.validate: its messages, on stderr with exit status 1."""
    missing = [n for n in ("bootstrap-server", "election-type") if not o.has(n)]
    if missing:
        raise CommandError("Missing required option(s): " + ", ".join(missing))
    exclusive = ("topic", "all-topic-partitions", "path-to-json-file")
    if sum(1 for n in exclusive if o.has(n)) != 1:
        raise CommandError("One and only one of the following options is required: " + ", ".join(exclusive))
    if o.has("topic") and not o.has("partition"):
        raise CommandError("Missing required option(s): partition")
    if not o.has("topic") and o.has("partition"):
        raise CommandError("Option partition is only allowed if topic is used")


def _election_type(raw: str) -> str:
    name = raw.upper()
    if name not in ELECTION_TYPES:
        raise CommandError(f"Cannot parse argument '{raw}' of option election-type")
    return name


def elect(pc: Any, election_type: int, partitions: Optional[List[TopicPartition]],
          timeout_ms: int) -> Dict[TopicPartition, Tuple[int, Optional[str]]]:
    """ElectLeaders to the controller (looked up again while the answer is NOT_CONTROLLER, as Kafka's admin client
    does); partition -> (error code, message). A top-level error raises CommandError with Kafka's wording."""
    body: Dict[str, Any] = {"election_type": election_type, "timeout_ms": timeout_ms, "topic_partitions": None}
    if partitions is not None:
        by_topic: Dict[str, List[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        body["topic_partitions"] = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        r = pc.send_to_controller(ApiKey.ELECT_LEADERS, body)
        top = getattr(r, "error_code", 0)
        results = {(t.topic, p.partition_id): (p.error_code, p.error_message)
                   for t in r.replica_election_results for p in t.partition_result}
        not_controller = top == ErrorCode.NOT_CONTROLLER or (
            results and all(c == ErrorCode.NOT_CONTROLLER for c, _ in results.values()))
        if not not_controller or time.monotonic() > deadline:
            break
        time.sleep(0.2)
        pc.controller_id = -1
    if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        print("Not authorized to perform leader election")
        raise CommandError("Cluster authorization failed.")
    if top == ErrorCode.REQUEST_TIMED_OUT:
        print("Timeout waiting for election results")
        raise CommandError("Timeout waiting for election results")
    if top:
        raise CommandError(f"java.util.concurrent.ExecutionException: {exception_line(top, r.error_message)}")
    return results


def report(election_name: str, results: Dict[TopicPartition, Tuple[int, Optional[str]]]) -> int:
    """Print Kafka's three kinds of lines; the exit status (1 when some election failed)."""
    items = list(results.items())
    ordered = hashmap_order(items, key=lambda kv: kv[0], hash_fn=lambda tp: topic_partition_hash(*tp))
    succeeded = [tp for tp, (code, _) in ordered if code == 0]
    noop = [tp for tp, (code, _) in ordered if code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [(tp, code, msg) for tp, (code, msg) in ordered if code not in (0, ErrorCode.ELECTION_NOT_NEEDED)]
    if succeeded:
        print(f"Successfully completed leader election ({election_name}) for partitions "
              + ", ".join(f"{t}-{p}" for t, p in succeeded))
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(f"{t}-{p}" for t, p in noop))
    if failed:
        for (t, p), code, msg in failed:
            print(f"Error completing leader election ({election_name}) for partition: {t}-{p}: "
                  f"{exception_line(code, msg)}")
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    if not argv:
        raise UsageError(SUMMARY)
    try:
        o = parser.parse(argv)
    except UsageError as e:  # Kafka reads (converts) --partition after its checks: those come first
        if not str(e).startswith("Cannot parse argument"):
            raise
        _validate(build_parser(lenient=True).parse(argv))
        raise CommandError(str(e)) from None
    _validate(o)
    election_name = _election_type(o.value("election-type"))
    partitions: Optional[List[TopicPartition]] = None
    if o.has("path-to-json-file"):
        path = o.value("path-to-json-file")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            raise CommandError(f"java.io.IOException: Unable to read file {path}") from None
        partitions = parse_election_data(text)
    elif o.has("topic"):
        partitions = [(o.value("topic"), o.value("partition"))]
    props: Dict[str, str] = {}
    if o.has("admin.config"):
        props.update(load_properties_file(o.value("admin.config")))
    props.setdefault("default.api.timeout.ms", str(TIMEOUT_MS))
    props.setdefault("request.timeout.ms", str(TIMEOUT_MS // 2))
    cfg = build_client_config(props, "admin", o.value("bootstrap-server"))
    timeout_ms = cfg.default_api_timeout_ms
    try:
        with protocol_client(cfg) as pc:
            pc.timeout_s = max(pc.timeout_s, timeout_ms / 1000.0 + 5)
            results = elect(pc, ELECTION_TYPES[election_name], partitions, timeout_ms)
    except ProtocolClientError as e:
        print("Timeout waiting for election results")
        raise CommandError(f"Timeout waiting for election results ({e})") from None
    return report(election_name, results)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
