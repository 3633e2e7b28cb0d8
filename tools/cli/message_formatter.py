"""Kafka's DefaultMessageFormatter: how kafka-console-consumer.sh prints a record.

Fields in this order, each only when its ``print.*`` property is true: ``<CreateTime|LogAppendTime>:<ms>`` (or
``NO_TIMESTAMP``), ``Partition:<p>``, ``Offset:<o>``, the headers (``k:v`` joined by ``headers.separator``, or
``NO_HEADERS``), the key, the value (``print.value`` defaults to true); ``key.separator`` between fields and
``line.separator`` after the last one. Null keys, values and header values print as ``null.literal``.
Deserializers are Kafka's class names (``key.deserializer``, ``value.deserializer``, ``headers.deserializer``):
String, ByteArray, Bytes, ByteBuffer, Integer, Long, Short, Float, Double, UUID and Void; without one the raw
bytes are written.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["DefaultMessageFormatter", "FormatterError", "deserializer", "NoOpMessageFormatter"]

_PKG = "org.apache.kafka.common.serialization."


class FormatterError(Exception):
    """A record's bytes do not fit the configured deserializer (Kafka's SerializationException)."""


def _fixed(fmt: str, name: str) -> Callable[[bytes], bytes]:
    size = struct.calcsize(fmt)

    def decode(data: bytes) -> bytes:
        if len(data) != size:
            raise FormatterError(f"Size of data received by {name} is not {size}")
        v = struct.unpack(fmt, data)[0]
        if isinstance(v, float):
            return _java_double(v).encode()
        return str(v).encode()
    return decode


def _java_double(v: float) -> str:
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    text = repr(v)
    if "e" in text:
        mantissa, exp = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}E{int(exp)}"
    return text


def _uuid(data: bytes) -> bytes:
    try:
        return str(uuid.UUID(data.decode("utf-8"))).encode()
    except (UnicodeDecodeError, ValueError):
        raise FormatterError("Error parsing data into UUID") from None


_DESERIALIZERS: Dict[str, Optional[Callable[[bytes], bytes]]] = {
    "StringDeserializer": lambda b: b,
    "ByteArrayDeserializer": lambda b: b,
    "BytesDeserializer": lambda b: b,
    "ByteBufferDeserializer": lambda b: b,
    "IntegerDeserializer": _fixed(">i", "IntegerDeserializer"),
    "LongDeserializer": _fixed(">q", "LongDeserializer"),
    "ShortDeserializer": _fixed(">h", "ShortDeserializer"),
    "FloatDeserializer": _fixed(">f", "FloatDeserializer"),
    "DoubleDeserializer": _fixed(">d", "DoubleDeserializer"),
    "UUIDDeserializer": _uuid,
    "VoidDeserializer": lambda b: b"null",
}


def deserializer(class_name: Optional[str]) -> Optional[Callable[[bytes], bytes]]:
    """The bytes -> printed bytes function of a Kafka deserializer class (None: raw bytes)."""
    if class_name is None:
        return None
    short = class_name.strip()
    if short.startswith(_PKG):
        short = short[len(_PKG):]
    if short not in _DESERIALIZERS:
        raise ValueError(f"deserializer {class_name} is not available in this tool (it has Kafka's built-in "
                         f"ones: {', '.join(sorted(_DESERIALIZERS))})")
    return _DESERIALIZERS[short]


def _flag(props: Dict[str, str], key: str, default: bool) -> bool:
    return props[key].strip().lower() == "true" if key in props else default


class DefaultMessageFormatter:
    """Configured from the ``--property`` / ``--formatter-config`` properties, as Kafka's."""

    def __init__(self, props: Dict[str, str]) -> None:
        self.print_timestamp = _flag(props, "print.timestamp", False)
        self.print_key = _flag(props, "print.key", False)
        self.print_offset = _flag(props, "print.offset", False)
        self.print_partition = _flag(props, "print.partition", False)
        self.print_headers = _flag(props, "print.headers", False)
        self.print_value = _flag(props, "print.value", True)
        self.key_separator = props.get("key.separator", "\t").encode("utf-8")
        self.line_separator = props.get("line.separator", "\n").encode("utf-8")
        self.headers_separator = props.get("headers.separator", ",").encode("utf-8")
        self.null_literal = props.get("null.literal", "null").encode("utf-8")
        self.key_deserializer = deserializer(props.get("key.deserializer"))
        self.value_deserializer = deserializer(props.get("value.deserializer"))
        self.headers_deserializer = deserializer(props.get("headers.deserializer", props.get("header.deserializer")))

    def _bytes(self, data: Optional[bytes], fn: Optional[Callable[[bytes], bytes]]) -> bytes:
        if data is None:
            return self.null_literal
        return fn(data) if fn is not None else data

    def format(self, timestamp: Tuple[int, int], partition: int, offset: int,
               headers: Optional[List[Tuple[str, Optional[bytes]]]], key: Optional[bytes],
               value: Optional[bytes]) -> bytes:
        """One record; ``timestamp`` is confluent-kafka's (type, ms) pair (type 0 = none, 1 create, 2 append)."""
        out: List[bytes] = []

        def sep(more: bool) -> None:
            out.append(self.key_separator if more else self.line_separator)

        if self.print_timestamp:
            ts_type, ts = timestamp
            if ts_type == 1:
                out.append(f"CreateTime:{ts}".encode())
            elif ts_type == 2:
                out.append(f"LogAppendTime:{ts}".encode())
            else:
                out.append(b"NO_TIMESTAMP")
            sep(self.print_partition or self.print_offset or self.print_headers or self.print_key or self.print_value)
        if self.print_partition:
            out.append(f"Partition:{partition}".encode())
            sep(self.print_offset or self.print_headers or self.print_key or self.print_value)
        if self.print_offset:
            out.append(f"Offset:{offset}".encode())
            sep(self.print_headers or self.print_key or self.print_value)
        if self.print_headers:
            if not headers:
                out.append(b"NO_HEADERS")
            else:
                out.append(self.headers_separator.join(
                    k.encode("utf-8") + b":" + self._bytes(v, self.headers_deserializer) for k, v in headers))
            sep(self.print_key or self.print_value)
        if self.print_key:
            out.append(self._bytes(key, self.key_deserializer))
            sep(self.print_value)
        if self.print_value:
            out.append(self._bytes(value, self.value_deserializer))
            out.append(self.line_separator)
        return b"".join(out)


class NoOpMessageFormatter:
    """Kafka's NoOpMessageFormatter: consumes and prints nothing (for counting and timing)."""

    def __init__(self, props: Dict[str, str]) -> None:
        pass

    def format(self, *args: Any) -> bytes:
        return b""
