"""kafka-get-offsets.sh: the offsets of topic partitions at a time, as Kafka 3.9's GetOffsetShell.

    kafka-get-offsets.sh --bootstrap-server localhost:9092 [--topic regex [--partitions 0,1]] [--time -1|-2|-3|ts]
    kafka-get-offsets.sh --bootstrap-server localhost:9092 --topic-partitions 't1:0,t2:1-3,t3,:5-'

Prints ``topic:partition:offset`` per partition in Kafka's order (a TreeMap on TopicPartition.toString, so the
text ``topic-partition``: ``t-10`` before ``t-2``); partitions without an answer (a timestamp after the last
record) are left out, as Kafka does. ``--time``: ``-1``/``latest`` (the default), ``-2``/``earliest``,
``-3``/``max-timestamp``, ``-4``/``earliest-local``, ``-5``/``latest-tiered`` or a timestamp in ms. Errors print
``Error occurred: <message>`` on stderr and exit 1; a partition whose leader answers with an error is skipped with
Kafka's ``Skip getting offsets for topic-partition <t>-<p> due to error: ...`` line.

Built on the project's protocol client as Kafka's admin client does it: Metadata from any live broker, then
ListOffsets to each partition's leader. An unreachable bootstrap server logs Kafka's connection warning at
Kafka's reconnect backoff until ``default.api.timeout.ms`` (``--command-config``), then ``Error occurred:
org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. Call: listTopics``.
"""
from __future__ import annotations

import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .command import client_config, protocol_client, tool_main
from .java_format import exception_line
from .options import CommandError, OptionParser, Options
from .protocol_client import ProtocolClientError

SUMMARY = "An interactive shell for getting topic-partition offsets."
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
_TP_PATTERN = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("bootstrap-server", "REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.",
          "HOST1:PORT1,...,HOST3:PORT3")
    p.arg("broker-list", "DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified. The "
                         "server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.", "HOST1:PORT1,...,HOST3:PORT3")
    p.arg("topic-partitions", "Comma separated list of topic-partition patterns to get the offsets for, with the "
                              "format of '([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?'. The first group is an "
                              "optional regex for the topic name, if omitted, it matches any topic name. The section "
                              "after ':' describes a 'partition' pattern, which can be: a number, a range in the "
                              "format of 'NUMBER-NUMBER' (lower inclusive, upper exclusive), an inclusive lower bound "
                              "in the format of 'NUMBER-', an exclusive upper bound in the format of '-NUMBER' or may "
                              "be omitted to accept all partitions.",
          "topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3")
    p.arg("topic", "The topic to get the offsets for. It also accepts a regular expression. If not present, all "
                   "authorized topics are queried. Cannot be used if --topic-partitions is present.", "topic")
    p.arg("partitions", "Comma separated list of partition ids to get the offsets for. If not present, all "
                        "partitions of the authorized topics are queried. Cannot be used if --topic-partitions is "
                        "present.", "partition ids")
    p.arg("time", "timestamp of the offsets before that. [Note: No offset is returned, if the timestamp greater than "
                  "recently committed record timestamp is given.]", "<timestamp> / -1 or latest / -2 or earliest / "
                  "-3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered", default="latest")
    p.arg("command-config", "Property file containing configs to be passed to Admin Client.", "config file")
    p.flag("exclude-internal-topics", "By default, internal topics are included. If specified, internal topics are "
                                      "excluded.")
    return p


class OffsetError(Exception):
    """Printed as ``Error occurred: <message>``, exit 1."""


def parse_time(text: str) -> int:
    t = text.strip().lower()
    if t in _TIMES:
        return _TIMES[t]
    try:
        return int(t)
    except ValueError:
        raise OffsetError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
                          "max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long format "
                          "timestamp") from None


def _partition_filter(lo: Optional[str], hi: Optional[str], exact: Optional[str]) -> Any:
    if exact is not None and exact != "":
        n = int(exact)
        return lambda p: p == n
    if lo is None and hi is None:
        return lambda p: True
    low = int(lo) if lo else None
    high = int(hi) if hi else None
    if low is None and high is None:
        raise OffsetError("Invalid range: both bounds are missing")
    return lambda p: (low is None or p >= low) and (high is None or p < high)


def build_filters(o: Options) -> List[Tuple[Any, Any]]:
    """(topic predicate, partition predicate) pairs, any of which selects a partition."""
    exclude_internal = o.has("exclude-internal-topics")

    def topic_pred(regex: Optional[str]) -> Any:
        pattern = re.compile(regex) if regex else None
        return lambda t: (pattern is None or pattern.fullmatch(t) is not None) and \
            not (exclude_internal and t in INTERNAL_TOPICS)

    if o.has("topic-partitions"):
        if o.has("topic") or o.has("partitions"):
            raise OffsetError("--topic-partitions cannot be used with --topic or --partitions")
        out = []
        for spec in o.value("topic-partitions").split(","):
            m = _TP_PATTERN.fullmatch(spec.strip())
            if not m:
                raise OffsetError(f"Invalid topic-partition rule: {spec}")
            topic, exact, lo, hi = m.groups()
            out.append((topic_pred(topic), _partition_filter(lo, hi, exact)))
        return out
    parts: Optional[set] = None
    if o.has("partitions"):
        try:
            parts = {int(p.strip()) for p in o.value("partitions").split(",")}
        except ValueError:
            raise OffsetError(f"Invalid partition id list: {o.value('partitions')}") from None
    return [(topic_pred(o.value("topic")), (lambda p: True) if parts is None else (lambda p: p in parts))]


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    bootstrap = o.value("bootstrap-server") or o.value("broker-list")
    if not bootstrap:
        parser.check_required(o, "bootstrap-server")
    try:
        offsets = get_offsets(o)
    except (OffsetError, ProtocolClientError) as e:
        print(f"Error occurred: {e}", file=sys.stderr)
        return 1
    # Kafka collects them in a TreeMap ordered by TopicPartition.toString: "t-10" sorts before "t-2"
    for (t, p), off in sorted(offsets.items(), key=lambda item: f"{item[0][0]}-{item[0][1]}"):
        print(f"{t}:{p}:{off}")
    return 0


def get_offsets(o: Options) -> Dict[Tuple[str, int], int]:
    time_spec = parse_time(str(o.value("time")))
    filters = build_filters(o)
    cfg = client_config(o, bootstrap_option="bootstrap-server" if o.has("bootstrap-server") else "broker-list")
    with protocol_client(cfg, client_id="GetOffsetShell") as pc:
        pc.log_label = "AdminClient clientId=GetOffsetShell"  # Kafka's tool sets client.id=GetOffsetShell
        md = pc.refresh_metadata(None, call="listTopics")
        selected = [(t.name, p.partition_index) for t in md.topics if not t.error_code for p in t.partitions
                    if any(tf(t.name) and pf(p.partition_index) for tf, pf in filters)]
        if not selected:
            raise OffsetError("Could not match any topic-partitions with the specified filters")
        leaders = {(t.name, p.partition_index): p.leader_id for t in md.topics for p in t.partitions}
        live = {b.node_id for b in md.brokers}
        return _list_offsets(pc, selected, leaders, live, time_spec)


#: the ListOffsets version each special timestamp needs (max-timestamp, earliest-local, latest-tiered)
_MIN_VERSION = {-3: 7, -4: 8, -5: 9}


def _list_offsets(pc: Any, selected: List[Tuple[str, int]], leaders: Dict[Tuple[str, int], int], live: Any,
                  timestamp: int) -> Dict[Tuple[str, int], int]:
    """ListOffsets for ``timestamp`` sent to each partition's leader; errors skip the partition as Kafka's tool
    does."""
    from broker.protocol.api import ApiKey

    out: Dict[Tuple[str, int], int] = {}
    by_leader: Dict[int, Dict[str, List[int]]] = {}
    for t, p in selected:
        leader = leaders.get((t, p), -1)
        if leader < 0 or leader not in live:
            _skip(t, p, exception_line(5))
            continue
        by_leader.setdefault(leader, {}).setdefault(t, []).append(p)
    for leader, topics in by_leader.items():
        version = pc.version_for(ApiKey.LIST_OFFSETS, leader)
        if version < _MIN_VERSION.get(timestamp, 1):
            raise CommandError(f"Error occurred: the broker {leader} does not support --time {timestamp}")
        body = {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                       "timestamp": timestamp} for p in ps]}
                           for t, ps in topics.items()]}
        r = pc.send_to(leader, ApiKey.LIST_OFFSETS, body, call="listOffsets")
        for t in r.topics:
            for p in t.partitions:
                if p.error_code:
                    _skip(t.name, p.partition_index, exception_line(p.error_code))
                elif p.offset >= 0:
                    out[(t.name, p.partition_index)] = p.offset
    return out


def _skip(topic: str, partition: int, error: str) -> None:
    print(f"Skip getting offsets for topic-partition {topic}-{partition} due to error: {error}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
