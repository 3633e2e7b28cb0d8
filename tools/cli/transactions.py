"""kafka-transactions.sh: look at and repair the transactional state of producers (KIP-664), as Kafka 3.9's
TransactionsCommand.

    kafka-transactions.sh --bootstrap-server localhost:9092 list [--duration-filter MS]
    kafka-transactions.sh --bootstrap-server localhost:9092 describe --transactional-id ID
    kafka-transactions.sh --bootstrap-server localhost:9092 describe-producers --topic T --partition P [--broker-id B]
    kafka-transactions.sh --bootstrap-server localhost:9092 find-hanging (--broker-id B | --topic T [--partition P])
                          [--max-transaction-timeout MINUTES]
    kafka-transactions.sh --bootstrap-server localhost:9092 abort --topic T --partition P
                          (--start-offset O | --producer-id I --producer-epoch E --coordinator-epoch C)

Tables are Kafka's: each column as wide as its widest cell, every cell followed by a tab. Kafka 3.9 has no
``force-terminate`` command (it came in 4.0), so it is an invalid choice here as there.

Kafka's tool parses with argparse4j: global options come before the command, help goes to stdout and exits 1, a bad
command line prints the (sub)command's usage and ``kafka-transactions.sh: error: <message>`` on stderr, exit 1
(argparse4j justifies long messages with extra spaces; this tool prints them plain). Spoken with the raw protocol
client: ListTransactions to every broker, FindCoordinator + DescribeTransactions, DescribeProducers to a partition's
leader (or --broker-id), WriteTxnMarkers to the leader for ``abort``.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from broker.protocol.api import ApiKey
from tools import invoked_as

from .admin_errors import error_line
from .command import protocol_client
from .client_config import build_client_config, load_properties_file
from .java_format import hashmap_order, topic_partition_hash
from .options import CommandError, version_line
from .protocol_client import NodeAssignmentTimeout, ProtocolClientError

PROG = "kafka-transactions.sh"
_MAIN_USAGE = ("usage: kafka-transactions.sh [-h] [-v] [--command-config FILE]\n"
               "                             --bootstrap-server host:port COMMAND ...\n")
_MAIN_HELP = _MAIN_USAGE + """
This tool is used to analyze  the  transactional  state of producers in the
cluster. It can be used to detect and recover from hanging transactions.

optional arguments:
  -h, --help             show this help message and exit
  -v, --version          show the version  of  this  Kafka distribution and
                         exit
  --command-config FILE  property file containing configs  to  be passed to
                         admin client
  --bootstrap-server host:port
                         hostname and port for  the  broker  to connect to,
                         in  the   form   `host:port`    (multiple   comma-
                         separated entries can be given)

commands:
  COMMAND
    list                 list transactions
    describe             describe the state of an active transactional-id
    describe-producers   describe the  states  of  active  producers  for a
                         topic partition
    abort                abort    a    hanging     transaction    (requires
                         administrative privileges)
    find-hanging         find hanging transactions
"""
_USAGES = {
    "list": "usage: kafka-transactions.sh --bootstrap-server host:port list [-h]\n"
            "                             [--duration-filter DURATION_FILTER]\n",
    "describe": "usage: kafka-transactions.sh --bootstrap-server host:port describe [-h]\n"
                "                             --transactional-id TRANSACTIONAL_ID\n",
    "describe-producers": "usage: kafka-transactions.sh --bootstrap-server host:port\n"
                          "                             describe-producers [-h]\n"
                          "                             [--broker-id BROKER_ID] --topic TOPIC\n"
                          "                             --partition PARTITION\n",
    "abort": "usage: kafka-transactions.sh --bootstrap-server host:port abort [-h]\n"
             "                             --topic TOPIC --partition PARTITION\n"
             "                             [--start-offset START_OFFSET]\n"
             "                             [--producer-id PRODUCER_ID]\n"
             "                             [--producer-epoch PRODUCER_EPOCH]\n"
             "                             [--coordinator-epoch COORDINATOR_EPOCH]\n",
    "find-hanging": "usage: kafka-transactions.sh --bootstrap-server host:port find-hanging [-h]\n"
                    "                             [--broker-id BROKER_ID]\n"
                    "                             [--max-transaction-timeout MAX_TRANSACTION_TIMEOUT]\n"
                    "                             [--topic TOPIC] [--partition PARTITION]\n",
}
_HELPS = {
    "list": """
optional arguments:
  -h, --help             show this help message and exit
  --duration-filter DURATION_FILTER
                         Duration (in millis) to  filter  by:  if  < 0, all
                         transactions will  be  returned;  otherwise,  only
                         transactions running  longer  than  this  duration
                         will be returned
""",
    "describe": """
Describe the state of an active transactional-id.

optional arguments:
  -h, --help             show this help message and exit
  --transactional-id TRANSACTIONAL_ID
                         transactional id
""",
    "describe-producers": """
optional arguments:
  -h, --help             show this help message and exit
  --broker-id BROKER_ID  optional broker id to  describe the producer state
                         on a specific replica
  --topic TOPIC          topic name
  --partition PARTITION  partition number
""",
    "abort": """
optional arguments:
  -h, --help             show this help message and exit
  --topic TOPIC          topic name
  --partition PARTITION  partition number

Brokers on versions 3.0 and above:
  For newer brokers,  only  the  start  offset  of  the  transaction  to be
  aborted is required

  --start-offset START_OFFSET
                         start offset of the transaction to abort

Brokers on versions older than 3.0:
  For older brokers, you must provide all of these arguments

  --producer-id PRODUCER_ID
                         producer id
  --producer-epoch PRODUCER_EPOCH
                         producer epoch
  --coordinator-epoch COORDINATOR_EPOCH
                         coordinator epoch
""",
    "find-hanging": """
optional arguments:
  -h, --help             show this help message and exit
  --broker-id BROKER_ID  broker id to search for hanging transactions
  --max-transaction-timeout MAX_TRANSACTION_TIMEOUT
                         maximum transaction timeout  in  minutes  to limit
                         the scope of the search (15 minutes by default)
  --topic TOPIC          topic name to  limit  search  to  (required  if --
                         partition is specified)
  --partition PARTITION  partition number
""",
}
#: each command's options: name -> (Java type, required)
_OPTIONS: Dict[str, Dict[str, Tuple[str, bool]]] = {
    "list": {"duration-filter": ("Long", False)},
    "describe": {"transactional-id": ("String", True)},
    "describe-producers": {"broker-id": ("Integer", False), "topic": ("String", True),
                           "partition": ("Integer", True)},
    "abort": {"topic": ("String", True), "partition": ("Integer", True), "start-offset": ("Long", False),
              "producer-id": ("Long", False), "producer-epoch": ("Short", False),
              "coordinator-epoch": ("Integer", False)},
    "find-hanging": {"broker-id": ("Integer", False), "max-transaction-timeout": ("Integer", False),
                     "topic": ("String", False), "partition": ("Integer", False)},
}
_RANGES = {"Integer": 2 ** 31, "Long": 2 ** 63, "Short": 2 ** 15}


class Exit(Exception):
    """Leave with ``code`` after printing ``text`` on ``stream``."""

    def __init__(self, code: int, text: str = "", stream: str = "stderr") -> None:
        super().__init__(text)
        self.code, self.text, self.stream = code, text, stream


def _error(usage: str, message: str) -> Exit:
    return Exit(1, f"{usage}{PROG}: error: {message}\n")


@dataclass
class Args:
    command: str
    bootstrap: str
    command_config: Optional[str]
    values: Dict[str, Any]

    def get(self, name: str) -> Any:
        return self.values.get(name)


def _convert(usage: str, name: str, kind: str, raw: str) -> Any:
    if kind == "String":
        return raw
    try:
        v = int(raw)
        if not -_RANGES[kind] <= v < _RANGES[kind]:
            raise ValueError
        return v
    except ValueError:
        raise _error(usage, f"argument --{name}: could not convert '{raw}' to {kind} (For input string: "
                            f"\"{raw}\")") from None


def parse(argv: Sequence[str]) -> Args:
    """argparse4j's rules for this tool: global options, then the command and its options."""
    args = list(argv)
    i = 0
    bootstrap: Optional[str] = None
    config: Optional[str] = None
    while i < len(args):
        tok = args[i]
        name, eq, inline = tok.partition("=")
        if tok in ("-h", "--help"):
            raise Exit(1, _MAIN_HELP, "stdout")
        if tok in ("-v", "--version"):
            raise Exit(0, version_line() + "\n", "stdout")
        if name in ("--bootstrap-server", "--command-config"):
            if eq:
                value = inline
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                value = args[i + 1]
                i += 1
            else:
                raise _error(_MAIN_USAGE, f"argument {name}: expected one argument")
            if name == "--bootstrap-server":
                bootstrap = value
            else:
                config = value
            i += 1
            continue
        if tok.startswith("-"):
            raise _error(_MAIN_USAGE, f"unrecognized arguments: '{tok}'")
        break
    if i >= len(args):
        raise _error(_MAIN_USAGE, "too few arguments")
    command = args[i]
    if command not in _OPTIONS:
        raise _error(_MAIN_USAGE, f"invalid choice: '{command}' (choose from 'list', 'describe', "
                                  "'describe-producers', 'abort', 'find-hanging')")
    usage = _USAGES[command]
    spec = _OPTIONS[command]
    values: Dict[str, Any] = {}
    i += 1
    while i < len(args):
        tok = args[i]
        if tok in ("-h", "--help"):
            raise Exit(1, usage + _HELPS[command], "stdout")
        name, eq, inline = tok.partition("=")
        key = name[2:] if name.startswith("--") else None
        if key not in spec:
            raise _error(usage, f"unrecognized arguments: '{tok}'")
        if eq:
            raw = inline
        elif i + 1 < len(args) and not (args[i + 1].startswith("-") and not args[i + 1][1:].isdigit()):
            raw = args[i + 1]
            i += 1
        else:
            raise _error(usage, f"argument --{key}: expected one argument")
        values[key] = _convert(usage, key, spec[key][0], raw)
        i += 1
    for key, (_, required) in spec.items():
        if required and key not in values:
            raise _error(usage, f"argument --{key} is required")
    if bootstrap is None:
        raise _error(_MAIN_USAGE, "argument --bootstrap-server is required")
    if command == "find-hanging":
        values.setdefault("max-transaction-timeout", 15)
    return Args(command, bootstrap, config, values)


# ------------------------------------------------------------------------------------------------ output
def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """prettyPrintTable: every column padded to its widest cell, each cell followed by a tab."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    for row in [list(headers)] + [list(r) for r in rows]:
        print("".join(c.ljust(w) + "\t" for c, w in zip(row, widths)))


def fail(message: str, cause: Optional[str] = None) -> Exit:
    """printErrorAndExit: the message (with the cause's message) on stderr, exit 1."""
    if cause is not None:
        message = f"{message}: {cause}. Enable debug logging for additional detail."
    return Exit(1, message + "\n")


def _message(code: int, message: Optional[str] = None) -> str:
    """Throwable.getMessage of the exception Kafka's admin client raises for ``code``."""
    return error_line(code, message).split(": ", 1)[1]


# ------------------------------------------------------------------------------------------------ requests
@dataclass
class Producer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int


def partition_leaders(client: Any, topics: Sequence[str]) -> Dict[Tuple[str, int], Tuple[int, List[int]]]:
    """(topic, partition) -> (leader, replicas) from Metadata; an unknown topic raises with Kafka's message."""
    r = client.refresh_metadata(list(topics))
    out = {}
    for t in r.topics:
        if t.error_code:
            raise ProducerLookupError(t.error_code)
        for p in t.partitions:
            out[(t.name, p.partition_index)] = (p.leader_id, list(p.replica_nodes))
    return out


class ProducerLookupError(Exception):
    def __init__(self, code: int, message: Optional[str] = None) -> None:
        super().__init__(_message(code, message))
        self.code = code


def describe_producers(client: Any, partitions: Sequence[Tuple[str, int]],
                       broker_id: Optional[int]) -> Dict[Tuple[str, int], List[Producer]]:
    """DescribeProducers to ``broker_id``, else to each partition's leader."""
    by_broker: Dict[int, List[Tuple[str, int]]] = {}
    if broker_id is not None:
        by_broker[broker_id] = list(partitions)
    else:
        leaders = partition_leaders(client, sorted({t for t, _ in partitions}))
        for tp in partitions:
            if tp not in leaders:
                raise ProducerLookupError(3)
            leader = leaders[tp][0]
            if leader < 0:
                raise ProducerLookupError(5)
            by_broker.setdefault(leader, []).append(tp)
    out: Dict[Tuple[str, int], List[Producer]] = {}
    for node, tps in by_broker.items():
        topics: Dict[str, List[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        r = client.send_to(node, ApiKey.DESCRIBE_PRODUCERS,
                           {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
        for t in r.topics:
            for p in t.partitions:
                if p.error_code:
                    raise ProducerLookupError(p.error_code, p.error_message)
                out[(t.name, p.partition_index)] = [
                    Producer(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                             a.coordinator_epoch, a.current_txn_start_offset) for a in p.active_producers]
    return out


def list_transactions(client: Any, producer_ids: Sequence[int] = (),
                      duration_filter: Optional[int] = None) -> List[Tuple[int, Any]]:
    """ListTransactions to every broker: (broker id, listing) in broker id order."""
    out = []
    for node in client.nodes(call="listTransactions(api=METADATA)"):
        body = {"state_filters": [], "producer_id_filters": list(producer_ids)}
        if duration_filter is not None:
            if client.version_for(ApiKey.LIST_TRANSACTIONS, node.node_id) < 1:
                raise ProducerLookupError(35, "Broker does not support filtering transactions by duration")
            body["duration_filter"] = duration_filter
        r = client.send_to(node.node_id, ApiKey.LIST_TRANSACTIONS, body)
        if r.error_code:
            raise ProducerLookupError(r.error_code)
        out += [(node.node_id, s) for s in r.transaction_states]
    return out


def describe_transaction(client: Any, txn_id: str) -> Tuple[int, Any]:
    """(coordinator id, DescribeTransactions state) of one transactional id."""
    try:
        node = client.find_coordinator(txn_id, key_type=1)
    except ProtocolClientError as e:
        raise ProducerLookupError(15, str(e)) from None
    deadline = time.monotonic() + client.timeout_s
    while True:
        r = client.send_to(node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]})
        state = r.transaction_states[0]
        if state.error_code in (14, 15, 16) and time.monotonic() < deadline:  # loading, not available, moved
            time.sleep(0.2)
            node = client.find_coordinator(txn_id, key_type=1)
            continue
        if state.error_code == 105:  # the admin client's own words for it
            raise ProducerLookupError(105, f"DescribeTransactions request for transactionalId `{txn_id}` failed "
                                           "because the ID could not be found")
        if state.error_code:
            raise ProducerLookupError(state.error_code)
        return node, state


def _state_name(text: str) -> str:
    known = ("Ongoing", "PrepareAbort", "PrepareCommit", "CompleteAbort", "CompleteCommit", "Empty",
             "PrepareEpochFence")
    return text if text in known else "Unknown"


# ------------------------------------------------------------------------------------------------ commands
def cmd_list(client: Any, a: Args) -> None:
    try:
        listings = list_transactions(client, duration_filter=a.get("duration-filter"))
    except ProducerLookupError as e:
        raise fail("Failed to list transactions", str(e)) from None
    except NodeAssignmentTimeout as e:  # no broker reached: Kafka's cause message
        raise fail("Failed to list transactions", e.message) from None
    rows = [[s.transactional_id, str(node), str(s.producer_id), _state_name(s.transaction_state)]
            for node, s in listings]
    print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)


def cmd_describe(client: Any, a: Args) -> None:
    txn_id = a.get("transactional-id")
    try:
        node, s = describe_transaction(client, txn_id)
    except ProducerLookupError as e:
        raise fail(f"Failed to describe transaction state of transactional-id `{txn_id}`", str(e)) from None
    start = s.transaction_start_time_ms
    tps = [(t.topic, p) for t in s.topics for p in t.partitions]
    tps = hashmap_order(tps, hash_fn=lambda tp: topic_partition_hash(*tp))
    row = [str(node), txn_id, str(s.producer_id), str(s.producer_epoch), _state_name(s.transaction_state),
           str(s.transaction_timeout_ms), str(start) if start >= 0 else "None",
           str(int(time.time() * 1000) - start) if start >= 0 else "None", ",".join(f"{t}-{p}" for t, p in tps)]
    print_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                 "TopicPartitions"], [row])


def cmd_describe_producers(client: Any, a: Args) -> None:
    tp = (a.get("topic"), a.get("partition"))
    broker_id = a.get("broker-id")
    try:
        producers = describe_producers(client, [tp], broker_id)[tp]
    except ProducerLookupError as e:
        where = f"broker {broker_id}" if broker_id is not None else "leader"
        raise fail(f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}", str(e)) from None
    rows = [[str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(p.last_timestamp), str(p.txn_start_offset) if p.txn_start_offset >= 0 else "None"]
            for p in producers]
    print_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                 "CurrentTransactionStartOffset"], rows)


def cmd_abort(client: Any, a: Args) -> None:
    topic, partition = a.get("topic"), a.get("partition")
    start, pid = a.get("start-offset"), a.get("producer-id")
    if start is None and pid is None:
        raise fail("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
                   "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if start is None:
        epoch, coordinator_epoch = a.get("producer-epoch"), a.get("coordinator-epoch")
        if epoch is None:
            raise fail("Missing required argument --producer-epoch")
        if coordinator_epoch is None:
            raise fail("Missing required argument --coordinator-epoch")
        coordinator_epoch = max(coordinator_epoch, 0)
    else:
        try:
            producers = describe_producers(client, [(topic, partition)], None)[(topic, partition)]
        except ProducerLookupError as e:
            raise fail(f"Failed to validate producer state for partition {topic}-{partition}", str(e)) from None
        found = [p for p in producers if p.txn_start_offset >= 0 and p.txn_start_offset == start]
        if not found:
            raise fail(f"Could not find any open transactions starting at offset {start} on partition "
                       f"{topic}-{partition}")
        pid, epoch = found[0].producer_id, found[0].producer_epoch
        # (short) producerEpoch; coordinatorEpoch().orElse(0): an unknown (-1) epoch is empty
        epoch = ((epoch + 2 ** 15) % 2 ** 16) - 2 ** 15
        coordinator_epoch = found[0].coordinator_epoch if found[0].coordinator_epoch >= 0 else 0
    spec = (f"AbortTransactionSpec(topicPartition={topic}-{partition}, producerId={pid}, producerEpoch={epoch}, "
            f"coordinatorEpoch={coordinator_epoch})")
    try:
        leaders = partition_leaders(client, [topic])
        leader = leaders.get((topic, partition), (-1, []))[0]
        if leader < 0:
            raise ProducerLookupError(3 if (topic, partition) not in leaders else 5)
        r = client.send_to(leader, ApiKey.WRITE_TXN_MARKERS, {"markers": [{
            "producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
            "topics": [{"name": topic, "partition_indexes": [partition]}], "coordinator_epoch": coordinator_epoch}]})
        for m in r.markers:
            for t in m.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise ProducerLookupError(p.error_code)
    except ProducerLookupError as e:
        raise fail(f"Failed to abort transaction {spec}", str(e)) from None


def cmd_find_hanging(client: Any, a: Args) -> None:
    broker_id, topic, partition = a.get("broker-id"), a.get("topic"), a.get("partition")
    if topic is None and broker_id is None:
        raise fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the "
                   "search")
    if partition is not None and topic is None:
        raise fail("The --partition argument requires --topic to be provided")
    max_timeout_ms = a.get("max-transaction-timeout") * 60_000
    if topic is not None and partition is not None:
        partitions = [(topic, partition)]
    else:
        if topic is not None:
            topics = [topic]
        else:
            try:
                md = client.refresh_metadata(None)
            except ProtocolClientError as e:
                raise fail("Failed to list topics", str(e)) from None
            topics = [t.name for t in md.topics if not t.is_internal]
        try:
            layout = partition_leaders(client, topics)
        except ProducerLookupError as e:
            raise fail(f"Failed to describe {len(topics)} topics", str(e)) from None
        partitions = [tp for tp, (_, replicas) in layout.items() if broker_id is None or broker_id in replicas]
    candidates: List[Tuple[Tuple[str, int], Producer]] = []
    now = int(time.time() * 1000)
    for i in range(0, len(partitions), 500):
        batch = partitions[i:i + 500]
        try:
            states = describe_producers(client, batch, broker_id)
        except ProducerLookupError as e:
            where = f"Optional[{broker_id}]" if broker_id is not None else "Optional.empty"
            raise fail(f"Failed to describe producers for {len(batch)} partitions on broker {where}",
                       str(e)) from None
        for tp, producers in states.items():
            for p in producers:
                if p.txn_start_offset >= 0 and now - p.last_timestamp > max_timeout_ms:
                    candidates.append((tp, p))
    hanging: List[Tuple[Tuple[str, int], Producer]] = []
    if candidates:
        by_pid: Dict[int, List[Tuple[Tuple[str, int], Producer]]] = {}
        for tp, p in candidates:
            by_pid.setdefault(p.producer_id, []).append((tp, p))
        try:
            listings = list_transactions(client, producer_ids=list(by_pid))
        except ProducerLookupError as e:
            raise fail(f"Failed to list transactions for {len(by_pid)} producers", str(e)) from None
        txn_ids = {s.producer_id: s.transactional_id for _, s in listings if s.producer_id in by_pid}
        descriptions: Dict[str, Any] = {}
        for txn_id in set(txn_ids.values()):
            try:
                descriptions[txn_id] = describe_transaction(client, txn_id)[1]
            except ProducerLookupError as e:
                if e.code != 105:
                    raise fail(f"Failed to describe {len(set(txn_ids.values()))} transactions", str(e)) from None
                descriptions[txn_id] = None
        for pid in hashmap_order(list(by_pid), hash_fn=lambda v: (v ^ (v >> 32)) & 0xFFFFFFFF):
            txn_id = txn_ids.get(pid)
            desc = descriptions.get(txn_id) if txn_id is not None else None
            if desc is None:
                hanging += by_pid[pid]
                continue
            in_txn = {(t.topic, p) for t in desc.topics for p in t.partitions}
            hanging += [(tp, p) for tp, p in by_pid[pid] if tp not in in_txn]
    now = int(time.time() * 1000)
    rows = [[t, str(p_), str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
             str(p.txn_start_offset), str(p.last_timestamp), str((now - p.last_timestamp) // 60_000)]
            for (t, p_), p in hanging]
    print_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                 "LastTimestamp", "Duration(min)"], rows)


_COMMANDS = {"list": cmd_list, "describe": cmd_describe, "describe-producers": cmd_describe_producers,
             "abort": cmd_abort, "find-hanging": cmd_find_hanging}


def _run(argv: Sequence[str]) -> int:
    a = parse(argv)
    props: Dict[str, str] = load_properties_file(a.command_config) if a.command_config else {}
    cfg = build_client_config(props, "admin", a.bootstrap)
    with protocol_client(cfg) as client:
        _COMMANDS[a.command](client, a)
    return 0


def _as_invoked(text: str) -> str:
    """Kafka's usage and error text names kafka-transactions.sh; run as the console script, it names that."""
    prog = invoked_as("tools.cli.transactions")
    if prog == PROG:
        return text
    lines, indent = [], " " * len(f"usage: {PROG} ")
    for line in text.split("\n"):
        if line.startswith(f"usage: {PROG} "):
            line, indent = line.replace(PROG, prog, 1), " " * len(f"usage: {PROG} ")
        elif indent and line.startswith(indent) and not line[len(indent):].startswith(" "):
            line = " " * len(f"usage: {prog} ") + line[len(indent):]  # a usage line's continuation, realigned
        else:
            indent = ""
            line = line.replace(f"{PROG}: error:", f"{prog}: error:")
        lines.append(line)
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except Exit as e:
        sys.stdout.flush()
        (sys.stdout if e.stream == "stdout" else sys.stderr).write(_as_invoked(e.text))
        return e.code
    except CommandError as e:
        print(str(e), file=sys.stderr)
        return e.exit_code
    except ProtocolClientError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
