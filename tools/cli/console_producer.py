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

Failures, as Kafka's producer meets them: a record waits up to ``max.block.ms`` (60 s; ``--max-block-ms``) for its
topic to appear in the cluster's metadata (a broker that cannot be reached logs Kafka's connection warnings,
rate-limited as Kafka's client logs them), then fails with ``Topic <t> not present in metadata after <n> ms.``;
a record sent fails when the broker refuses it or after ``delivery.timeout.ms`` (120 s). Each failed record is
logged as Kafka's ErrorLoggingCallback logs it, two lines on stderr::

    [2026-01-01 10:00:00,000] ERROR Error when sending message to topic t with key: null, value: 5 bytes with error:
    (org.apache.kafka.clients.producer.internals.ErrorLoggingCallback)
    org.apache.kafka.common.errors.TimeoutException: Topic t not present in metadata after 60000 ms.

(the first two one line), and the tool then exits 1 once its input is done: a deliberate difference from Kafka,
whose default (asynchronous) mode exits 0 with the records lost (compat-tests/FINDINGS.md). With ``--sync`` the
first failure ends the tool as Kafka's does: ``java.util.concurrent.ExecutionException: <exception>``, exit 1.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .client_config import build_client_config, load_properties_file, parse_key_values
from .client_log import log, with_kafka_log
from .command import kafka_error_text, tool_main
from .java_format import exception_line
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
    conf.setdefault("message.timeout.ms", 120000)  # Java's delivery.timeout.ms (librdkafka's default is 300 s)
    conf["_max.block.ms"] = _long(props.get("max.block.ms", "60000"), "max.block.ms")
    return conf


def _long(text: str, key: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise CommandError(f"org.apache.kafka.common.config.ConfigException: Invalid value {text} for "
                           f"configuration {key}: Not a number of type LONG") from None


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


ERROR_LOGGING_CALLBACK = "org.apache.kafka.clients.producer.internals.ErrorLoggingCallback"
#: librdkafka's local delivery errors: _MSG_TIMED_OUT, _PURGE_QUEUE, _PURGE_INFLIGHT
_MSG_TIMED_OUT, _PURGED = -192, (-152, -151)


class SendFailures:
    """Failed sends, each logged as Kafka's ErrorLoggingCallback logs it."""

    def __init__(self, topic: str, delivery_timeout_ms: int) -> None:
        self.topic = topic
        self.delivery_timeout_ms = delivery_timeout_ms
        self.count = 0
        self.last: Optional[str] = None
        self.purge_reason: Optional[str] = None

    def report(self, key: Optional[bytes], value: Optional[bytes], exception: str, quiet: bool = False) -> None:
        self.count += 1
        self.last = exception
        if quiet:
            return
        log("ERROR", f"Error when sending message to topic {self.topic} with key: "
                     f"{'null' if key is None else f'{len(key)} bytes'}, value: "
                     f"{'null' if value is None else f'{len(value)} bytes'} with error:", ERROR_LOGGING_CALLBACK)
        print(exception, file=sys.stderr, flush=True)

    def exception(self, err: Any, partition: int) -> str:
        """Kafka's exception line for a librdkafka delivery error."""
        code = err.code()
        if code == _MSG_TIMED_OUT:
            return (f"org.apache.kafka.common.errors.TimeoutException: Expiring 1 record(s) for {self.topic}-"
                    f"{max(partition, 0)}:{self.delivery_timeout_ms} ms has passed since batch creation")
        if code in _PURGED and self.purge_reason:
            return self.purge_reason
        if code > 0:
            return exception_line(code)
        return f"org.apache.kafka.common.KafkaException: {err.str()}"


def wait_for_topic(producer: Any, topic: str, max_block_ms: int) -> bool:
    """Kafka's producer blocks a send up to ``max.block.ms`` until the topic is in the cluster's metadata."""
    import time

    deadline = time.monotonic() + max_block_ms / 1000.0
    while True:
        remaining = deadline - time.monotonic()
        try:
            md = producer.list_topics(topic, timeout=max(0.05, min(remaining, 1.0)))
            t = md.topics.get(topic)
            if t is not None and t.error is None and t.partitions:
                return True
        except Exception:  # no broker answered in time: try again until the deadline
            pass
        producer.poll(0)  # serves librdkafka's log lines
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


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
    max_block_ms = int(conf.pop("_max.block.ms"))
    sync = o.has("sync")
    failures = SendFailures(topic, int(conf.get("message.timeout.ms", 120000)))

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.report(msg.key(), msg.value(), failures.exception(err, msg.partition()), quiet=sync)

    try:
        producer = Producer(with_kafka_log(conf, "Producer", "console-producer"))
    except KafkaException as e:
        raise CommandError(f"org.apache.kafka.common.KafkaException: {kafka_error_text(e)}") from None
    prompt = sys.stdin.isatty() and sys.stdout.isatty()
    status = 0
    topic_known = False
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
            if not topic_known:
                topic_known = wait_for_topic(producer, topic, max_block_ms)
            if not topic_known:
                failures.report(key, value, f"org.apache.kafka.common.errors.TimeoutException: Topic {topic} not "
                                            f"present in metadata after {max_block_ms} ms.", quiet=sync)
            else:
                while True:
                    try:
                        producer.produce(topic, value=value, key=key, headers=headers or None,
                                         on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.1)
                    except KafkaException as e:
                        failures.report(key, value, f"org.apache.kafka.common.KafkaException: {kafka_error_text(e)}",
                                        quiet=sync)
                        break
                if sync:
                    producer.flush()
                else:
                    producer.poll(0)
            if sync and failures.count:
                print(f"java.util.concurrent.ExecutionException: {failures.last}", file=sys.stderr)
                break
            if prompt:
                print(">", end="", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        # every record gets its answer: delivered, refused, or expired after delivery.timeout.ms
        producer.flush(failures.delivery_timeout_ms / 1000.0 + 5)
        if len(producer):
            failures.purge_reason = (f"org.apache.kafka.common.errors.TimeoutException: Expiring {len(producer)} "
                                     f"record(s) for {topic}: {failures.delivery_timeout_ms} ms has passed")
            producer.purge()
            producer.flush(1.0)
    if failures.count:
        status = 1  # unlike Kafka's asynchronous default, which exits 0 with the records lost
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
