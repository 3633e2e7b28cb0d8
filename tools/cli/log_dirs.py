"""kafka-log-dirs.sh: the log directories of brokers and the partitions in them, as Kafka 3.9's LogDirsCommand.

    kafka-log-dirs.sh --bootstrap-server localhost:9092 --describe [--broker-list 0,1] [--topic-list t1,t2]

Prints ``Querying brokers for log directories information``, ``Received log directory information from brokers
<ids>`` and one JSON line: ``{"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":"t-0","size":N,
"offsetLag":0,"isFuture":false}],"error":null,"logDir":"/path"}]}],"version":1}``, with keys and list entries in
the order Kafka's Java HashMaps give them. A broker id of ``--broker-list`` that is not in the cluster is an
error naming it.

DescribeLogDirs goes to each broker through the protocol client (confluent-kafka's AdminClient has no call
for it).
"""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Sequence

from broker.protocol.api import ApiKey

from .command import client_config, protocol_client, tool_main
from .dump_log_decoders import to_json
from .java_format import exception_name, hashmap_order, topic_partition_hash
from .options import CommandError, OptionParser
from .protocol_client import NodeAssignmentTimeout

SUMMARY = "This tool helps to query log directory usage on the specified brokers."


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("bootstrap-server", "REQUIRED: the server(s) to use for bootstrapping",
          "The server(s) to use for bootstrapping")
    p.arg("command-config", "Property file containing configs to be passed to Admin Client.",
          "Admin client property file")
    p.flag("describe", "Describe the specified log directories on the specified brokers.")
    p.arg("topic-list", "The list of topics to be queried in the form \"topic1,topic2,topic3\". All topics will be "
                        "queried if no topic list is specified", "Topic list", default="")
    p.arg("broker-list", "The list of brokers to be queried in the form \"0,1,2\". All brokers in the cluster will "
                         "be queried if no broker list is specified", "Broker list", default="")
    return p


def _error_class(code: int) -> str:
    """The exception class Kafka's admin client makes of a log dir's error (56: an offline log dir)."""
    if code == 56:
        return "org.apache.kafka.common.errors.KafkaStorageException"
    return exception_name(code)


def _split(text: str) -> List[str]:
    return [x for x in text.split(",") if x]


def _int_set_order(ids: Any) -> List[int]:
    """A java.util.HashSet<Integer>'s order (small non-negative ids: ascending by bucket)."""
    return hashmap_order(sorted(set(ids)), hash_fn=lambda i: i)


def _ordered(mapping: Dict[str, Any]) -> Dict[str, Any]:
    """A HashMap<String, Object> as Jackson writes it: keys in the map's iteration order."""
    return {k: mapping[k] for k in hashmap_order(list(mapping))}


def describe(results: Sequence[Any], topics: List[str]) -> List[Dict[str, Any]]:
    """The ``logDirs`` list of one broker's DescribeLogDirs results."""
    out = []
    key = (lambda tp: (tp[0], tp[1].partition_index))
    tp_hash = (lambda k: topic_partition_hash(*k))
    # the admin client's HashMap<String, LogDirDescription>(results) and, per log dir, HashMap<TopicPartition,
    # ReplicaInfo> in answer order; the tool then filters that map into a new HashMap
    for r in hashmap_order(list(results), key=lambda r: r.log_dir, initial_capacity=max(1, len(results))):
        everything = hashmap_order([(t.name, p) for t in r.topics for p in t.partitions], key=key, hash_fn=tp_hash)
        replicas = hashmap_order([x for x in everything if not topics or x[0] in topics], key=key, hash_fn=tp_hash)
        partitions = [_ordered({"partition": f"{name}-{p.partition_index}", "size": p.partition_size,
                                "offsetLag": p.offset_lag, "isFuture": bool(p.is_future_key)})
                      for name, p in replicas]
        error = _error_class(r.error_code) if r.error_code else None
        out.append(_ordered({"logDir": r.log_dir, "error": error, "partitions": partitions}))
    return out


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    parser.check_required(o, "bootstrap-server", "describe")
    topics = _split(o.value("topic-list"))
    try:
        wanted = {int(x) for x in _split(o.value("broker-list"))}
    except ValueError as e:
        raise CommandError(f"For input string: {str(e).rsplit(' ', 1)[-1]}") from None
    cfg = client_config(o)
    with protocol_client(cfg) as pc:
        try:
            cluster = {n.node_id for n in pc.nodes()}
        except NodeAssignmentTimeout as e:
            # Kafka prints the ExecutionException's message, then its stack trace (whose first line repeats it)
            raise CommandError(f"{e}\njava.util.concurrent.ExecutionException: {e}") from None
        missing = wanted - cluster
        if missing:
            raise CommandError("ERROR: The given brokers do not exist from --broker-list: "
                               f"{','.join(map(str, _int_set_order(missing)))}. Current existent brokers: "
                               f"{','.join(map(str, _int_set_order(cluster)))}")
        brokers = _int_set_order(wanted & cluster if wanted else cluster)
        print("Querying brokers for log directories information")
        described: Dict[int, List[Dict[str, Any]]] = {}
        for b in brokers:
            r = pc.send_to(b, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
            if getattr(r, "error_code", 0):
                raise CommandError(f"{exception_name(r.error_code)}")
            described[b] = describe(r.results, topics)
        print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
        doc = _ordered({"version": 1, "brokers": [_ordered({"broker": b, "logDirs": described[b]})
                                                  for b in _int_set_order(described)]})
        print(to_json(doc))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
