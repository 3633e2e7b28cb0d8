"""kafka-broker-api-versions.sh: the API versions every broker of the cluster supports, as Kafka 3.9's
BrokerApiVersionsCommand prints them.

    kafka-broker-api-versions.sh --bootstrap-server localhost:9092

For each broker (from Metadata): ``host:port (id: 0 rack: null) -> (`` then one line per API, ``<TAB>Name(key): min
to max [usable: v]`` (``[usable: v]`` is the highest version both the broker and Kafka 3.9's client know;
``UNSUPPORTED`` for a client API the broker does not advertise), then ``)``. A broker that cannot be asked prints
``-> ERROR: <cause>``. ApiVersions goes through the protocol client (confluent-kafka does not expose a broker's
table).
"""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Sequence, Tuple

from .command import client_config, protocol_client, standard_options, tool_main
from .options import OptionParser
from .protocol_client import NodeAssignmentTimeout, ProtocolClientError

SUMMARY = "This tool helps to retrieve broker version information."

#: Kafka 3.9's ApiKeys: key -> (name, oldest version, latest version, a client API (zkBroker/broker listener))
KAFKA_API_KEYS: Dict[int, Tuple[str, int, int, bool]] = {
    0: ("Produce", 0, 11, True),
    1: ("Fetch", 0, 17, True),
    2: ("ListOffsets", 0, 9, True),
    3: ("Metadata", 0, 12, True),
    4: ("LeaderAndIsr", 0, 7, True),
    5: ("StopReplica", 0, 4, True),
    6: ("UpdateMetadata", 0, 8, True),
    7: ("ControlledShutdown", 0, 3, True),
    8: ("OffsetCommit", 0, 9, True),
    9: ("OffsetFetch", 0, 9, True),
    10: ("FindCoordinator", 0, 6, True),
    11: ("JoinGroup", 0, 9, True),
    12: ("Heartbeat", 0, 4, True),
    13: ("LeaveGroup", 0, 5, True),
    14: ("SyncGroup", 0, 5, True),
    15: ("DescribeGroups", 0, 5, True),
    16: ("ListGroups", 0, 5, True),
    17: ("SaslHandshake", 0, 1, True),
    18: ("ApiVersions", 0, 4, True),
    19: ("CreateTopics", 0, 7, True),
    20: ("DeleteTopics", 0, 6, True),
    21: ("DeleteRecords", 0, 2, True),
    22: ("InitProducerId", 0, 5, True),
    23: ("OffsetForLeaderEpoch", 0, 4, True),
    24: ("AddPartitionsToTxn", 0, 5, True),
    25: ("AddOffsetsToTxn", 0, 4, True),
    26: ("EndTxn", 0, 4, True),
    27: ("WriteTxnMarkers", 0, 1, True),
    28: ("TxnOffsetCommit", 0, 4, True),
    29: ("DescribeAcls", 0, 3, True),
    30: ("CreateAcls", 0, 3, True),
    31: ("DeleteAcls", 0, 3, True),
    32: ("DescribeConfigs", 0, 4, True),
    33: ("AlterConfigs", 0, 2, True),
    34: ("AlterReplicaLogDirs", 0, 2, True),
    35: ("DescribeLogDirs", 0, 4, True),
    36: ("SaslAuthenticate", 0, 2, True),
    37: ("CreatePartitions", 0, 3, True),
    38: ("CreateDelegationToken", 0, 3, True),
    39: ("RenewDelegationToken", 0, 2, True),
    40: ("ExpireDelegationToken", 0, 2, True),
    41: ("DescribeDelegationToken", 0, 3, True),
    42: ("DeleteGroups", 0, 2, True),
    43: ("ElectLeaders", 0, 2, True),
    44: ("IncrementalAlterConfigs", 0, 1, True),
    45: ("AlterPartitionReassignments", 0, 0, True),
    46: ("ListPartitionReassignments", 0, 0, True),
    47: ("OffsetDelete", 0, 0, True),
    48: ("DescribeClientQuotas", 0, 1, True),
    49: ("AlterClientQuotas", 0, 1, True),
    50: ("DescribeUserScramCredentials", 0, 0, True),
    51: ("AlterUserScramCredentials", 0, 0, True),
    52: ("Vote", 0, 1, False),
    53: ("BeginQuorumEpoch", 0, 1, False),
    54: ("EndQuorumEpoch", 0, 1, False),
    55: ("DescribeQuorum", 0, 2, True),
    56: ("AlterPartition", 0, 3, True),
    57: ("UpdateFeatures", 0, 1, True),
    58: ("Envelope", 0, 0, True),
    59: ("FetchSnapshot", 0, 1, False),
    60: ("DescribeCluster", 0, 1, True),
    61: ("DescribeProducers", 0, 0, True),
    62: ("BrokerRegistration", 0, 4, False),
    63: ("BrokerHeartbeat", 0, 1, False),
    64: ("UnregisterBroker", 0, 0, True),
    65: ("DescribeTransactions", 0, 0, True),
    66: ("ListTransactions", 0, 1, True),
    67: ("AllocateProducerIds", 0, 0, True),
    68: ("ConsumerGroupHeartbeat", 0, 0, True),
    69: ("ConsumerGroupDescribe", 0, 0, True),
    70: ("ControllerRegistration", 0, 0, False),
    71: ("GetTelemetrySubscriptions", 0, 0, True),
    72: ("PushTelemetry", 0, 0, True),
    73: ("AssignReplicasToDirs", 0, 0, False),
    74: ("ListClientMetricsResources", 0, 0, True),
    75: ("DescribeTopicPartitions", 0, 0, True),
    76: ("ShareGroupHeartbeat", 0, 0, True),
    77: ("ShareGroupDescribe", 0, 0, True),
    78: ("ShareFetch", 0, 0, True),
    79: ("ShareAcknowledge", 0, 0, True),
    80: ("AddRaftVoter", 0, 0, True),
    81: ("RemoveRaftVoter", 0, 0, True),
    82: ("UpdateRaftVoter", 0, 0, False),
    83: ("InitializeShareGroupState", 0, 0, True),
    84: ("ReadShareGroupState", 0, 0, True),
    85: ("WriteShareGroupState", 0, 0, True),
    86: ("DeleteShareGroupState", 0, 0, True),
    87: ("ReadShareGroupStateSummary", 0, 0, True),
}


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    standard_options(p, "REQUIRED: The server to connect to.",
                     "A property file containing configs to be passed to Admin Client.")
    p.spec("bootstrap-server").described_as = "server(s) to use for bootstrapping"
    return p


def versions_text(versions: Dict[int, Tuple[int, int]]) -> str:
    """Kafka's NodeApiVersions.toString(lineBreaks = true)."""
    lines: Dict[int, str] = {}
    for key, (lo, hi) in versions.items():
        known = KAFKA_API_KEYS.get(key)
        text = (f"{known[0]}({key}): " if known else f"UNKNOWN({key}): ") + (str(lo) if lo == hi else f"{lo} to {hi}")
        if known:
            _, oldest, latest, _ = known
            if latest < lo:
                text += " [unusable: node too new]"
            elif hi < oldest:
                text += " [unusable: node too old]"
            else:
                text += f" [usable: {min(latest, hi)}]"
        lines[key] = text
    for key, (name, _, _, client) in KAFKA_API_KEYS.items():
        if client and key not in lines:
            lines[key] = f"{name}({key}): UNSUPPORTED"
    return "(\n\t" + ",\n\t".join(lines[k] for k in sorted(lines)) + "\n)"


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    parser.check_required(o, "bootstrap-server")
    cfg = client_config(o)
    out: List[str] = []
    with protocol_client(cfg) as pc:
        # Kafka's tool (its LegacyAdminClient) tries each bootstrap server once, logging a warning per failure
        pc.retry_timeout_s, pc.log_label = 0.0, f"LegacyAdminClient clientId={cfg.client_id or 'admin-1'}"
        try:
            nodes = pc.nodes()
        except NodeAssignmentTimeout:
            servers = ", ".join(f"{h}:{p} (id: {-(i + 1)} rack: null)" for i, (h, p) in enumerate(pc.bootstrap))
            print(f'Exception in thread "main" java.lang.RuntimeException: Request METADATA failed on brokers '
                  f"List({servers})", file=sys.stderr)
            return 1
        pc.retry_timeout_s = None
        for node in nodes:
            try:
                out.append(f"{node} -> {versions_text(pc.api_versions(node.node_id))}\n")
            except ProtocolClientError as e:
                out.append(f"{node} -> ERROR: {e}\n")
    sys.stdout.write("".join(out))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
