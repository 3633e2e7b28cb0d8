"""kafka-console-producer.sh: one record per line of standard input, as Kafka 3.9's ConsoleProducer.

    kafka-console-producer.sh --bootstrap-server localhost:9092 --topic t \\
        [--property parse.key=true --property key.separator=:] [--property parse.headers=true] [--sync]

Lines are parsed by Kafka's LineMessageReader rules: with ``parse.headers=true`` a line starts with
``h1:v1,h2:v2`` and ``headers.delimiter``; with ``parse.key=true`` the key ends at ``key.separator``; the rest is
the value; a field equal to ``null.marker`` becomes null; a line without the expected separator stops the tool
(``ignore.error=true`` takes the line as a value instead). Keyed records go to the partition Kafka's default
partitioner picks (murmur2), so a key lands where a Java producer would put it.

The producer is confluent-kafka's, configured from ``--producer.config``, then ``--producer-property``, then the
tool's own options (each applied, as in Kafka, when given or when the properties do not set the key), with Kafka's
console defaults: ``acks=-1``, ``linger.ms=1000``, ``request.timeout.ms=1500``, ``retries=3``, ``batch.size=16384``,
``client.id=console-producer``. ``--sync`` waits for each record's acknowledgement before reading the next line.
A failed delivery prints Kafka's ``Error when sending message to topic ...`` line on stderr.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .client_config import build_client_config, load_properties_file, parse_key_values
from .command import kafka_error_text, tool_main
from .options import CommandError, OptionParser, Options, UsageError

SUMMARY = "This tool helps to read data from standard input and publish it to Kafka."
DEFAULT_READER = "kafka.tools.ConsoleProducer$LineMessageReader"
_READERS = (DEFAULT_READER, "org.apache.kafka.tools.LineMessageReader", "LineMessageReader")
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("topic", "REQUIRED: The topic id to produce messages to.", "topic")
    p.arg("broker-list", "DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified.  "
                         "The broker list string in the form HOST1:PORT1,HOST2:PORT2.", "broker-list")
    p.arg("bootstrap-server", "REQUIRED unless --broker-list(deprecated) is specified. The server(s) to connect to. "
                              "The broker list string in the form HOST1:PORT1,HOST2:PORT2.", "server to connect to")
    p.flag("sync", "If set message send requests to the brokers are synchronously, one at a time as they arrive.")
    p.arg("compression-codec", "The compression codec: either 'none', 'gzip', 'snappy', 'lz4', or 'zstd'.If "
                               "specified without value, then it defaults to 'gzip'", "compression-codec",
          optional=True)
    p.arg("batch-size", "Number of messages to send in a single batch if they are not being sent synchronously. "
                        "please note that this option will be replaced if max-partition-memory-bytes is also set",
          "size", "Integer", default=16384)
    p.arg("message-send-max-retries", "Number of retries before the producer gives up on a record (the producer's "
                                      "`retries`).", "", "Integer", default=3)
    p.arg("retry-backoff-ms", "Wait before each retry (the producer's `retry.backoff.ms`).", "", "Long", default=100)
    p.arg("timeout", "If set and the producer is running in asynchronous mode, this gives the maximum amount of "
                     "time a message will queue awaiting sufficient batch size. The value is given in ms. This is "
                     "the option to control `linger.ms` in producer configs.", "timeout_ms", "Long", default=1000)
    p.arg("request-required-acks", "The required `acks` of the producer requests", "request required acks",
          default="-1")
    p.arg("request-timeout-ms", "The ack timeout of the producer requests. Value must be non-negative and "
                                "non-zero.", "request timeout ms", "Integer", default=1500)
    p.arg("metadata-expiry-ms", "The period of time in milliseconds after which we force a refresh of metadata "
                                "even if we haven't seen any leadership changes. This is the option to control "
                                "`metadata.max.age.ms` in producer configs.", "metadata expiration interval", "Long",
          default=300000)
    p.arg("max-block-ms", "The max time that the producer will block for during a send request.",
          "max block on send", "Long", default=60000)
    p.arg("max-memory-bytes", "The total memory used by the producer to buffer records waiting to be sent to the "
                              "server. This is the option to control `buffer.memory` in producer configs.",
          "total memory in bytes", "Long", default=33554432)
    p.arg("max-partition-memory-bytes", "The buffer size allocated for a partition (the producer's `batch.size`).",
          "memory in bytes per partition", "Integer", default=16384)
    p.arg("line-reader", "The class name of the class to use for reading lines from standard in. By default each "
                         "line is read as a separate message. Only the default reader is available here.",
          "reader_class", default=DEFAULT_READER)
    p.arg("socket-buffer-size", "The size of the tcp RECV size. This is the option to control `send.buffer.bytes` "
                                "in producer configs.", "size", "Integer", default=102400)
    p.arg("property", "A mechanism to pass user-defined properties in the form key=value to the message reader.\n"
                      "Default properties include:\n parse.key=false\n parse.headers=false\n ignore.error=false\n"
                      " key.separator=\\t\n headers.delimiter=\\t\n headers.separator=,\n headers.key.separator=:\n"
                      " null.marker=   When set, any fields (key, value and headers) equal to this will be replaced "
                      "by null\nDefault parsing pattern when:\n parse.headers=true and parse.key=true:\n"
                      "  \"h1:v1,h2:v2...\\tkey\\tvalue\"\n parse.key=true:\n  \"key\\tvalue\"\n parse.headers=true:"
                      "\n  \"h1:v1,h2:v2...\\tvalue\"", "prop")
    p.arg("reader-config", "Config properties file for the message reader. Note that [property] takes precedence "
                           "over this config.", "config file")
    p.arg("producer-property", "A mechanism to pass user-defined properties in the form key=value to the producer. ",
          "producer_prop")
    p.arg("producer.config", "Producer config properties file. Note that [producer-property] takes precedence over "
                             "this config.", "config file")
    return p


class ReaderError(Exception):
    """A line the LineMessageReader cannot parse (Kafka's KafkaException)."""


class LineMessageReader:
    """Kafka's LineMessageReader: a line -> (key, value, headers), with its properties and errors."""

    def __init__(self, props: Dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").strip().lower() == "true"
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = props.get("parse.headers", "false").strip().lower() == "true"
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = props.get("ignore.error", "false").strip().lower() == "true"
        self.null_marker = props.get("null.marker")
        pairs = [(self.headers_delimiter, self.headers_separator, "headers.delimiter and headers.separator"),
                 (self.headers_delimiter, self.headers_key_separator, "headers.delimiter and headers.key.separator"),
                 (self.headers_separator, self.headers_key_separator, "headers.separator and headers.key.separator")]
        if self.null_marker is not None:
            pairs += [(self.null_marker, self.key_separator, "null.marker and key.separator"),
                      (self.null_marker, self.headers_separator, "null.marker and headers.separator"),
                      (self.null_marker, self.headers_delimiter, "null.marker and headers.delimiter"),
                      (self.null_marker, self.headers_key_separator, "null.marker and headers.key.separator")]
        for a, b, what in pairs:
            if a == b:
                raise CommandError(f"org.apache.kafka.common.KafkaException: {what} may not be equal")
        self.line_number = 0

    def _field(self, enabled: bool, line: str, start: int, mark: str, name: str) -> Optional[str]:
        if not enabled:
            return None
        index = line.find(mark, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise ReaderError(f"No {name} found on line number {self.line_number}: '{line}'")
        return line[start:index]

    def _null_or_bytes(self, text: Optional[str]) -> Optional[bytes]:
        if text is None or text == self.null_marker:
            return None
        return text.encode("utf-8")

    def _split_headers(self, text: str) -> List[Tuple[str, Optional[bytes]]]:
        pairs = re.split(re.escape(self.headers_separator), text)
        while pairs and pairs[-1] == "":  # Java's String.split drops trailing empty strings
            pairs.pop()
        out: List[Tuple[str, Optional[bytes]]] = []
        for pair in pairs:
            i = pair.find(self.headers_key_separator)
            if i < 0:
                if not self.ignore_error:
                    raise ReaderError(f"No header key separator found in pair '{pair}' on line number "
                                      f"{self.line_number}")
                out.append((pair, None))
                continue
            key = pair[:i]
            if key == self.null_marker:
                raise ReaderError(f"Header keys should not be equal to the null marker '{self.null_marker}' as they "
                                  "can't be null")
            value = pair[i + len(self.headers_key_separator):]
            out.append((key, None if value == self.null_marker else value.encode("utf-8")))
        return out

    def parse(self, line: str) -> Tuple[Optional[bytes], Optional[bytes], List[Tuple[str, Optional[bytes]]]]:
        """(key, value, headers) of one line (without its line terminator)."""
        self.line_number += 1
        headers = self._field(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        header_offset = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._field(self.parse_key, line, header_offset, self.key_separator, "key separator")
        key_offset = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_offset + key_offset:]
        parsed_headers = self._split_headers(headers) if headers is not None and headers != self.null_marker else []
        return self._null_or_bytes(key), self._null_or_bytes(value), parsed_headers


def producer_conf(o: Options) -> Dict[str, Any]:
    """Kafka's ConsoleProducer.producerProps, then translated for librdkafka."""
    props: Dict[str, str] = {}
    if o.has("producer.config"):
        props.update(load_properties_file(o.value("producer.config")))
    props.update(parse_key_values(o.values("producer-property"), "producer property"))
    bootstrap = o.value("bootstrap-server") or o.value("broker-list")
    codec = "none"
    if o.has("compression-codec"):
        codec = o.value("compression-codec") or "gzip"
        if codec not in _CODECS:
            raise CommandError(f"org.apache.kafka.common.config.ConfigException: Invalid value {codec} for "
                               "configuration compression.type: String must be one of: none, gzip, snappy, lz4, zstd")
    props["compression.type"] = codec
    props.setdefault("client.id", "console-producer")

    def merge(key: str, option: str) -> None:
        if o.has(option) or key not in props:
            props[key] = str(o.value(option))

    merge("linger.ms", "timeout")
    merge("acks", "request-required-acks")
    merge("request.timeout.ms", "request-timeout-ms")
    merge("retries", "message-send-max-retries")
    merge("retry.backoff.ms", "retry-backoff-ms")
    merge("send.buffer.bytes", "socket-buffer-size")
    merge("buffer.memory", "max-memory-bytes")
    merge("batch.size", "max-partition-memory-bytes" if o.has("max-partition-memory-bytes") else "batch-size")
    merge("metadata.max.age.ms", "metadata-expiry-ms")
    merge("max.block.ms", "max-block-ms")
    cfg = build_client_config(props, "producer", bootstrap)
    conf = dict(cfg.librdkafka)
    conf.setdefault("partitioner", "murmur2_random")  # Java's default partitioner for keyed records
    if conf.get("acks") in ("-1", "all") and "enable.idempotence" not in props:
        conf["enable.idempotence"] = True  # the Java producer's default with acks=all
    return conf


def reader_properties(o: Options) -> Dict[str, str]:
    props: Dict[str, str] = {}
    if o.has("reader-config"):
        props.update(load_properties_file(o.value("reader-config")))
    props.update(parse_key_values(o.values("property"), "property"))
    return props


def _lines(stream: Any) -> Any:
    """Lines of a binary stream as text, split like Java's BufferedReader.readLine (\\n, \\r\\n or \\r)."""
    pending = b""
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        pending += chunk
        parts = re.split(rb"\r\n|\n|\r(?!$)", pending)
        pending = parts.pop()
        if pending.endswith(b"\r"):
            pass  # a \r at the chunk end may be the start of \r\n: wait for more
        for p in parts:
            yield p.decode("utf-8", errors="replace")
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", errors="replace")


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    from confluent_kafka import KafkaException, Producer

    o = parser.parse(argv)
    parser.check_required(o, "topic")
    if not o.has("bootstrap-server") and not o.has("broker-list"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if o.value("line-reader") not in _READERS:
        raise CommandError(f"--line-reader {o.value('line-reader')} is not supported by this broker's tools: only "
                           f"the default {DEFAULT_READER} (Java reader classes cannot run here)")
    topic = o.value("topic")
    reader = LineMessageReader(reader_properties(o))
    conf = producer_conf(o)
    failures: List[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            key = msg.key()
            value = msg.value()
            failures.append(f"ERROR Error when sending message to topic {topic} with key: "
                            f"{'null' if key is None else f'{len(key)} bytes'}, value: "
                            f"{'null' if value is None else f'{len(value)} bytes'} with error: {err.str()}")
            print(failures[-1], file=sys.stderr, flush=True)

    try:
        producer = Producer(conf)
    except KafkaException as e:
        raise CommandError(f"org.apache.kafka.common.KafkaException: {kafka_error_text(e)}") from None
    prompt = sys.stdin.isatty() and sys.stdout.isatty()
    sync = o.has("sync")
    status = 0
    try:
        stdin = sys.stdin.buffer
        if prompt:
            print(">", end="", flush=True)
        for line in _lines(stdin):
            try:
                key, value, headers = reader.parse(line)
            except ReaderError as e:
                print(f"org.apache.kafka.common.KafkaException: {e}", file=sys.stderr)
                status = 1
                break
            while True:
                try:
                    producer.produce(topic, value=value, key=key, headers=headers or None, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as e:
                    print(f"ERROR Error when sending message to topic {topic}: {kafka_error_text(e)}",
                          file=sys.stderr)
                    status = 1
                    break
            if sync:
                producer.flush()
                if failures:
                    status = 1
                    break
            else:
                producer.poll(0)
            if prompt:
                print(">", end="", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        producer.flush(max(30.0, int(conf.get("request.timeout.ms", 1500)) / 1000.0))
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
