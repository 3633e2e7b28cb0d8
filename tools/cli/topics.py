"""kafka-topics.sh: create, list, describe, alter (partitions) and delete topics, as Kafka 3.9's TopicCommand.

    kafka-topics.sh --bootstrap-server localhost:9092 --create --topic t --partitions 3 --replication-factor 1
    kafka-topics.sh --bootstrap-server localhost:9092 --describe [--topic regex] [--under-replicated-partitions]

Describe prints Kafka's lines, which scripts parse::

    Topic: t<TAB>TopicId: <id><TAB>PartitionCount: 3<TAB>ReplicationFactor: 1<TAB>Configs: k=v,...
    <TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 0<TAB>Replicas: 0<TAB>Isr: 0<TAB>Elr: N/A<TAB>LastKnownElr: N/A

Topics print in the order Kafka's tool prints them (the iteration order of the Java HashMap it collects them in),
configs likewise; ``Configs`` lists every entry whose source is not the default. Failures print ``Error while
executing topic command : <message>`` on stdout and exit 1, as Kafka does (including Kafka 3.9's
``Topic 'Optional[x]' does not exist as expected`` wording, which scripts may match); a failure the broker or the
client reported is also logged on stderr as Kafka's tool logs it (``[time] ERROR <exception> (...TopicCommand)``).

Built on the project's protocol client, sending what Kafka's admin client sends where it sends it: ``--list`` and
``--describe`` ask any live broker (Metadata, DescribeConfigs), so they answer while the cluster has no reachable
controller; ``--create``, ``--delete`` and ``--alter`` go to the controller, looked up again while it cannot be
reached, until ``default.api.timeout.ms`` (60 s; ``--command-config`` may set it), and then fail as Kafka's do:
``Timed out waiting for a node assignment. Call: createTopics``. An unreachable bootstrap server logs Kafka's
connection warning at Kafka's reconnect backoff (about one a second) until then. Partition reassignments (for
``Adding Replicas``/``Removing Replicas`` and the replication factor during a move) come from
ListPartitionReassignments to the controller when it answers at once; describe leaves them out otherwise, where
Kafka's tool would wait for a controller.
"""
from __future__ import annotations

import re
import sys
import uuid
from typing import Any, Dict, List, Optional, Sequence, Set

from broker.config.topic_defs import TOPIC_CONFIGS
from broker.protocol.api import ApiKey

from .client_log import log
from .command import client_config, protocol_client, standard_options, tool_main
from .java_format import exception_line, hashmap_order, uuid_text
from .options import CommandError, OptionParser, Options, UsageError
from .protocol_client import NodeAssignmentTimeout, ProtocolClientError

SUMMARY = "This tool helps to create, delete, describe, or change a topic."
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
_ACTIONS = ("create", "list", "alter", "describe", "delete")
_REPORTS = ("under-replicated-partitions", "under-min-isr-partitions", "at-min-isr-partitions",
            "unavailable-partitions")
_KAFKA_CONFIGS_HINT = " (the kafka-configs CLI supports altering topic configs with a --bootstrap-server option)"


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    standard_options(p, config_help="Property file containing configs to be passed to Admin Client. This is used "
                                    "only with --bootstrap-server option for describing and altering broker configs.")
    p.flag("list", "List all available topics.")
    p.flag("create", "Create a new topic.")
    p.flag("delete", "Delete a topic")
    p.flag("alter", "Alter the number of partitions and replica assignment." + _KAFKA_CONFIGS_HINT)
    p.flag("describe", "List details for the given topics.")
    p.arg("topic", "The topic to create, alter, describe or delete. It also accepts a regular expression, except "
                   "for --create option. Put topic name in double quotes and use the '\\' prefix to escape regular "
                   "expression symbols; e.g. \"test\\.topic\".", "topic")
    p.arg("topic-id", "The topic-id to describe.", "topic-id")
    names = "\n".join("\t" + n for n in sorted(_topic_config_names()))
    p.arg("config", "A topic configuration override for the topic being created. The following is a list of valid "
                    f"configurations: \n{names}\nSee the Kafka documentation for full details on the topic configs. "
                    "It is supported only in combination with --create." + _KAFKA_CONFIGS_HINT, "name=value")
    p.refuse("delete-config", "altering topic configs through kafka-topics needs ZooKeeper access (Kafka refuses it "
             "with --bootstrap-server too); use kafka-configs.sh --alter --delete-config", described_as="name")
    p.arg("partitions", "The number of partitions for the topic being created or altered (WARNING: If partitions "
                        "are increased for a topic that has a key, the partition logic or ordering of the messages "
                        "will be affected). If not supplied for create, defaults to the cluster default.",
          "# of partitions", "Integer")
    p.arg("replication-factor", "The replication factor for each partition in the topic being created. If not "
                                "supplied, defaults to the cluster default.", "replication factor", "Integer")
    p.arg("replica-assignment", "A list of manual partition-to-broker assignments for the topic being created or "
                                "altered.", "broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , "
                                            "broker_id_for_part2_replica1 : broker_id_for_part2_replica2 , ...")
    p.flag("under-replicated-partitions", "if set when describing topics, only show under replicated partitions")
    p.flag("unavailable-partitions", "if set when describing topics, only show partitions whose leader is not "
                                     "available")
    p.flag("under-min-isr-partitions", "if set when describing topics, only show partitions whose isr count is "
                                       "less than the configured minimum.")
    p.flag("at-min-isr-partitions", "if set when describing topics, only show partitions whose isr count is equal "
                                    "to the configured minimum.")
    p.flag("topics-with-overrides", "if set when describing topics, only show topics that have overridden configs")
    p.flag("if-exists", "if set when altering or deleting or describing topics, the action will only execute if "
                        "the topic exists.")
    p.flag("if-not-exists", "if set when creating topics, the action will only execute if the topic does not "
                            "already exist.")
    p.flag("exclude-internal", "exclude internal topics when running list or describe command. The internal topics "
                               "will be listed by default")
    p.arg("partition-size-limit-per-response", "the maximum partition size to be included in one "
                                               "DescribeTopicPartitions response.",
          "maximum number of partitions in one response.", "Integer")
    return p


def _topic_config_names() -> List[str]:
    return list(TOPIC_CONFIGS)


def check_args(p: OptionParser, o: Options, argv: Sequence[str]) -> None:
    """TopicCommandOptions.checkArgs of Kafka 3.9."""
    if not argv:
        raise UsageError("Create, delete, describe, or change a topic.")
    if sum(o.has(a) for a in _ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    if not o.has("bootstrap-server"):
        raise CommandError("--bootstrap-server must be specified")
    if o.has("describe") and o.has("if-exists") and not o.has("topic") and not o.has("topic-id"):
        raise UsageError("--topic or --topic-id is required to describe a topic")
    if not o.has("list") and not o.has("describe"):
        p.check_required(o, "topic")
    if o.has("alter"):
        if o.has("config"):
            raise UsageError('Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]"'
                             + _KAFKA_CONFIGS_HINT)
        p.check_required(o, "partitions")
    not_create_alter = [a for a in _ACTIONS if a not in ("alter", "create")]
    p.check_invalid(o, "config", not_create_alter)
    p.check_invalid(o, "partitions", not_create_alter)
    p.check_invalid(o, "replication-factor", [a for a in _ACTIONS if a != "create"])
    p.check_invalid(o, "replica-assignment", not_create_alter)
    if o.has("create"):
        p.check_invalid(o, "replica-assignment", ["partitions", "replication-factor"])
    for report in _REPORTS:
        p.check_invalid(o, report, [a for a in _ACTIONS if a != "describe"] + ["topics-with-overrides"])
    p.check_invalid(o, "topics-with-overrides", [a for a in _ACTIONS if a != "describe"] + list(_REPORTS))
    p.check_invalid(o, "if-exists", [a for a in _ACTIONS if a not in ("alter", "delete", "describe")])
    p.check_invalid(o, "if-not-exists", [a for a in _ACTIONS if a != "create"])
    p.check_invalid(o, "exclude-internal", [a for a in _ACTIONS if a not in ("list", "describe")])


def parse_replica_assignment(text: str) -> Dict[int, List[int]]:
    """``0:1,1:2`` -> {partition: [broker ids]} (Kafka's parseReplicaAssignment and its errors)."""
    out: Dict[int, List[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError as e:
            raise CommandError(f"Error while executing topic command : For input string: \"{part.strip()}\"",
                               stream="stdout") from e
        dups = sorted({b for b in brokers if brokers.count(b) > 1})
        if dups:
            raise CommandError("Error while executing topic command : Partition replica lists may not contain "
                               f"duplicate entries: {','.join(map(str, dups))}", stream="stdout")
        out[i] = brokers
        if len(brokers) != len(out[0]):
            raise CommandError(f"Error while executing topic command : Partition {i} has different replication "
                               f"factor: [{', '.join(map(str, brokers))}]", stream="stdout")
    return out


def include_filter(raw: str) -> "re.Pattern[str]":
    """Kafka's TopicFilter.IncludeList: commas mean '|', spaces and surrounding quotes are dropped."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        raise CommandError(f"Error while executing topic command : {regex} is an invalid regex.",
                           stream="stdout") from None


def select_topics(all_topics: Sequence[str], topic: Optional[str], exclude_internal: bool) -> List[str]:
    names = sorted(all_topics)
    if topic is not None:
        pattern = include_filter(topic)
        names = [t for t in names if pattern.fullmatch(t)]
    return [t for t in names if not (exclude_internal and t in INTERNAL_TOPICS)]


class TopicPart:
    """One partition as Kafka's TopicPartitionInfo has it: a leader only when the metadata lists that broker."""

    __slots__ = ("id", "leader", "replicas", "isr")

    def __init__(self, pid: int, leader: Optional[int], replicas: List[int], isr: List[int]) -> None:
        self.id, self.leader, self.replicas, self.isr = pid, leader, replicas, isr


class TopicDesc:
    __slots__ = ("name", "topic_id", "partitions")

    def __init__(self, name: str, topic_id: Any, partitions: List[TopicPart]) -> None:
        self.name, self.topic_id, self.partitions = name, topic_id, partitions


class ConfigValue:
    __slots__ = ("name", "value", "is_default")

    def __init__(self, name: str, value: Optional[str], is_default: bool) -> None:
        self.name, self.value, self.is_default = name, value, is_default


class TopicFailure(Exception):
    """A failed call: ``message`` is what Kafka's tool prints after ``Error while executing topic command : ``,
    ``java`` the exception line it logs (None: not logged)."""

    def __init__(self, message: str, java: Optional[str] = None) -> None:
        super().__init__(message)
        self.message, self.java = message, java


def _broker_failure(code: int, message: Optional[str]) -> TopicFailure:
    line = exception_line(code, message)
    return TopicFailure(line.split(": ", 1)[1], line)


class TopicService:
    """The topic operations of one command, on the project's protocol client, as Kafka's admin client sends them:
    Metadata and DescribeConfigs to any live broker (``--list`` and ``--describe`` never wait for the controller),
    CreateTopics/DeleteTopics/CreatePartitions to the controller, looked up again while it cannot be reached, until
    ``default.api.timeout.ms``."""

    def __init__(self, o: Options) -> None:
        self.opts = o
        self.cfg = client_config(o)
        self.pc = protocol_client(self.cfg)
        self._live: Optional[Set[int]] = None

    def close(self) -> None:
        self.pc.close()

    def _fail(self, message: str) -> CommandError:
        return CommandError(f"Error while executing topic command : {message}", stream="stdout")

    # ---------------------------------------------------------------------------------------------- metadata
    def _metadata(self, topics: Optional[List[str]], call: str) -> Any:
        r = self.pc.refresh_metadata(topics, call=call)
        self._live = {b.node_id for b in r.brokers}
        return r

    def topics(self) -> List[str]:
        md = self._metadata(None, "listTopics")
        return select_topics([t.name for t in md.topics], self.opts.value("topic"), self.opts.has("exclude-internal"))

    def ensure_exists(self, found: List[str]) -> None:
        topic = self.opts.value("topic")
        if topic and not self.opts.has("if-exists") and not found:
            # Kafka 3.9 prints the Optional wrapper in this message; kept for scripts that match it
            raise self._fail(f"Topic 'Optional[{topic}]' does not exist as expected")

    def _describe(self, topics: List[str]) -> Dict[str, TopicDesc]:
        md = self._metadata(topics, "describeTopics")
        by_name = {t.name: t for t in md.topics}
        out: Dict[str, TopicDesc] = {}
        for name in topics:
            t = by_name.get(name)
            if t is None:
                raise _broker_failure(3, None)
            if t.error_code:
                raise _broker_failure(t.error_code, None)
            out[name] = self._desc(t)
        return out

    def _desc(self, t: Any) -> TopicDesc:
        live = self._live or set()
        parts = [TopicPart(p.partition_index, p.leader_id if p.leader_id in live else None, list(p.replica_nodes),
                           list(p.isr_nodes)) for p in t.partitions]
        return TopicDesc(t.name, t.topic_id, parts)

    def _configs(self, topics: List[str]) -> Dict[str, Dict[str, ConfigValue]]:
        if not topics:
            return {}
        body = {"resources": [{"resource_type": 2, "resource_name": t, "configuration_keys": None} for t in topics],
                "include_synonyms": False, "include_documentation": False}
        r = self.pc.send_any(ApiKey.DESCRIBE_CONFIGS, body, call="describeConfigs")
        out: Dict[str, Dict[str, ConfigValue]] = {}
        for res in r.results:
            if res.error_code:
                raise _broker_failure(res.error_code, res.error_message)
            out[res.resource_name] = {
                c.name: ConfigValue(c.name, c.value, (c.config_source == 5) if c.config_source >= 0
                                    else bool(getattr(c, "is_default", False)))
                for c in res.configs}
        return out

    # ---------------------------------------------------------------------------------------------- actions
    def create(self) -> None:
        o = self.opts
        name = o.value("topic")
        if "." in name or "_" in name:
            print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                  "could collide. To avoid issues it is best to use either, but not both.")
        rf, parts = o.value("replication-factor"), o.value("partitions")
        if rf is not None and not 1 <= rf <= 32767:
            raise self._fail("The replication factor must be between 1 and 32767 inclusive")
        if parts is not None and parts < 1:
            raise self._fail("The partitions must be greater than 0")
        configs = _parse_configs(o.values("config"))
        topic: Dict[str, Any] = {"name": name, "num_partitions": -1 if parts is None else parts,
                                 "replication_factor": -1 if rf is None else rf, "assignments": [],
                                 "configs": [{"name": k, "value": v} for k, v in configs.items()]}
        if o.has("replica-assignment") and o.value("replica-assignment"):
            assignment = parse_replica_assignment(o.value("replica-assignment"))
            topic.update(num_partitions=-1, replication_factor=-1,
                         assignments=[{"partition_index": p, "broker_ids": assignment[p]} for p in sorted(assignment)])
        body = {"topics": [topic], "timeout_ms": self.cfg.request_timeout_ms, "validate_only": False}
        r = self.pc.send_to_controller(ApiKey.CREATE_TOPICS, body, call="createTopics",
                                       not_controller=lambda r: any(t.error_code == 41 for t in r.topics))
        for t in r.topics:
            if t.error_code == 36 and o.has("if-not-exists"):
                return
            if t.error_code:
                raise _broker_failure(t.error_code, t.error_message)
        print(f"Created topic {name}.")

    def list(self) -> None:
        print("\n".join(self.topics()))

    def alter(self) -> None:
        o = self.opts
        topics = self.topics()
        self.ensure_exists(topics)
        if not topics:
            return
        count = o.value("partitions")
        assignment = parse_replica_assignment(o.value("replica-assignment")) if o.value("replica-assignment") else {}
        current = self._describe(topics) if assignment else {}
        requests = []
        for t in topics:
            req: Dict[str, Any] = {"name": t, "count": count, "assignments": None}
            if assignment:
                start = len(current[t].partitions)
                req["assignments"] = [{"broker_ids": assignment[p]} for p in sorted(assignment) if p >= start]
            requests.append(req)
        body = {"topics": requests, "timeout_ms": self.cfg.request_timeout_ms, "validate_only": False}
        r = self.pc.send_to_controller(ApiKey.CREATE_PARTITIONS, body, call="createPartitions",
                                       not_controller=lambda r: any(x.error_code == 41 for x in r.results))
        for res in r.results:
            if res.error_code:
                raise _broker_failure(res.error_code, res.error_message)

    def delete(self) -> None:
        topics = self.topics()
        self.ensure_exists(topics)
        if not topics:
            return
        version = self.pc.controller_version(ApiKey.DELETE_TOPICS, call="deleteTopics")
        body: Dict[str, Any] = {"timeout_ms": self.cfg.request_timeout_ms}
        if version >= 6:
            body["topics"] = [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics]
        else:
            body["topic_names"] = list(topics)
        r = self.pc.send_to_controller(ApiKey.DELETE_TOPICS, body, call="deleteTopics",
                                       not_controller=lambda r: any(x.error_code == 41 for x in r.responses))
        for res in r.responses:
            if res.error_code:
                raise _broker_failure(res.error_code, getattr(res, "error_message", None))

    def describe(self) -> None:
        o = self.opts
        topic_id = o.value("topic-id")
        if topic_id and topic_id != "AAAAAAAAAAAAAAAAAAAAAA":
            descriptions = self._describe_by_id(topic_id)
        else:
            topics = self.topics()
            self.ensure_exists(topics)
            descriptions = self._describe(topics) if topics else {}
        ordered = hashmap_order(list(descriptions.values()), key=lambda d: d.name,
                                initial_capacity=max(1, len(descriptions)))
        configs = self._configs([d.name for d in ordered])
        live = set(self._live or ())
        reassignments = self._reassignments([(d.name, p.id) for d in ordered for p in d.partitions])
        report_only = any(o.has(r) for r in _REPORTS)
        overrides_only = o.has("topics-with-overrides")
        for d in ordered:
            cfg = configs.get(d.name, {})
            entries = hashmap_order(list(cfg.values()), key=lambda e: e.name)
            non_default = [e for e in entries if not e.is_default]
            parts = sorted(d.partitions, key=lambda p: p.id)
            if not report_only and (not overrides_only or non_default) and parts:
                first = parts[0]
                rf = _replication_factor(first, reassignments.get((d.name, first.id)))
                line = f"Topic: {d.name}"
                tid = uuid_text(d.topic_id) if d.topic_id is not None else ""
                if tid and tid != "AAAAAAAAAAAAAAAAAAAAAA":
                    line += f"\tTopicId: {tid}"
                line += f"\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}"
                line += "\tConfigs: " + ",".join(f"{e.name}={'null' if e.value is None else e.value}"
                                                 for e in non_default)
                print(line)
            if overrides_only:
                continue
            min_isr = int(cfg["min.insync.replicas"].value or 1) if "min.insync.replicas" in cfg else 1
            for part in parts:
                ra = reassignments.get((d.name, part.id))
                if report_only and not self._reported(part, ra, min_isr, live):
                    continue
                print(_partition_line(d.name, part, ra))

    def _reported(self, part: TopicPart, ra: Optional[Dict[str, List[int]]], min_isr: int, live: Set[int]) -> bool:
        o = self.opts
        has_leader = part.leader is not None
        isr = len(part.isr)
        return ((o.has("under-replicated-partitions") and _replication_factor(part, ra) - isr > 0)
                or (o.has("unavailable-partitions") and (not has_leader or part.leader not in live))
                or (o.has("under-min-isr-partitions") and (not has_leader or isr < min_isr))
                or (o.has("at-min-isr-partitions") and isr == min_isr))

    def _describe_by_id(self, topic_id: str) -> Dict[str, TopicDesc]:
        md = self._metadata(None, "describeTopics")
        for t in md.topics:
            if t.topic_id is not None and uuid_text(t.topic_id) == topic_id and not t.error_code:
                if self.opts.has("exclude-internal") and t.name in INTERNAL_TOPICS:
                    continue
                return {t.name: self._desc(t)}
        if not self.opts.has("if-exists"):
            raise self._fail(f"TopicId '{topic_id}' does not exist as expected")
        return {}

    def _reassignments(self, tps: List[tuple]) -> Dict[tuple, Dict[str, List[int]]]:
        """Ongoing reassignments of ``tps``, from the controller when it can be reached at once: empty when it
        cannot (the cluster is electing one) or cannot tell, so that describe never waits for a controller."""
        if not tps:
            return {}
        by_topic: Dict[str, List[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        body = {"timeout_ms": self.cfg.request_timeout_ms,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}
        cid = self.pc.controller_id
        if cid < 0 or cid not in (self._live or ()):
            return {}
        try:
            r = self.pc.send_to(cid, ApiKey.LIST_PARTITION_REASSIGNMENTS, body, call="listPartitionReassignments",
                                once=True)
        except ProtocolClientError:
            return {}
        if r.error_code:
            return {}
        return {(t.name, p.partition_index): {"replicas": list(p.replicas), "adding": list(p.adding_replicas),
                                              "removing": list(p.removing_replicas)}
                for t in r.topics for p in t.partitions}


def _replication_factor(part: TopicPart, ra: Optional[Dict[str, List[int]]]) -> int:
    replicas = set(part.replicas)
    if ra and replicas & (set(ra["adding"]) | set(ra["removing"])):
        return len(ra["replicas"]) - len(ra["adding"])
    return len(part.replicas)


def _partition_line(topic: str, part: TopicPart, ra: Optional[Dict[str, List[int]]]) -> str:
    leader = part.leader if part.leader is not None else "none"
    line = (f"\tTopic: {topic}\tPartition: {part.id}\tLeader: {leader}"
            f"\tReplicas: {','.join(str(n) for n in part.replicas)}"
            f"\tIsr: {','.join(str(n) for n in part.isr)}")
    if ra is not None:
        line += f"\tAdding Replicas: {','.join(map(str, ra['adding']))}"
        line += f"\tRemoving Replicas: {','.join(map(str, ra['removing']))}"
    return line + "\tElr: N/A\tLastKnownElr: N/A"  # ELR exists only in KRaft mode


def _parse_configs(items: Sequence[str]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for item in items:
        pieces = re.split(r"\s*=\s*", item)
        if len(pieces) != 2:
            raise CommandError('requirement failed: Invalid topic config: all configs to be added must be in the '
                               'format "key=val".')
        out[pieces[0].strip()] = pieces[1].strip()
    return out


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    check_args(parser, o, argv)
    service = TopicService(o)
    try:
        for action in _ACTIONS:
            if o.has(action):
                getattr(service, action)()
    except NodeAssignmentTimeout as e:
        return _failed(e.message, str(e))
    except TopicFailure as e:
        return _failed(e.message, e.java)
    except ProtocolClientError as e:
        return _failed(str(e), None)
    finally:
        service.close()
    return 0


def _failed(message: str, java: Optional[str]) -> int:
    """Kafka's TopicCommand failure: the message on stdout, then the exception logged on stderr (Utils.stackTrace of
    an ApiException, which has no stack frames: its line and a line break); exit status 1."""
    print(f"Error while executing topic command : {message}", flush=True)
    if java:
        log("ERROR", f"{java}\n", "org.apache.kafka.tools.TopicCommand")
    return 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
