"""How kafka-dump-log prints a record's key and payload: Kafka 3.9's DumpLogSegments message parsers.

* ``StringDecoder`` (the default), ``IntegerDecoder``, ``LongDecoder``: the bytes as UTF-8 text or a big-endian
  number; the deprecated ``kafka.serializer.*`` names print Kafka's deprecation line and map to those. Other
  decoder classes (``DefaultDecoder`` prints a Java array identity, custom classes need a JVM) are refused.
* ``--offsets-decoder``: ``__consumer_offsets`` keys and values as Kafka's generated JSON converters write them
  (``{"type":"<key version>","data":{...}}`` / ``{"version":"<v>","data":{...}}``, tombstones ``<DELETE>``), the
  consumer-protocol subscription and assignment of GroupMetadata members decoded in place.
* ``--transaction-log-decoder``: ``transaction_metadata::transactionalId=<id>`` and Kafka's
  TransactionMetadata summary, partitions in the order Scala's HashSet iterates them.

A parser returns ``(key, payload)``, each None when not printed.
"""
from __future__ import annotations

import base64
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from broker.coordinator.transaction.records import decode_key as decode_txn_key
from broker.coordinator.transaction.records import decode_value as decode_txn_value
from broker.protocol.api import data_codec
from broker.protocol.schema import load_messages

from .java_format import topic_partition_hash
from .options import CommandError

Parsed = Tuple[Optional[str], Optional[str]]
Parser = Callable[[Any], Parsed]

STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"
_DECODERS: Dict[str, Callable[[bytes], str]] = {
    STRING_DECODER: lambda b: b.decode("utf-8", "replace"),
    "org.apache.kafka.tools.api.IntegerDecoder": lambda b: str(struct.unpack_from(">i", b)[0]),
    "org.apache.kafka.tools.api.LongDecoder": lambda b: str(struct.unpack_from(">q", b)[0]),
}
_DEPRECATED = {f"kafka.serializer.{n}Decoder": f"org.apache.kafka.tools.api.{n}Decoder"
               for n in ("String", "Long", "Integer", "Default")}


def java_crash(exception: str) -> CommandError:
    """What Kafka's tool prints when it dies of an uncaught exception (its first line; the frames are left out)."""
    return CommandError(f'Exception in thread "main" {exception}')


def decoder(class_name: str) -> Callable[[bytes], str]:
    """The decoder of a ``--key-decoder-class``/``--value-decoder-class`` name (printing Kafka's deprecation
    line for the old names, as Kafka does each time it builds the parser)."""
    if class_name in _DEPRECATED:
        new = _DEPRECATED[class_name]
        print(f"{class_name} is deprecated. Please use {new} instead")
        class_name = new
    if class_name in _DECODERS:
        return _DECODERS[class_name]
    raise CommandError(f"decoder class {class_name} is not supported by this broker's tools: only Kafka's "
                       "StringDecoder, IntegerDecoder and LongDecoder can run without a JVM (DefaultDecoder prints a "
                       "Java array identity)")


def decoder_parser(key_decoder: Callable[[bytes], str], value_decoder: Callable[[bytes], str]) -> Parser:
    def parse(record: Any) -> Parsed:
        key = None if record.key is None else key_decoder(bytes(record.key))
        value = None if record.value is None else value_decoder(bytes(record.value))
        return key, value
    return parse


# ------------------------------------------------------------------------------------------------ JSON (Jackson)
def json_string(text: str) -> str:
    """A JSON string as Jackson writes it: only ``"``, ``\\`` and control characters escaped."""
    out = ['"']
    for ch in text:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            out.append({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(o, f"\\u{o:04X}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def to_json(value: Any) -> str:
    """Compact JSON of dicts (insertion order), lists, str, int, bool, None and pre-rendered ``Raw``."""
    if isinstance(value, Raw):
        return value.text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_string(k)}:{to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    raise TypeError(type(value))


class Raw:
    def __init__(self, text: str) -> None:
        self.text = text


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def message_json(fields: Sequence[Any], message: Any, version: int) -> Dict[str, Any]:
    """A decoded message as Kafka's generated ``<Message>JsonConverter.write``: fields of ``version`` in schema
    order, camelCase names, bytes as base64, tagged fields only when not their default."""
    out: Dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        value = getattr(message, f.name, None)
        if f.tag is not None and version in f.tagged_versions and f.has_default and value == f.default:
            continue
        out[_camel(f.name)] = _field_json(f, value, version)
    return out


def _field_json(f: Any, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.is_array:
        if f.is_struct:
            return [message_json(f.fields, v, version) for v in value]
        return [_primitive_json(f.element_type, v) for v in value]
    if f.is_struct:
        return message_json(f.fields, value, version)
    return _primitive_json(f.type, value)


def _primitive_json(type_name: str, value: Any) -> Any:
    if type_name in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if type_name == "float64":
        return Raw(repr(float(value)))
    return value


# ------------------------------------------------------------------------------------------------ __consumer_offsets
_I16 = struct.Struct(">h")
_OFFSETS_KEYS = {0: "OffsetCommitKey", 1: "OffsetCommitKey", 2: "GroupMetadataKey"}


class _Reader:
    """The non-flexible consumer-protocol encoding (ConsumerProtocolSubscription/Assignment v0-3)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str) -> Any:
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def i16(self) -> int:
        return int(self._take(">h"))

    def i32(self) -> int:
        return int(self._take(">i"))

    def string(self, nullable: bool = False) -> Optional[str]:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise ValueError("non-nullable field was serialized as null")
        if self.pos + n > len(self.data):
            raise ValueError("string past the end")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def bytes_(self) -> Optional[str]:
        n = self.i32()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise ValueError("bytes past the end")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return base64.b64encode(b).decode("ascii")

    def array(self, item: Callable[[], Any]) -> List[Any]:
        n = self.i32()
        if n < 0:
            raise ValueError("non-nullable array was serialized as null")
        return [item() for _ in range(n)]

    def topic_partitions(self) -> List[Dict[str, Any]]:
        return self.array(lambda: {"topic": self.string(), "partitions": self.array(self.i32)})


def consumer_subscription_json(data: bytes) -> Dict[str, Any]:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"unsupported ConsumerProtocolSubscription version {version}")
    out: Dict[str, Any] = {"topics": r.array(r.string), "userData": r.bytes_()}
    if version >= 1:
        out["ownedPartitions"] = r.topic_partitions()
    if version >= 2:
        out["generationId"] = r.i32()
    if version >= 3:
        out["rackId"] = r.string(nullable=True)
    return out


def consumer_assignment_json(data: bytes) -> Dict[str, Any]:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"unsupported ConsumerProtocolAssignment version {version}")
    return {"assignedPartitions": r.topic_partitions(), "userData": r.bytes_()}


def _group_metadata_json(message: Any, version: int) -> Dict[str, Any]:
    fields = load_messages()["GroupMetadataValue"].fields
    json = message_json(fields, message, version)
    if json.get("protocolType") == "consumer":
        for member, raw in zip(json.get("members") or [], message.members or []):
            for name, decode in (("subscription", consumer_subscription_json),
                                 ("assignment", consumer_assignment_json)):
                try:
                    member[name] = decode(bytes(getattr(raw, name)))
                except (ValueError, struct.error, UnicodeDecodeError):
                    pass  # Kafka keeps the original bytes when they do not parse
    return json


def offsets_parser(record: Any) -> Parsed:
    """Kafka's OffsetsMessageParser."""
    if record.key is None:
        raise java_crash(f"java.lang.RuntimeException: Failed to decode message at offset {record.offset} using "
                         "offset topic decoder (message had a missing key)")
    key = bytes(record.key)
    if len(key) < 2:
        return f"Error at offset {record.offset}, skipping. Could not read version from key's buffer.", None
    try:
        key_version = _I16.unpack_from(key, 0)[0]
        if key_version not in _OFFSETS_KEYS:
            return f"Unknown record type {key_version} at offset {record.offset}, skipping.", None
        key_name = _OFFSETS_KEYS[key_version]
        try:
            key_msg, _ = data_codec(key_name, key_version).decode(key, 2)
        except Exception:
            # Kafka's serde wraps the reader's BufferUnderflowException, whose message is null
            return (f"Error at offset {record.offset}, skipping. Could not read record with version {key_version} "
                    "from key's buffer due to: null."), None
        key_json = to_json({"type": str(key_version),
                            "data": message_json(load_messages()[key_name].fields, key_msg, key_version)})
        if record.value is None:
            return key_json, "<DELETE>"
        value = bytes(record.value)
        value_version = _I16.unpack_from(value, 0)[0]
        value_name = "OffsetCommitValue" if key_version in (0, 1) else "GroupMetadataValue"
        value_msg, _ = data_codec(value_name, value_version).decode(value, 2)
        if value_name == "GroupMetadataValue":
            data = _group_metadata_json(value_msg, value_version)
        else:
            data = message_json(load_messages()[value_name].fields, value_msg, value_version)
        return key_json, to_json({"version": str(value_version), "data": data})
    except Exception as e:  # Kafka prints any failure of the serde and goes on
        return f"Error at offset {record.offset}, skipping. {e}", None


# ------------------------------------------------------------------------------------------------ __transaction_state
TXN_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
              5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def scala_hash_set_order(partitions: Sequence[Tuple[str, int]]) -> List[Tuple[str, int]]:
    """The iteration order of a Scala 2.13 ``mutable.HashSet`` holding ``partitions``: by bucket of the improved
    hash (table of 16, doubled while the set fills it to 3/4), then by that hash within a bucket."""
    size = 16
    while len(partitions) >= size * 0.75:
        size *= 2

    def improved(tp: Tuple[str, int]) -> int:
        h = topic_partition_hash(*tp) & 0xFFFFFFFF
        return h ^ (h >> 16)

    def signed(h: int) -> int:
        return h - (1 << 32) if h >= 1 << 31 else h

    return sorted(set(partitions), key=lambda tp: (improved(tp) & (size - 1), signed(improved(tp))))


def transaction_log_parser(record: Any) -> Parsed:
    """Kafka's TransactionLog.formatRecordKeyAndValue."""
    if record.key is None:
        raise java_crash('java.lang.NullPointerException: Cannot invoke "java.nio.ByteBuffer.getShort()" because '
                         '"buffer" is null')
    raw = bytes(record.key)
    if len(raw) < 2:
        raise java_crash("java.nio.BufferUnderflowException")
    transactional_id = decode_txn_key(raw)
    if transactional_id is None:  # another key version: Kafka names it and prints no payload
        return f"unknown::version={_I16.unpack_from(raw, 0)[0]}", None
    key = f"transaction_metadata::transactionalId={transactional_id}"
    v = decode_txn_value(None if record.value is None else bytes(record.value))
    if v is None:
        return key, "<DELETE>"
    state = TXN_STATES.get(v.transaction_status, str(v.transaction_status))
    parts = [] if state == "Empty" else scala_hash_set_order(v.partitions)
    return key, (f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},state={state},"
                 f"partitions=[{','.join(f'{t}-{p}' for t, p in parts)}],"
                 f"txnLastUpdateTimestamp={v.last_update_timestamp_ms},txnTimeoutMs={v.transaction_timeout_ms}")


def _java_optional_custom(custom: Optional[bytes]) -> str:
    """Optional<CustomMetadata>.toString()."""
    return "Optional.empty" if custom is None else f"Optional[CustomMetadata{{{len(custom)} bytes}}]"


def _java_epochs(epochs: Any) -> str:
    """A TreeMap<Integer, Long>'s toString(): ascending keys."""
    return "{" + ", ".join(f"{e}={o}" for e, o in sorted(epochs.items())) + "}"


def remote_log_metadata_text(md: Any) -> str:
    """The toString() of the value Kafka's RemoteLogMetadataSerde returns (storage-api's classes)."""
    from broker.storage.remote.metadata import (
        RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemotePartitionDeleteMetadata, uuid_to_string,
    )

    def segment_id(sid: Any) -> str:
        return f"RemoteLogSegmentId{{topicIdPartition={sid.topic_id_partition}, id={uuid_to_string(sid.id)}}}"

    if isinstance(md, RemoteLogSegmentMetadata):
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={segment_id(md.remote_log_segment_id)}, "
                f"startOffset={md.start_offset}, endOffset={md.end_offset}, brokerId={md.broker_id}, "
                f"maxTimestampMs={md.max_timestamp_ms}, eventTimestampMs={md.event_timestamp_ms}, "
                f"segmentLeaderEpochs={_java_epochs(md.segment_leader_epochs)}, "
                f"segmentSizeInBytes={md.segment_size_in_bytes}, "
                f"customMetadata={_java_optional_custom(md.custom_metadata)}, state={md.state.name}}}")
    if isinstance(md, RemoteLogSegmentMetadataUpdate):
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={segment_id(md.remote_log_segment_id)}, "
                f"customMetadata={_java_optional_custom(md.custom_metadata)}, state={md.state.name}, "
                f"eventTimestampMs={md.event_timestamp_ms}, brokerId={md.broker_id}}}")
    if isinstance(md, RemotePartitionDeleteMetadata):
        return (f"RemotePartitionDeleteMetadata{{topicPartition={md.topic_id_partition}, state={md.state.name}, "
                f"eventTimestampMs={md.event_timestamp_ms}, brokerId={md.broker_id}}}")
    return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={uuid_to_string(md.segment_id)}, "
            f"startOffset={md.start_offset}, endOffset={md.end_offset}, maxTimestampMs={md.max_timestamp_ms}, "
            f"segmentLeaderEpochs={_java_epochs(md.segment_leader_epochs)}, "
            f"segmentSizeInBytes={md.segment_size_in_bytes}, "
            f"customMetadata={_java_optional_custom(md.custom_metadata)}, state={md.state.name}}}")


#: the message of the NullPointerException Kafka's parser meets on a record without a value (JDK 17's helpful NPE)
_NULL_VALUE_NPE = ('Cannot invoke "java.nio.ByteBuffer.remaining()" because the return value of '
                   '"org.apache.kafka.common.record.Record.value()" is null')


def remote_log_metadata_parser(record: Any) -> Parsed:
    """Kafka's RemoteMetadataLogMessageParser: no key; the value's RemoteLogMetadataSerde decoding as its
    toString(), or ``Error at offset N, skipping. <message>`` when it cannot be decoded."""
    from broker.remote_log.metadata_serde import deserialize

    if record.value is None:
        return None, f"Error at offset {record.offset}, skipping. {_NULL_VALUE_NPE}"
    try:
        return None, remote_log_metadata_text(deserialize(bytes(record.value)))
    except ValueError as exc:  # RemoteLogMetadataParseError, or a value the metadata classes refuse
        return None, f"Error at offset {record.offset}, skipping. {exc}"
