"""Kafka's error codes: ONE table, from which the exception classes and lookups derive; the ErrorCode enum spells
its members out (so type checkers see every member) and is checked against the table at import.

Codes, names and retriable flags follow Kafka 3.9 (Errors.java; retriable = the Java exception is
a RetriableException). Messages are our own short wording. Code below api/ raises the
KafkaError subclasses; api/ turns them into wire codes exactly once.

Usage::

    raise NotLeaderOrFollowerError(f"{tp} is led by broker 2")
    error_for_code(6) is NotLeaderOrFollowerError
    ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any

# code  NAME  retriable(r/-)  message
_TABLE = """
-1  UNKNOWN_SERVER_ERROR                    -  The server hit an unexpected error.
0   NONE                                    -  No error.
1   OFFSET_OUT_OF_RANGE                     -  The requested offset is outside the range of offsets kept for the partition.
2   CORRUPT_MESSAGE                         r  A record failed its CRC check, is too small or is otherwise corrupt.
3   UNKNOWN_TOPIC_OR_PARTITION              r  This server does not host this topic-partition.
4   INVALID_FETCH_SIZE                      -  The requested fetch size is invalid.
5   LEADER_NOT_AVAILABLE                    r  The partition has no leader right now (an election may be running).
6   NOT_LEADER_OR_FOLLOWER                  r  This broker is neither the leader nor a follower of the partition.
7   REQUEST_TIMED_OUT                       r  The request timed out.
8   BROKER_NOT_AVAILABLE                    -  The broker is not available.
9   REPLICA_NOT_AVAILABLE                   r  The replica is not available for the requested partition.
10  MESSAGE_TOO_LARGE                       -  The request holds a record larger than the server accepts.
11  STALE_CONTROLLER_EPOCH                  -  The controller moved to another broker.
12  OFFSET_METADATA_TOO_LARGE               -  The metadata of the offset commit is too large.
13  NETWORK_EXCEPTION                       r  The server disconnected before a response arrived.
14  COORDINATOR_LOAD_IN_PROGRESS            r  The coordinator is still loading its state.
15  COORDINATOR_NOT_AVAILABLE               r  The coordinator is not available.
16  NOT_COORDINATOR                         r  This is not the right coordinator.
17  INVALID_TOPIC_EXCEPTION                 -  The topic name is invalid or the topic is internal.
18  RECORD_LIST_TOO_LARGE                   -  A record batch is larger than the segment size allows.
19  NOT_ENOUGH_REPLICAS                     r  Too few in-sync replicas to accept the write.
20  NOT_ENOUGH_REPLICAS_AFTER_APPEND        r  The write was appended with fewer in-sync replicas than required.
21  INVALID_REQUIRED_ACKS                   -  The acks value is invalid.
22  ILLEGAL_GENERATION                      -  The group generation id is not the current one.
23  INCONSISTENT_GROUP_PROTOCOL             -  The protocol type or protocols do not match the group's.
24  INVALID_GROUP_ID                        -  The group id is invalid.
25  UNKNOWN_MEMBER_ID                       -  The coordinator does not know this member id.
26  INVALID_SESSION_TIMEOUT                 -  The session timeout is outside the allowed range.
27  REBALANCE_IN_PROGRESS                   -  The group is rebalancing; rejoin it.
28  INVALID_COMMIT_OFFSET_SIZE              -  The committed offset data size is invalid.
29  TOPIC_AUTHORIZATION_FAILED              -  Not authorized for the topic.
30  GROUP_AUTHORIZATION_FAILED              -  Not authorized for the group.
31  CLUSTER_AUTHORIZATION_FAILED            -  Not authorized for the cluster.
32  INVALID_TIMESTAMP                       -  A record timestamp is outside the accepted range.
33  UNSUPPORTED_SASL_MECHANISM              -  The SASL mechanism is not supported.
34  ILLEGAL_SASL_STATE                      -  The request is not valid in the current SASL state.
35  UNSUPPORTED_VERSION                     -  This API version is not supported.
36  TOPIC_ALREADY_EXISTS                    -  A topic with this name already exists.
37  INVALID_PARTITIONS                      -  The number of partitions is invalid.
38  INVALID_REPLICATION_FACTOR              -  The replication factor is invalid.
39  INVALID_REPLICA_ASSIGNMENT              -  The replica assignment is invalid.
40  INVALID_CONFIG                          -  The configuration is invalid.
41  NOT_CONTROLLER                          r  This broker is not the controller.
42  INVALID_REQUEST                         -  The request is invalid or malformed for this broker.
43  UNSUPPORTED_FOR_MESSAGE_FORMAT          -  The message format version does not support this request.
44  POLICY_VIOLATION                        -  The request violates a configured policy.
45  OUT_OF_ORDER_SEQUENCE_NUMBER            -  The producer sequence number is out of order.
46  DUPLICATE_SEQUENCE_NUMBER               -  The producer sequence number is a duplicate.
47  INVALID_PRODUCER_EPOCH                  -  The producer epoch is old: the producer was fenced or its transaction expired.
48  INVALID_TXN_STATE                       -  The transactional operation is invalid in the current state.
49  INVALID_PRODUCER_ID_MAPPING             -  The producer id is not assigned to this transactional id.
50  INVALID_TRANSACTION_TIMEOUT             -  The transaction timeout exceeds max.transaction.timeout.ms.
51  CONCURRENT_TRANSACTIONS                 r  Another operation on this transaction is in progress.
52  TRANSACTION_COORDINATOR_FENCED          -  The transaction coordinator writing markers is no longer current.
53  TRANSACTIONAL_ID_AUTHORIZATION_FAILED   -  Not authorized for the transactional id.
54  SECURITY_DISABLED                       -  Security features are disabled.
55  OPERATION_NOT_ATTEMPTED                 -  The operation was not attempted because others in the batch failed.
56  KAFKA_STORAGE_ERROR                     r  A disk error occurred accessing the log.
57  LOG_DIR_NOT_FOUND                       -  The log directory was not found in the broker configuration.
58  SASL_AUTHENTICATION_FAILED              -  SASL authentication failed.
59  UNKNOWN_PRODUCER_ID                     -  The broker has no state for this producer id.
60  REASSIGNMENT_IN_PROGRESS                -  A partition reassignment is in progress.
61  DELEGATION_TOKEN_AUTH_DISABLED          -  Delegation token authentication is disabled.
62  DELEGATION_TOKEN_NOT_FOUND              -  The delegation token was not found.
63  DELEGATION_TOKEN_OWNER_MISMATCH         -  The principal does not own the delegation token.
64  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED    -  Delegation token requests are not allowed on this channel.
65  DELEGATION_TOKEN_AUTHORIZATION_FAILED   -  Not authorized for the delegation token.
66  DELEGATION_TOKEN_EXPIRED                -  The delegation token has expired.
67  INVALID_PRINCIPAL_TYPE                  -  The principal type is not supported.
68  NON_EMPTY_GROUP                         -  The group is not empty.
69  GROUP_ID_NOT_FOUND                      -  The group id does not exist.
70  FETCH_SESSION_ID_NOT_FOUND              r  The fetch session id was not found.
71  INVALID_FETCH_SESSION_EPOCH             r  The fetch session epoch is invalid.
72  LISTENER_NOT_FOUND                      r  The leader has no endpoint for the listener the request came on.
73  TOPIC_DELETION_DISABLED                 -  Topic deletion is disabled.
74  FENCED_LEADER_EPOCH                     r  The request leader epoch is older than the broker's.
75  UNKNOWN_LEADER_EPOCH                    r  The request leader epoch is newer than the broker's.
76  UNSUPPORTED_COMPRESSION_TYPE            -  The requesting client does not support the compression type.
77  STALE_BROKER_EPOCH                      -  The broker epoch has changed.
78  OFFSET_NOT_AVAILABLE                    r  The leader high watermark has not caught up yet.
79  MEMBER_ID_REQUIRED                      -  The group member must rejoin with the member id it was given.
80  PREFERRED_LEADER_NOT_AVAILABLE          r  The preferred leader is not available.
81  GROUP_MAX_SIZE_REACHED                  -  The group has reached its maximum size.
82  FENCED_INSTANCE_ID                      -  Another member with the same group.instance.id fenced this one.
83  ELIGIBLE_LEADERS_NOT_AVAILABLE          r  No eligible leader is available for the election.
84  ELECTION_NOT_NEEDED                     r  The leader election is not needed.
85  NO_REASSIGNMENT_IN_PROGRESS             -  No partition reassignment is in progress.
86  GROUP_SUBSCRIBED_TO_TOPIC               -  The group is subscribed to the topic, so its offsets cannot be deleted.
87  INVALID_RECORD                          -  A record failed broker-side validation.
88  UNSTABLE_OFFSET_COMMIT                  r  Transactional offset commits are pending for the partition.
89  THROTTLING_QUOTA_EXCEEDED               r  The throttling quota was exceeded.
90  PRODUCER_FENCED                         -  A newer producer with the same transactional id fenced this one.
91  RESOURCE_NOT_FOUND                      -  The resource does not exist.
92  DUPLICATE_RESOURCE                      -  The resource appears more than once in the request.
93  UNACCEPTABLE_CREDENTIAL                 -  The credential does not meet the requirements.
94  INCONSISTENT_VOTER_SET                  -  The voter is not in the voter set of the leader.
95  INVALID_UPDATE_VERSION                  -  The update version is invalid.
96  FEATURE_UPDATE_FAILED                   -  The feature update failed.
97  PRINCIPAL_DESERIALIZATION_FAILURE       -  The forwarded principal could not be deserialized.
98  SNAPSHOT_NOT_FOUND                      -  The snapshot was not found.
99  POSITION_OUT_OF_RANGE                   -  The requested position is outside the snapshot.
100 UNKNOWN_TOPIC_ID                        r  This server does not host this topic id.
101 DUPLICATE_BROKER_REGISTRATION           -  The broker registration duplicates an active one.
102 BROKER_ID_NOT_REGISTERED                -  The broker id is not registered.
103 INCONSISTENT_TOPIC_ID                   r  The topic id in the request differs from the broker's.
104 INCONSISTENT_CLUSTER_ID                 -  The cluster id in the request differs from the broker's.
105 TRANSACTIONAL_ID_NOT_FOUND              -  The transactional id was not found.
106 FETCH_SESSION_TOPIC_ID_ERROR            r  The fetch session saw a topic id change.
107 INELIGIBLE_REPLICA                      -  The new ISR holds at least one ineligible replica.
108 NEW_LEADER_ELECTED                      -  A new leader was elected; the AlterPartition was not committed.
109 OFFSET_MOVED_TO_TIERED_STORAGE          -  The offset has moved to tiered storage.
110 FENCED_MEMBER_EPOCH                     -  The member epoch is fenced by the coordinator.
111 UNRELEASED_INSTANCE_ID                  -  The instance id is still used by another member.
112 UNSUPPORTED_ASSIGNOR                    -  The assignor is not supported by the group.
113 STALE_MEMBER_EPOCH                      -  The member epoch is stale.
114 MISMATCHED_ENDPOINT_TYPE                -  The request was sent to an endpoint of the wrong type.
115 UNSUPPORTED_ENDPOINT_TYPE               -  This endpoint type does not support the request.
116 UNKNOWN_CONTROLLER_ID                   -  The controller id is unknown.
117 UNKNOWN_SUBSCRIPTION_ID                 -  The client telemetry subscription id is unknown.
118 TELEMETRY_TOO_LARGE                     -  The client telemetry payload is too large.
119 INVALID_REGISTRATION                    -  The controller considers the broker registration invalid.
120 TRANSACTION_ABORTABLE                   -  The transaction hit an error; the client can abort it and continue.
121 INVALID_RECORD_STATE                    -  The record state is invalid.
122 SHARE_SESSION_NOT_FOUND                 r  The share session was not found.
123 INVALID_SHARE_SESSION_EPOCH             r  The share session epoch is invalid.
124 FENCED_STATE_EPOCH                      -  The share-group state epoch does not match.
125 INVALID_VOTER_KEY                       -  The voter key does not match the receiving replica's key.
126 DUPLICATE_VOTER                         -  The voter is already in the voter set.
127 VOTER_NOT_FOUND                         -  The voter is not in the voter set.
"""

# Kafka's Java exception names where they differ from NAME -> CamelCase + "Error".
_JAVA_NAMES = {
    "CORRUPT_MESSAGE": "CorruptRecordError",
    "MESSAGE_TOO_LARGE": "RecordTooLargeError",
    "INVALID_TOPIC_EXCEPTION": "InvalidTopicError",
    "RECORD_LIST_TOO_LARGE": "RecordBatchTooLargeError",
    "INVALID_FETCH_SIZE": "InvalidFetchSizeError",
    "TOPIC_ALREADY_EXISTS": "TopicExistsError",
    "INVALID_CONFIG": "InvalidConfigurationError",
    "OUT_OF_ORDER_SEQUENCE_NUMBER": "OutOfOrderSequenceError",
    "INVALID_PRODUCER_ID_MAPPING": "InvalidPidMappingError",
    "INVALID_TRANSACTION_TIMEOUT": "InvalidTxnTimeoutError",
    "NETWORK_EXCEPTION": "NetworkError",
}
# Extra names for the same classes (kafka-python's and the brief's spellings).
_ALIASES = {
    "CORRUPT_MESSAGE": ["CorruptMessageError"],
    "MESSAGE_TOO_LARGE": ["MessageTooLargeError", "MessageSizeTooLargeError"],
    "TOPIC_ALREADY_EXISTS": ["TopicAlreadyExistsError"],
    "INVALID_CONFIG": ["InvalidConfigError"],
    "OUT_OF_ORDER_SEQUENCE_NUMBER": ["OutOfOrderSequenceNumberError"],
    "RECORD_LIST_TOO_LARGE": ["RecordListTooLargeError"],
}


def _parse_table(text: str) -> list[tuple[int, str, bool, str]]:
    rows = []
    for line in text.strip().splitlines():
        code, name, flag, message = line.split(None, 3)
        rows.append((int(code), name, flag == "r", message))
    return rows


ERROR_TABLE: list[tuple[int, str, bool, str]] = _parse_table(_TABLE)
"""(code, NAME, retriable, message) for every Kafka error code, in code order."""


class ErrorCode(IntEnum):
    """Kafka error codes by their Errors.java names (the members mirror ERROR_TABLE; checked at import)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


if [(m.name, int(m)) for m in ErrorCode] != [(name, code) for code, name, _, _ in ERROR_TABLE]:
    raise ImportError("ErrorCode's members differ from ERROR_TABLE")


class KafkaError(Exception):
    """An error that maps to one Kafka error code; ``str()`` gives the detail or the default message."""

    code: int = ErrorCode.UNKNOWN_SERVER_ERROR
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    message: str = ""

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail or self.message)
        self.detail = detail

    @property
    def error_code(self) -> ErrorCode:
        return ErrorCode(self.code)


def _class_name(name: str) -> str:
    if name in _JAVA_NAMES:
        return _JAVA_NAMES[name]
    camel = "".join(part.capitalize() for part in name.split("_"))
    return camel if camel.endswith("Error") else camel + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {}
_NAMESPACE: dict[str, Any] = globals()
for _code, _name, _retriable, _message in ERROR_TABLE:
    if _code == 0:
        continue
    _cls_name = _class_name(_name)
    _cls = type(_cls_name, (KafkaError,), {
        "code": _code, "name": _name, "retriable": _retriable, "message": _message,
        "__doc__": _message, "__module__": __name__,
    })
    _BY_CODE[_code] = _cls
    _NAMESPACE[_cls_name] = _cls
    for _alias in _ALIASES.get(_name, ()):
        _NAMESPACE[_alias] = _cls

UnknownServerError: type[KafkaError] = _BY_CODE[-1]


def error_for_code(code: int) -> type[KafkaError]:
    """The exception class for a wire code (UnknownServerError for codes we do not know; not for 0)."""
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    return _BY_CODE.get(code, UnknownServerError)


def is_retriable(code: int) -> bool:
    """Whether a client may retry after this code."""
    return code != 0 and error_for_code(code).retriable


def __getattr__(name: str) -> type[KafkaError]:  # for type checkers: classes are generated above
    raise AttributeError(name)


#: Kafka's own Errors.INVALID_REQUEST message, which Kafka 3.9.1 sends where it has no more specific one
#: (FindCoordinator's unknown key type, DescribeConfigs' unknown resource type)
KAFKA_INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library "
                                 "or the message was sent to an incompatible broker. See the broker logs for more "
                                 "details.")
