"""kafka-consumer-groups.sh: list, describe, delete consumer groups and reset or delete their offsets, as Kafka
3.9's ConsumerGroupCommand.

    kafka-consumer-groups.sh --bootstrap-server localhost:9092 --list [--state [stable,empty]] [--type]
    kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group g [--members [--verbose]|--state]
    kafka-consumer-groups.sh --bootstrap-server localhost:9092 --reset-offsets --group g --topic t[:0,1] \\
        (--to-earliest|--to-latest|--to-current|--to-offset n|--shift-by n|--to-datetime ts|--by-duration PnDTnHnMnS
         |--from-file plan.csv) [--dry-run|--execute] [--export]
    kafka-consumer-groups.sh --bootstrap-server localhost:9092 --delete --group g
    kafka-consumer-groups.sh --bootstrap-server localhost:9092 --delete-offsets --group g --topic t

Output is Kafka's, byte for byte where scripts read it: the describe table (GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID, each row starting with a line break, column widths from the widest
value), the members and state tables, the reset plan (``GROUP TOPIC PARTITION NEW-OFFSET``, which Kafka 3.9 prints
on one line) and its CSV export, rows in the order Kafka's Java maps yield them. Like Kafka 3.9, a failure reported
as ``Error: ...`` on stdout still exits 0; bad options print the usage and exit 1.

Built on confluent-kafka's AdminClient (list/describe/delete groups, committed offsets, offset changes, list
offsets); ``--delete-offsets`` sends OffsetDelete through the protocol client (librdkafka's Python binding has no
such call).
"""
from __future__ import annotations

import datetime
import re
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .command import admin_client, client_config, kafka_error_code, kafka_error_text, protocol_client, tool_main
from .java_format import exception_line, hashmap_order, topic_partition_hash
from .options import OptionParser, Options, UsageError
from .protocol_client import ProtocolClientError

SUMMARY = ("This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, or "
           "reset consumer group offsets.")
MISSING = "-"
TP = Tuple[str, int]
_ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
_SCENARIOS = ("to-offset", "shift-by", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current",
              "from-file")
_STATE_NAMES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
                "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty",
                "ASSIGNING": "Assigning", "RECONCILING": "Reconciling"}
_VALID_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
_TYPE_NAMES = {"UNKNOWN": "Unknown", "CONSUMER": "Consumer", "CLASSIC": "Classic", "SHARE": "Share"}


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("bootstrap-server", "REQUIRED: The server(s) to connect to.", "server to connect to")
    p.arg("group", "The consumer group we wish to act on.", "consumer group")
    p.arg("topic", "The topic whose consumer group information should be deleted or topic whose should be included "
                   "in the reset offset process. In `reset-offsets` case, partitions can be specified using this "
                   "format: `topic1:0,1,2`, where 0,1,2 are the partition to be included in the process. "
                   "Reset-offsets also supports multiple topic inputs.", "topic")
    p.flag("all-topics", "Consider all topics assigned to a group in the `reset-offsets` process.")
    p.flag("list", "List all consumer groups.")
    p.flag("describe", "Describe consumer group and list offset lag (number of messages not yet processed) related "
                       "to given group.")
    p.flag("all-groups", "Apply to all consumer groups.")
    p.flag("delete", "Pass in groups to delete topic partition offsets and ownership information over the entire "
                     "consumer group. For instance --group g1 --group g2")
    p.arg("timeout", "The timeout that can be set for some use cases. For example, it can be used when describing "
                     "the group to specify the maximum amount of time in milliseconds to wait before the group "
                     "stabilizes (when the group is just created, or is going through some changes).",
          "timeout (ms)", "Long", default=5000)
    p.arg("command-config", "Property file containing configs to be passed to Admin Client and Consumer.",
          "command config property file")
    p.flag("reset-offsets", "Reset offsets of consumer group. Supports one consumer group at the time, and instances "
                            "should be inactive\nHas 2 execution options: --dry-run (the default) to plan which "
                            "offsets to reset, and --execute to update the offsets. Additionally, the --export option "
                            "is used to export the results to a CSV format.\nYou must choose one of the following "
                            "reset specifications: --to-datetime, --by-duration, --to-earliest, --to-latest, "
                            "--shift-by, --from-file, --to-current, --to-offset.\nTo define the scope use --all-topics "
                            "or --topic. One scope must be specified unless you use '--from-file'.")
    p.flag("delete-offsets", "Delete offsets of consumer group. Supports one consumer group at the time, and "
                             "multiple topics.")
    p.flag("dry-run", "Only show results without executing changes on Consumer Groups. Supported operations: "
                      "reset-offsets.")
    p.flag("execute", "Execute operation. Supported operations: reset-offsets.")
    p.flag("export", "Export operation execution to a CSV file. Supported operations: reset-offsets.")
    p.arg("to-offset", "Reset offsets to a specific offset.", "offset", "Long")
    p.arg("from-file", "Reset offsets to values defined in CSV file.", "path to CSV file")
    p.arg("to-datetime", "Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'", "datetime")
    p.arg("by-duration", "Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'",
          "duration")
    p.flag("to-earliest", "Reset offsets to earliest offset.")
    p.flag("to-latest", "Reset offsets to latest offset.")
    p.flag("to-current", "Reset offsets to current offset.")
    p.arg("shift-by", "Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.",
          "number-of-offsets", "Long")
    p.flag("members", "Describe members of the group. This option may be used with '--describe' and "
                      "'--bootstrap-server' options only.\nExample: --bootstrap-server localhost:9092 --describe "
                      "--group group1 --members")
    p.flag("verbose", "Provide additional information, if any, when describing the group. This option may be used "
                      "with '--offsets'/'--members'/'--state' and '--bootstrap-server' options only.\nExample: "
                      "--bootstrap-server localhost:9092 --describe --group group1 --members --verbose")
    p.flag("offsets", "Describe the group and list all topic partitions in the group along with their offset lag. "
                      "This is the default sub-action of and may be used with '--describe' and '--bootstrap-server' "
                      "options only.\nExample: --bootstrap-server localhost:9092 --describe --group group1 --offsets")
    p.arg("state", "When specified with '--describe', includes the state of the group.\nExample: --bootstrap-server "
                   "localhost:9092 --describe --group group1 --state\nWhen specified with '--list', it displays the "
                   "state of all groups. It can also be used to list groups with specific states.\nExample: "
                   "--bootstrap-server localhost:9092 --list --state stable,empty\nThis option may be used with "
                   "'--describe', '--list' and '--bootstrap-server' options only.", optional=True)
    p.arg("type", "When specified with '--list', it displays the types of all the groups. It can also be used to "
                  "list groups with specific types.\nExample: --bootstrap-server localhost:9092 --list --type "
                  "classic,consumer\nThis option may be used with the '--list' option only.", optional=True)
    return p


def check_args(p: OptionParser, o: Options) -> None:
    """ConsumerGroupCommandOptions.checkArgs and the action count of ConsumerGroupCommand.main."""
    for name, allowed in (("members", ("describe",)), ("verbose", ("describe",)), ("offsets", ("describe",)),
                          ("state", ("describe", "list")), ("type", ("list",))):
        if o.has(name) and not any(o.has(a) for a in allowed):
            raise UsageError(f"Option(s) [{name}] are unavailable given other options on the command line")
    p.check_required(o, "bootstrap-server")
    if o.has("describe"):
        if not o.has("group") and not o.has("all-groups"):
            raise UsageError("Option [describe] takes one of these options: [all-groups], [group]")
        if sum(o.has(x) for x in ("members", "offsets", "state")) > 1:
            raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if o.has("state") and o.has_argument("state"):
            raise UsageError("Option [describe] does not take a value for [state]")
    if o.has("delete"):
        if not o.has("group") and not o.has("all-groups"):
            raise UsageError("Option [delete] takes one of these options: [all-groups], [group]")
        if o.has("topic"):
            raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if o.has("delete-offsets") and (not o.has("group") or not o.has("topic")):
        raise UsageError("Option [delete-offsets] takes the following options: [all-groups], [group]")
    if o.has("reset-offsets"):
        if o.has("dry-run") and o.has("execute"):
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not o.has("dry-run") and not o.has("execute"):
            print("WARN: No action will be performed as the --execute option is missing.In a future major release, "
                  "the default behavior of this command will be to prompt the user before executing the reset rather "
                  "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
                  "command and want to keep the current default behavior without prompting.", file=sys.stderr)
        if not o.has("group") and not o.has("all-groups"):
            raise UsageError("Option [reset-offsets] takes one of these options: [all-groups], [group]")
        for s in _SCENARIOS:
            p.check_invalid(o, s, [x for x in _SCENARIOS if x != s])
    p.check_invalid(o, "group", ["all-groups"])
    p.check_invalid(o, "group", ["list"])
    p.check_invalid(o, "topic", ["list", "describe"])
    if sum(o.has(a) for a in _ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                         "--delete-offsets")


class GroupError(Exception):
    """Kafka's printError: ``\\nError: <message>`` on stdout; the command still exits 0, as Kafka 3.9's."""


def _state_name(state: Any) -> str:
    return _STATE_NAMES.get(getattr(state, "name", str(state)), "Unknown")


def _tp_order(tps: Sequence[TP]) -> List[TP]:
    """Iteration order of a Java HashMap keyed by these TopicPartitions (Collectors.toMap's)."""
    return hashmap_order(list(tps), hash_fn=lambda tp: topic_partition_hash(tp[0], tp[1]))


def parse_duration_ms(text: str) -> int:
    """java.time.Duration.parse (PnDTnHnMnS) in milliseconds."""
    m = re.fullmatch(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                     r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", text.strip(), re.IGNORECASE)
    if not m or (m.group(3) == "T" or m.group(3) == "t") or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise GroupError("Executing consumer group command failed due to Text cannot be parsed to a Duration")
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    frac = (m.group(7) or "").ljust(9, "0")[:9]
    total_ns = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 10 ** 9
    total_ns += (-1 if (m.group(6) or "").startswith("-") else 1) * int(frac or 0)
    if m.group(1) == "-":
        total_ns = -total_ns
    return total_ns // 10 ** 6


def parse_datetime_ms(text: str) -> int:
    """Kafka's Utils.getDateTime: ``yyyy-MM-ddTHH:mm:ss.SSS`` with an optional zone (Z, ±hh:mm, ±hhmm, ±hh);
    without a zone the local one."""
    if len(text.split("T")) != 2:
        raise GroupError("Executing consumer group command failed due to Error parsing timestamp. It does not "
                         "contain a 'T' according to ISO8601 format")
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?", text.strip())
    if not m:
        raise GroupError(f"Executing consumer group command failed due to Unparseable date: \"{text}\"")
    local = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
    zone = m.group(2)
    if zone is None:
        return int(local.astimezone().timestamp() * 1000)
    if zone == "Z":
        tz = datetime.timezone.utc
    else:
        digits = zone[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) > 2 else 0)
        tz = datetime.timezone(datetime.timedelta(minutes=minutes if zone[0] == "+" else -minutes))
    return int(local.replace(tzinfo=tz).timestamp() * 1000)


class ConsumerGroupService:
    """The group operations of one command on one AdminClient."""

    def __init__(self, o: Options, parser: OptionParser) -> None:
        self.opts = o
        self.parser = parser
        self.cfg = client_config(o)
        self.admin = admin_client(self.cfg)
        self.timeout_s = o.value("timeout") / 1000.0

    # ---------------------------------------------------------------------------------------------- admin calls
    def _wait(self, future: Any) -> Any:
        import concurrent.futures

        try:
            return future.result(timeout=max(self.timeout_s, 1.0) + 5)
        except concurrent.futures.TimeoutError:
            raise GroupError("Executing consumer group command failed due to "
                             "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
                             "assignment.") from None

    def _fail(self, exc: BaseException, call: Optional[str] = None) -> GroupError:
        return GroupError(f"Executing consumer group command failed due to {_cause(exc, call)}")

    def list_groups_raw(self, wrapped: bool = True) -> List[Any]:
        """Every group of every broker. A broker that did not answer fails the listing, as Kafka's
        ``ListConsumerGroupsResult.all()`` does: ``wrapped`` (plain ``--list`` and ``--all-groups``, where Kafka
        wraps the ExecutionException in a RuntimeException) prefixes ``java.util.concurrent.ExecutionException:``."""
        try:
            r = self._wait(self.admin.list_consumer_groups(request_timeout=self.timeout_s))
        except GroupError:
            raise
        except Exception as e:
            raise self._fail(e) from None
        errors = list(getattr(r, "errors", None) or [])
        if errors:
            code = errors[0].code() if hasattr(errors[0], "code") else -1
            if code > 0:
                cause = exception_line(code, _broker_message(KafkaErrorHolder(errors[0])))
            elif not r.valid:  # no broker reached: Kafka's findAllBrokers call timed out
                cause = "org.apache.kafka.common.KafkaException: Failed to find brokers to send ListGroups"
            else:
                cause = ("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
                         "Call: listConsumerGroups")
            prefix = "java.util.concurrent.ExecutionException: " if wrapped else ""
            raise GroupError(f"Executing consumer group command failed due to {prefix}{cause}")
        return list(r.valid)

    def group_ids(self) -> List[str]:
        if self.opts.has("all-groups"):
            return [g.group_id for g in self.list_groups_raw()]
        return list(self.opts.values("group"))

    def describe_groups(self, ids: Sequence[str]) -> Dict[str, Any]:
        if not ids:
            return {}
        futures = self.admin.describe_consumer_groups(list(dict.fromkeys(ids)), request_timeout=self.timeout_s)
        out = {}
        for g, f in futures.items():
            try:
                out[g] = self._wait(f)
            except GroupError:
                raise
            except Exception as e:
                raise self._fail(e, "describeConsumerGroups(api=FIND_COORDINATOR)") from None
        return out

    def committed(self, group: str) -> Dict[TP, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                         request_timeout=self.timeout_s)
        try:
            r = self._wait(futures[group])
        except GroupError:
            raise
        except Exception as e:
            raise self._fail(e, "listConsumerGroupOffsets(api=FIND_COORDINATOR)") from None
        return {(tp.topic, tp.partition): tp.offset for tp in r.topic_partitions if tp.offset >= 0}

    def log_offsets(self, tps: Sequence[TP], spec: Any) -> Dict[TP, Optional[int]]:
        """Offsets per partition for an OffsetSpec; None where the partition could not be asked (Kafka's Unknown)."""
        from confluent_kafka import TopicPartition

        if not tps:
            return {}
        futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                          request_timeout=self.timeout_s)
        out: Dict[TP, Optional[int]] = {}
        for tp, f in futures.items():
            try:
                out[(tp.topic, tp.partition)] = self._wait(f).offset
            except GroupError:
                raise
            except Exception:
                out[(tp.topic, tp.partition)] = None
        return out

    def log_end_offsets(self, tps: Sequence[TP]) -> Dict[TP, Optional[int]]:
        from confluent_kafka.admin import OffsetSpec

        return self.log_offsets(tps, OffsetSpec.latest())

    def log_start_offsets(self, tps: Sequence[TP]) -> Dict[TP, Optional[int]]:
        from confluent_kafka.admin import OffsetSpec

        return self.log_offsets(tps, OffsetSpec.earliest())

    def topic_partitions(self, topics: Sequence[str]) -> List[TP]:
        from confluent_kafka import TopicCollection

        if not topics:
            return []
        futures = self.admin.describe_topics(TopicCollection(list(topics)), request_timeout=self.timeout_s)
        out: List[TP] = []
        for t in hashmap_order(list(futures), initial_capacity=max(1, len(futures))):
            try:
                d = self._wait(futures[t])
            except GroupError:
                raise
            except Exception as e:
                raise self._fail(e) from None
            out.extend((t, p.id) for p in d.partitions)
        return out

    # ---------------------------------------------------------------------------------------------- list
    def list_groups(self) -> None:
        o = self.opts
        include_type, include_state = o.has("type"), o.has("state")
        groups = self.list_groups_raw(wrapped=not include_type and not include_state)
        if not include_type and not include_state:
            for g in groups:
                print(g.group_id)
            return
        states = _parse_states(o.value("state")) if o.has_argument("state") else set()
        types = _parse_types(o.value("type")) if o.has_argument("type") else set()
        rows = []
        for g in groups:
            state = _state_name(g.state)
            gtype = _TYPE_NAMES.get(getattr(getattr(g, "type", None), "name", "UNKNOWN"), "Unknown")
            if states and state.lower() not in states:
                continue
            if types and gtype.lower() not in types:
                continue
            rows.append((g.group_id, gtype, state))
        width = max([15] + [len(r[0]) for r in rows]) + 10
        fmt_parts = [f"{{:<{width}}}"]
        header = ["GROUP"]
        if include_type:
            fmt_parts.append("{:<20}")
            header.append("TYPE")
        if include_state:
            fmt_parts.append("{:<20}")
            header.append("STATE")
        fmt = " ".join(fmt_parts)
        print(fmt.format(*header))
        for gid, gtype, state in rows:
            values = [gid] + ([gtype] if include_type else []) + ([state] if include_state else [])
            print(fmt.format(*values))

    # ---------------------------------------------------------------------------------------------- describe
    def _should_print(self, group: str, state: Optional[str], rows: Optional[int]) -> bool:
        if rows is None:
            _print_error(f"The consumer group '{group}' does not exist.")
            return False
        if state == "Dead":
            _print_error(f"Consumer group '{group}' does not exist.")
        elif state == "Empty":
            print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
        elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
        elif state != "Stable":
            raise GroupError(f"Executing consumer group command failed due to Expected a valid consumer group "
                             f"state, but found '{state}'.")
        return state != "Dead" and rows > 0

    def describe(self) -> None:
        o = self.opts
        ids = self.group_ids()
        descriptions = self.describe_groups(ids)
        if o.has("members"):
            self._print_members(descriptions, o.has("verbose"))
        elif o.has("state") and not o.has("offsets"):
            self._print_states(descriptions)
        else:
            self._print_offsets(descriptions)

    def collect_offsets(self, group: str, desc: Any) -> List[List[str]]:
        """The rows of ``--describe --offsets`` for one group, in Kafka's order."""
        committed = self.committed(group)
        rows: List[List[str]] = []
        assigned: List[TP] = []
        members = [m for m in desc.members if m.assignment and m.assignment.topic_partitions]
        members.sort(key=lambda m: -len(m.assignment.topic_partitions))
        for m in members:
            tps = [(tp.topic, tp.partition) for tp in m.assignment.topic_partitions]
            assigned.extend(tps)
            rows.extend(self._partition_rows(group, tps, committed, m.member_id, m.host, m.client_id))
        unassigned = [tp for tp in _tp_order(list(committed)) if tp not in assigned]
        if unassigned:
            rows.extend(self._partition_rows(group, unassigned, committed, MISSING, MISSING, MISSING))
        return rows

    def _partition_rows(self, group: str, tps: List[TP], committed: Dict[TP, int], consumer_id: str, host: str,
                        client_id: str) -> List[List[str]]:
        ends = self.log_end_offsets(sorted(tps, key=lambda tp: tp[1]))
        rows = []
        for tp in _tp_order(sorted(tps, key=lambda tp: tp[1])):
            offset = committed.get(tp)
            end = ends.get(tp)
            lag = str(end - offset) if offset is not None and offset != -1 and end is not None else MISSING
            rows.append([group, tp[0], str(tp[1]), MISSING if offset is None else str(offset),
                         MISSING if end is None else str(end), lag, consumer_id, host, client_id])
        return rows

    def _print_offsets(self, descriptions: Dict[str, Any]) -> None:
        for group in sorted(descriptions):
            desc = descriptions[group]
            state = _state_name(desc.state)
            rows = self.collect_offsets(group, desc)
            if not self._should_print(group, state, len(rows)):
                continue
            wg = max([15] + [len(r[0]) for r in rows])
            wt = max([15] + [len(r[1]) for r in rows])
            wc = max([15] + [len(r[6]) for r in rows])
            wh = max([15] + [len(r[7]) for r in rows])

            def line(v: Sequence[str]) -> str:
                return (f"\n{v[0]:<{wg}} {v[1]:<{wt}} {v[2]:<10} {v[3]:<15} {v[4]:<15} {v[5]:<15} {v[6]:<{wc}} "
                        f"{v[7]:<{wh}} {v[8]}")
            sys.stdout.write(line(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                   "CONSUMER-ID", "HOST", "CLIENT-ID"]))
            for r in rows:
                sys.stdout.write(line(r))
        sys.stdout.flush()

    def _print_members(self, descriptions: Dict[str, Any], verbose: bool) -> None:
        for group in sorted(descriptions):
            desc = descriptions[group]
            members = list(desc.members)
            wg, wc, wi, wh, wl = 15, 15, 17, 15, 15
            with_instance = False
            if self._should_print(group, _state_name(desc.state), len(members)):
                for m in members:
                    wg, wc = max(wg, len(group)), max(wc, len(m.member_id))
                    wi = max(wi, len(m.group_instance_id or ""))
                    wh, wl = max(wh, len(m.host)), max(wl, len(m.client_id))
                    with_instance = with_instance or bool(m.group_instance_id)
            if with_instance:
                fmt = f"{{:<{wg}}} {{:<{wc}}} {{:<{wi}}} {{:<{wh}}} {{:<{wl}}} {{:<15}} "
                sys.stdout.write("\n" + fmt.format("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                                                   "#PARTITIONS"))
            else:
                fmt = f"{{:<{wg}}} {{:<{wc}}} {{:<{wh}}} {{:<{wl}}} {{:<15}} "
                sys.stdout.write("\n" + fmt.format("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"))
            if verbose:
                sys.stdout.write("ASSIGNMENT")
            sys.stdout.write("\n")
            for m in members:
                tps = list(m.assignment.topic_partitions) if m.assignment else []
                if with_instance:
                    sys.stdout.write(fmt.format(group, m.member_id, m.group_instance_id or "", m.host, m.client_id,
                                                len(tps)))
                else:
                    sys.stdout.write(fmt.format(group, m.member_id, m.host, m.client_id, len(tps)))
                if verbose:
                    sys.stdout.write(_assignment_text([(tp.topic, tp.partition) for tp in tps]))
                sys.stdout.write("\n")
        sys.stdout.flush()

    def _print_states(self, descriptions: Dict[str, Any]) -> None:
        for group in sorted(descriptions):
            desc = descriptions[group]
            state = _state_name(desc.state)
            if not self._should_print(group, state, 1):
                continue
            c = desc.coordinator
            coordinator = f"{c.host}:{c.port}  ({c.id})"
            width = max(25, len(coordinator))
            fmt = f"\n{{:<{width}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
            sys.stdout.write(fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
            sys.stdout.write(fmt.format(group, coordinator, desc.partition_assignor or "", state, len(desc.members)))
            sys.stdout.write("\n")
        sys.stdout.flush()

    # ---------------------------------------------------------------------------------------------- reset
    def reset_offsets(self) -> List[Tuple[str, List[Tuple[TP, int]]]]:
        """Kafka's resetOffsets: the plan per group (in Java HashMap order), applied with --execute."""
        o = self.opts
        ids = self.group_ids()
        descriptions = self.describe_groups(ids)
        result: Dict[str, List[Tuple[TP, int]]] = {}
        for group in ids:
            state = _state_name(descriptions[group].state)
            if state not in ("Empty", "Dead"):
                _print_error(f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                             f"state is {state}.")
                result[group] = []
                continue
            partitions = self._partitions_to_reset(group)
            plan = self._prepare(group, partitions)
            if o.has("execute"):
                self._alter(group, plan)
            result[group] = plan
        return [(g, result[g]) for g in hashmap_order(list(result))]

    def _partitions_to_reset(self, group: str) -> List[TP]:
        o = self.opts
        if o.has("all-topics"):
            return _tp_order(list(self.committed(group)))
        if o.has("topic"):
            with_parts: List[TP] = []
            plain: List[str] = []
            for arg in o.values("topic"):
                if ":" in arg:
                    with_parts.extend(_parse_topic_partitions(arg))
                else:
                    plain.append(arg)
            return with_parts + self.topic_partitions(plain)
        if not o.has("from-file"):
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        return []

    def _prepare(self, group: str, partitions: List[TP]) -> List[Tuple[TP, int]]:
        o = self.opts
        if o.has("to-offset"):
            return self._check_range({tp: o.value("to-offset") for tp in partitions})
        if o.has("to-earliest"):
            return self._from_log(partitions, self.log_start_offsets(partitions), "starting")
        if o.has("to-latest"):
            return self._from_log(partitions, self.log_end_offsets(partitions), "ending")
        if o.has("shift-by"):
            current = self.committed(group)
            requested = {}
            for tp in partitions:
                if tp not in current:
                    raise UsageError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                                     "committed offset")
                requested[tp] = current[tp] + o.value("shift-by")
            return self._check_range(requested)
        if o.has("to-datetime"):
            ts = parse_datetime_ms(o.value("to-datetime"))
            return self._from_log(partitions, self._timestamp_offsets(partitions, ts), "timestamp")
        if o.has("by-duration"):
            ts = int(time.time() * 1000) - parse_duration_ms(o.value("by-duration"))
            return self._from_log(partitions, self._timestamp_offsets(partitions, ts), "timestamp")
        if o.has("from-file"):
            plan = self._plan_from_file().get(group)
            if plan is None:
                _print_error(f"No reset plan for group {group} found")
                return []
            return self._check_range(plan)
        if o.has("to-current"):
            current = self.committed(group)
            with_commit = [tp for tp in partitions if tp in current]
            without = [tp for tp in partitions if tp not in current]
            out = {tp: current[tp] for tp in with_commit}
            ends = self.log_end_offsets(without)
            for tp in without:
                if ends.get(tp) is None:
                    raise UsageError(f"Error getting ending offset of topic partition: {tp[0]}-{tp[1]}")
                out[tp] = ends[tp]
            return [(tp, out[tp]) for tp in _tp_order(list(out))]
        raise UsageError("Option '[reset-offsets]' requires one of the following scenarios: [to-offset], [shift-by], "
                         "[to-datetime], [by-duration], [to-earliest], [to-latest], [to-current], [from-file]")

    def _from_log(self, partitions: List[TP], offsets: Dict[TP, Optional[int]], what: str) -> List[Tuple[TP, int]]:
        out = []
        for tp in _tp_order(partitions):
            if offsets.get(tp) is None:
                label = {"starting": "starting offset", "ending": "ending offset",
                         "timestamp": "offset by timestamp"}[what]
                raise UsageError(f"Error getting {label} of topic partition: {tp[0]}-{tp[1]}")
            out.append((tp, int(offsets[tp])))  # type: ignore[arg-type]
        return out

    def _timestamp_offsets(self, partitions: List[TP], ts: int) -> Dict[TP, Optional[int]]:
        from confluent_kafka.admin import OffsetSpec

        found = self.log_offsets(partitions, OffsetSpec.for_timestamp(ts))
        missing = [tp for tp in partitions if found.get(tp) is None or found[tp] == -1]
        for tp in _tp_order(missing):
            print(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest known offset.")
        out = {tp: v for tp, v in found.items() if v is not None and v != -1}
        out.update(self.log_end_offsets(missing))
        return out

    def _check_range(self, requested: Dict[TP, int]) -> List[Tuple[TP, int]]:
        tps = list(requested)
        starts, ends = self.log_start_offsets(tps), self.log_end_offsets(tps)
        out = {}
        for tp, offset in requested.items():
            end, start = ends.get(tp), starts.get(tp)
            if end is not None and offset > end:
                print(f"WARN New offset ({offset}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {end}", file=sys.stderr)
                out[tp] = end
            elif start is not None and offset < start:
                print(f"WARN New offset ({offset}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {start}", file=sys.stderr)
                out[tp] = start
            else:
                out[tp] = offset
        return [(tp, out[tp]) for tp in _tp_order(list(out))]

    def _plan_from_file(self) -> Dict[str, Dict[TP, int]]:
        path = self.opts.value("from-file")
        try:
            with open(path, encoding="utf-8") as f:
                lines = [ln for ln in f.read().split("\n") if ln.strip()]
        except OSError as e:
            raise GroupError(f"Executing consumer group command failed due to java.io.IOException: {e}") from None
        single = len(self.opts.values("group")) == 1
        plan: Dict[str, Dict[TP, int]] = {}
        old_format = bool(lines) and len(lines[0].split(",")) == 3
        for line in lines:
            cells = [c.strip() for c in line.split(",")]
            try:
                if single and old_format:
                    group, (topic, part, off) = self.opts.value("group"), cells
                else:
                    group, topic, part, off = cells
                plan.setdefault(group, {})[(topic, int(part))] = int(off)
            except ValueError:
                raise GroupError(f"Executing consumer group command failed due to invalid CSV line '{line}'") from None
        return plan

    def _alter(self, group: str, plan: List[Tuple[TP, int]]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        if not plan:
            return
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, off) for (t, p), off in plan])
        futures = self.admin.alter_consumer_group_offsets([request], request_timeout=self.timeout_s)
        try:
            r = self._wait(futures[group])
        except GroupError:
            raise
        except Exception as e:
            raise self._fail(e) from None
        for tp in r.topic_partitions:
            if tp.error is not None:
                raise GroupError(f"Executing consumer group command failed due to {tp.error.str()}")

    def export_csv(self, plan: List[Tuple[str, List[Tuple[TP, int]]]]) -> str:
        single = len(self.opts.values("group")) == 1
        out = []
        for group, rows in plan:
            for (t, p), off in rows:
                out.append(f"{t},{p},{off}\n" if single else f"{group},{t},{p},{off}\n")
        return "".join(out)

    # ---------------------------------------------------------------------------------------------- delete
    def delete_groups(self) -> None:
        ids = self.group_ids()
        if not ids:
            print("Deletion of requested consumer groups ('') was successful.")
            return
        futures = self.admin.delete_consumer_groups(list(dict.fromkeys(ids)), request_timeout=self.timeout_s)
        success: List[str] = []
        failed: Dict[str, str] = {}
        for g, f in futures.items():
            try:
                self._wait(f)
                success.append(g)
            except GroupError:
                raise
            except Exception as e:
                failed[g] = f"java.util.concurrent.ExecutionException: " \
                            f"{_cause(e, 'deleteConsumerGroups(api=FIND_COORDINATOR)')}"
        success = hashmap_order(success)
        if not failed:
            print(f"Deletion of requested consumer groups ('{', '.join(success)}') was successful.")
            return
        _print_error("Deletion of some consumer groups failed:")
        for g in hashmap_order(list(failed)):
            print(f"* Group '{g}' could not be deleted due to: {failed[g]}")
        if success:
            print(f"\nThese consumer groups were deleted successfully: '{''.join(success)}', '")

    def delete_offsets(self) -> None:
        """OffsetDelete through the protocol client; Kafka's summary line and TOPIC/PARTITION/STATUS table."""
        from broker.protocol.api import ApiKey

        group = self.opts.value("group")
        topics = list(self.opts.values("topic"))
        results: Dict[TP, Optional[str]] = {}
        partitions: List[TP] = []
        for arg in topics:
            if ":" in arg:
                partitions.extend(_parse_topic_partitions(arg))
        plain = [t for t in topics if ":" not in t]
        from confluent_kafka import TopicCollection

        if plain:
            futures = self.admin.describe_topics(TopicCollection(plain), request_timeout=self.timeout_s)
            for t, f in futures.items():
                try:
                    d = self._wait(f)
                    partitions.extend((t, p.id) for p in d.partitions)
                except GroupError:
                    raise
                except Exception as e:
                    code = kafka_error_code(e)
                    results[(t, -1)] = ("java.util.concurrent.ExecutionException: "
                                        + (exception_line(code) if code and code > 0 else kafka_error_text(e)))
        partitions = list(dict.fromkeys(partitions))
        by_topic: Dict[str, List[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        body = {"group_id": group, "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]}
                                              for t, ps in by_topic.items()]}
        top = 0
        try:
            with protocol_client(self.cfg) as pc:
                r = pc.send_to_coordinator(group, ApiKey.OFFSET_DELETE, body)
        except ProtocolClientError as e:
            raise GroupError(f"Executing consumer group command failed due to {e}") from None
        top = r.error_code
        errors_by_tp = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
        partition_error = None
        for tp in partitions:
            code = top if top else errors_by_tp.get(tp, 0)
            if code:
                results[tp] = f"{exception_line(code)}"
                if not top and partition_error is None:
                    partition_error = code
            else:
                results[tp] = None
        if top == 0 and partition_error is not None:
            top = partition_error
        if top == 0:
            print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
        elif top == 24:
            _print_error(f"'{group}' is not valid.")
        elif top == 69:
            _print_error(f"'{group}' does not exist.")
        elif top == 30:
            _print_error(f"Access to '{group}' is not authorized.")
        elif top == 68:
            _print_error(f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.")
        elif top in (86, 29, 3):
            _print_error("Encounter some partition level error, see the follow-up details:")
        else:
            from .protocol_client import error_name

            _print_error(f"Encounter some unknown error: {error_name(top)}")
        fmt = "{:<30} {:<15} {:<15}"
        sys.stdout.write("\n" + fmt.format("TOPIC", "PARTITION", "STATUS"))
        for tp in sorted(results, key=lambda tp: tp[0] + str(tp[1])):
            err = results[tp]
            sys.stdout.write(fmt.format(tp[0], tp[1] if tp[1] >= 0 else "Not Provided",
                                        f"Error: :{err}" if err is not None else "Successful"))
        sys.stdout.flush()


#: librdkafka's local errors for "no broker answered in time": _TRANSPORT, _ALL_BROKERS_DOWN, _TIMED_OUT
_UNREACHED = (-195, -187, -185)


def _cause(exc: BaseException, call: Optional[str] = None) -> str:
    """The exception line Kafka's tool prints for a failed admin call: the broker's error as Kafka's exception, or,
    when no broker could be reached in time, Kafka's TimeoutException naming the call."""
    code = kafka_error_code(exc)
    if code is not None and code > 0:
        return exception_line(code, _broker_message(exc))
    if call and code in _UNREACHED:
        return f"org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. Call: {call}"
    return kafka_error_text(exc)


class KafkaErrorHolder(Exception):
    """A bare confluent-kafka KafkaError (a listing's ``errors``) in the shape ``kafka_error_text`` reads."""


def _broker_message(exc: BaseException) -> Optional[str]:
    """The broker's own error message inside a confluent-kafka error, when librdkafka passed one through."""
    text = kafka_error_text(exc)
    return None if text.startswith("Broker: ") else text


def _print_error(message: str) -> None:
    print(f"\nError: {message}")


def _assignment_text(tps: List[TP]) -> str:
    """``--members --verbose`` ASSIGNMENT: per topic ``topic(p,...)``, partitions and topics sorted as strings."""
    if not tps:
        return MISSING
    grouped: Dict[str, List[int]] = {}
    for t, p in tps:
        grouped.setdefault(t, []).append(p)
    parts = [t + "(" + ",".join(sorted(str(p) for p in ps)) + ")" for t, ps in grouped.items()]
    return ", ".join(sorted(parts))


def _parse_topic_partitions(arg: str) -> List[TP]:
    pieces = arg.split(":")
    if len(pieces) != 2:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    topic, parts = pieces
    out = []
    for p in parts.split(","):
        try:
            out.append((topic, int(p)))
        except ValueError:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
    return out


def _parse_states(text: str) -> set:
    states = {s.strip().lower() for s in text.split(",")}
    valid = {s.lower() for s in _VALID_STATES}
    if not states <= valid:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(_VALID_STATES)}")
    return states


def _parse_types(text: str) -> set:
    types = {s.strip().lower() for s in text.lower().split(",")}
    if not types <= {"consumer", "classic", "share"}:
        raise UsageError(f"Invalid types list '{text}'. Valid types are: consumer, classic, share")
    return types


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    check_args(parser, o)
    service = ConsumerGroupService(o, parser)
    try:
        if o.has("list"):
            service.list_groups()
        elif o.has("describe"):
            service.describe()
        elif o.has("delete"):
            service.delete_groups()
        elif o.has("reset-offsets"):
            plan = service.reset_offsets()
            if o.has("export"):
                print(service.export_csv(plan))
            elif plan:
                fmt = "{:<30} {:<30} {:<10} {:<15}"
                sys.stdout.write("\n" + fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
                for group, rows in plan:
                    for (t, p), off in rows:
                        sys.stdout.write(fmt.format(group, t, p, off))
                sys.stdout.flush()
        else:
            service.delete_offsets()
    except GroupError as e:
        _print_error(str(e))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())

