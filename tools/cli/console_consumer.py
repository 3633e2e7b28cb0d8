"""kafka-console-consumer.sh: print the records of topics on standard output, as Kafka 3.9's ConsoleConsumer.

    kafka-console-consumer.sh --bootstrap-server localhost:9092 --topic t --from-beginning \\
        [--group g] [--partition 0 --offset 5] [--max-messages 10] [--timeout-ms 5000] \\
        [--property print.key=true --property print.timestamp=true ...] [--isolation-level read_committed]

Records are printed by Kafka's DefaultMessageFormatter (``tools.cli.message_formatter``); when the tool ends
(``--max-messages`` reached, ``--timeout-ms`` without a record, Ctrl-C) it prints ``Processed a total of N
messages`` on stderr, as Kafka does; a timeout is first reported as Kafka's ERROR line. Without ``--group`` the
consumer uses a random ``console-consumer-<n>`` group and commits nothing; with one it commits as Kafka's
consumer does (auto-commit, and on close). ``--topic`` subscribes to one topic, ``--include`` to every topic the
Java regex matches in full (internal topics excluded), ``--partition`` assigns one partition and starts at
``--offset`` (a number, ``earliest`` or ``latest``).

With ``--group`` the tool commits, on close and when partitions are revoked, every assigned partition as Kafka's
Java consumer does: a partition it printed from at the offset after the last printed record, one it printed nothing
from (and the group had no offset for) at the offset the consumer started from (``auto.offset.reset``). librdkafka
alone commits only the partitions records were handed over from, so ``kafka-consumer-groups.sh --describe`` would
show no offset for the others and a later consumer with ``auto.offset.reset=latest`` would skip what was written
to them meanwhile.

Difference from Kafka: with ``--max-messages`` and ``--group``, the committed offset is the one after the last
printed record; Kafka's Java consumer commits its fetch position, which may lie past records it fetched but did
not print. With ``auto.offset.reset=latest`` the start offset of an unread partition is read when it is assigned,
which may be before Kafka's consumer would reset it: records written in between are read again, never skipped.
"""
from __future__ import annotations

import datetime
import random
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .client_config import build_client_config, load_properties_file, parse_key_values
from .command import kafka_error_text, tool_main
from .message_formatter import DefaultMessageFormatter, FormatterError, NoOpMessageFormatter
from .options import CommandError, OptionParser, Options, UsageError

SUMMARY = "This tool helps to read data from Kafka topics and outputs it to standard output."
_FORMATTERS = {
    "org.apache.kafka.tools.consumer.DefaultMessageFormatter": DefaultMessageFormatter,
    "kafka.tools.DefaultMessageFormatter": DefaultMessageFormatter,
    "org.apache.kafka.tools.consumer.NoOpMessageFormatter": NoOpMessageFormatter,
    "kafka.tools.NoOpMessageFormatter": NoOpMessageFormatter,
}
_LOGGER = "(org.apache.kafka.tools.consumer.ConsoleConsumer)"


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("topic", "The topic to consume on.", "topic")
    p.arg("whitelist", "DEPRECATED, use --include instead; ignored if --include specified. Regular expression "
                       "specifying list of topics to include for consumption.", "Java regex (String)")
    p.arg("include", "Regular expression specifying list of topics to include for consumption.",
          "Java regex (String)")
    p.arg("partition", "The partition to consume from. Consumption starts from the end of the partition unless "
                       "'--offset' is specified.", "partition", "Integer")
    p.arg("offset", "The offset to consume from (a non-negative number), or 'earliest' which means from beginning, "
                    "or 'latest' which means from end", "consume offset", default="latest")
    p.arg("consumer-property", "A mechanism to pass user-defined properties in the form key=value to the consumer.",
          "consumer_prop")
    p.arg("consumer.config", "Consumer config properties file. Note that [consumer-property] takes precedence over "
                             "this config.", "config file")
    p.arg("formatter", "The name of a class to use for formatting kafka messages for display. Available here: "
                       "DefaultMessageFormatter and NoOpMessageFormatter.", "class",
          default="org.apache.kafka.tools.consumer.DefaultMessageFormatter")
    p.arg("property", "The properties to initialize the message formatter. Default properties include:\n"
                      " print.timestamp=true|false\n print.key=true|false\n print.offset=true|false\n"
                      " print.partition=true|false\n print.headers=true|false\n print.value=true|false\n"
                      " key.separator=<key.separator>\n line.separator=<line.separator>\n"
                      " headers.separator=<line.separator>\n null.literal=<null.literal>\n"
                      " key.deserializer=<key.deserializer>\n value.deserializer=<value.deserializer>\n"
                      " header.deserializer=<header.deserializer>", "prop")
    p.arg("formatter-config", "Config properties file to initialize the message formatter. Note that [property] "
                              "takes precedence over this config.", "config file")
    p.flag("from-beginning", "If the consumer does not already have an established offset to consume from, start "
                             "with the earliest message present in the log rather than the latest message.")
    p.arg("max-messages", "The maximum number of messages to consume before exiting. If not set, consumption is "
                          "continual.", "num_messages", "Integer")
    p.arg("timeout-ms", "If specified, exit if no message is available for consumption for the specified "
                        "interval.", "timeout_ms", "Long")
    p.flag("skip-message-on-error", "If there is an error when processing a message, skip it instead of halt.")
    p.arg("bootstrap-server", "REQUIRED: The server(s) to connect to.", "server to connect to")
    p.arg("key-deserializer", "", "deserializer for key")
    p.arg("value-deserializer", "", "deserializer for values")
    p.refuse("enable-systest-events", "the JSON lifecycle events of Kafka's system tests are not produced by this "
             "tool", "Log lifecycle events of the consumer in addition to logging consumed messages.", "none")
    p.arg("isolation-level", "Set to read_committed in order to filter out transactional messages which are not "
                             "committed. Set to read_uncommitted to read all messages.", "", default="read_uncommitted")
    p.arg("group", "The consumer group id of the consumer.", "consumer group id")
    return p


def _offset(o: Options) -> int:
    """-2 earliest, -1 latest, else the offset (Kafka's ConsoleConsumerOptions.parseOffset)."""
    if o.has("offset"):
        raw = str(o.value("offset")).strip().lower()
        if raw == "earliest":
            return -2
        if raw == "latest":
            return -1
        try:
            n = int(raw)
        except ValueError:
            n = -1
        if n < 0 or not raw.isdigit():
            raise UsageError(f"The provided offset value '{o.value('offset')}' is incorrect. Valid values are "
                             "'earliest', 'latest', or a non-negative long.")
        return n
    return -2 if o.has("from-beginning") else -1


def check_args(o: Options) -> None:
    include = o.value("include") or o.value("whitelist")
    if (o.has("topic") and include) or (not o.has("topic") and not include):
        raise UsageError("Exactly one of --include/--topic is required. ")
    if o.has("partition") and not o.has("topic"):
        raise UsageError("The topic is required when partition is specified.")
    if o.has("from-beginning") and o.has("offset"):
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if o.has("offset") and not o.has("partition"):
        raise UsageError("The partition is required when offset is specified.")
    if not o.has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')


def consumer_props(o: Options) -> Dict[str, str]:
    """Kafka's ConsoleConsumerOptions consumer properties (Java names)."""
    file_props = load_properties_file(o.value("consumer.config")) if o.has("consumer.config") else {}
    cli_props = parse_key_values(o.values("consumer-property"), "consumer property")
    props = dict(file_props)
    props.update(cli_props)
    groups = []
    for g in (o.value("group"), cli_props.get("group.id"), file_props.get("group.id")):
        if g is not None and g not in groups:
            groups.append(g)
    if len(groups) > 1:
        raise UsageError("The group ids provided in different places (directly using '--group', via "
                         "'--consumer-property', or via '--consumer.config') do not match. Detected group ids: "
                         + ", ".join(f"'{g}'" for g in groups))
    if groups and o.has("partition"):
        raise UsageError("Options group and partition cannot be specified together.")
    props["bootstrap.servers"] = o.value("bootstrap-server")
    props.setdefault("client.id", "console-consumer")
    props["isolation.level"] = o.value("isolation-level")
    if groups:
        props["group.id"] = groups[0]
    else:
        props["group.id"] = f"console-consumer-{random.randrange(100000)}"
        props.setdefault("enable.auto.commit", "false")
    reset = props.get("auto.offset.reset")
    if o.has("from-beginning"):
        if reset is not None and reset != "earliest":
            raise UsageError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                             "please remove one option")
        props["auto.offset.reset"] = "earliest"
    elif reset is None:
        props["auto.offset.reset"] = "latest"
    return props


def formatter_for(o: Options) -> Any:
    props: Dict[str, str] = {}
    if o.has("formatter-config"):
        props.update(load_properties_file(o.value("formatter-config")))
    props.update(parse_key_values(o.values("property"), "property"))
    if o.has("key-deserializer"):
        props["key.deserializer"] = o.value("key-deserializer")
    if o.has("value-deserializer"):
        props["value.deserializer"] = o.value("value-deserializer")
    name = o.value("formatter")
    cls = _FORMATTERS.get(name)
    if cls is None:
        raise CommandError(f"--formatter {name} is not supported by this broker's tools: Java formatter classes "
                           "cannot run here (DefaultMessageFormatter and NoOpMessageFormatter are available)")
    if name.startswith("kafka.tools."):
        print(f"WARNING: {name} is deprecated and will be removed in the next major release. Please use "
              f"org.apache.kafka.tools.consumer.{name.rsplit('.', 1)[1]} instead", file=sys.stderr)
    try:
        return cls(props)
    except ValueError as e:
        raise CommandError(f"--property {e} is not supported by this broker's tools") from None


def _log_error(message: str, detail: str) -> None:
    now = datetime.datetime.now()
    stamp = now.strftime("%Y-%m-%d %H:%M:%S") + f",{now.microsecond // 1000:03d}"
    print(f"[{stamp}] ERROR {message} {_LOGGER}\n{detail}", file=sys.stderr, flush=True)


def java_regex_subscription(regex: str) -> str:
    """A Java regex matched in full, as librdkafka's regex subscription (which searches) must be given it."""
    return "^(" + regex.strip() + ")$"


class _Stop(Exception):
    """SIGTERM: end like Ctrl-C."""


class UnreadPartitions:
    """The start offsets of a group consumer's assigned partitions, so the ones it printed nothing from are committed
    too (Kafka's consumer commits every assigned partition's position; librdkafka only those it handed records from).

    ``reset`` is -2 (earliest) or -1 (latest): the start offset is looked up (ListOffsets, by those timestamps) as
    partitions are assigned, before the consumer resets its position, so a commit never lies past what it would
    have read.
    """

    def __init__(self, reset: int, timeout_s: float = 10.0) -> None:
        self.reset = reset
        self.timeout_s = timeout_s
        self.start: Dict[Tuple[str, int], int] = {}

    def on_assign(self, consumer: Any, partitions: List[Any]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            found = consumer.offsets_for_times([TopicPartition(tp.topic, tp.partition, self.reset)
                                                for tp in partitions], self.timeout_s)
        except KafkaException:
            return  # no start offsets: those partitions are committed as librdkafka would, no worse
        for tp in found:
            if tp.error is None and tp.offset >= 0:
                self.start[(tp.topic, tp.partition)] = tp.offset

    def on_revoke(self, consumer: Any, partitions: List[Any]) -> None:
        self.commit(consumer, partitions)
        for tp in partitions:
            self.start.pop((tp.topic, tp.partition), None)

    def commit(self, consumer: Any, partitions: Optional[List[Any]] = None) -> None:
        """Commit the start offset of every partition in ``partitions`` (default: the assignment) that nothing was
        printed from and that has no committed offset; the others librdkafka commits itself."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            parts = consumer.assignment() if partitions is None else partitions
            todo = [TopicPartition(tp.topic, tp.partition) for tp in parts if (tp.topic, tp.partition) in self.start]
            if not todo:
                return
            unread = [tp for tp in consumer.position(todo) if tp.offset < 0]
            if not unread:
                return
            offsets = [TopicPartition(tp.topic, tp.partition, self.start[(tp.topic, tp.partition)])
                       for tp in consumer.committed(unread, self.timeout_s) if tp.error is None and tp.offset < 0]
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)
        except (KafkaException, RuntimeError):
            pass  # as the close itself: a group that cannot take the commit loses nothing printed


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    o = parser.parse(argv)
    check_args(o)
    if o.value("whitelist") and not o.value("include"):
        print("--whitelist is DEPRECATED use --include instead; ignored if --include specified.", file=sys.stderr)
    formatter = formatter_for(o)
    props = consumer_props(o)
    offset = _offset(o)
    cfg = build_client_config(props, "consumer")
    conf = dict(cfg.librdkafka)
    conf.setdefault("allow.auto.create.topics", "true")  # the Java consumer's default
    conf["enable.partition.eof"] = False
    max_messages = o.value("max-messages", -1)
    timeout_ms = o.value("timeout-ms")
    try:
        from .client_log import with_kafka_log

        consumer = Consumer(with_kafka_log(conf, "Consumer", "console-consumer", conf.get("group.id")))
    except KafkaException as e:
        raise CommandError(f"org.apache.kafka.common.KafkaException: {kafka_error_text(e)}") from None
    topic = o.value("topic")
    unread: Optional[UnreadPartitions] = None
    if not o.has("partition") and str(props.get("enable.auto.commit", "true")).lower() != "false":
        # (auto.offset.reset=none: Kafka's consumer fails on a partition without an offset; nothing to commit)
        reset = {"earliest": -2, "latest": -1}.get(str(props.get("auto.offset.reset")))
        unread = None if reset is None else UnreadPartitions(reset)
    callbacks: Dict[str, Any] = {} if unread is None else {"on_assign": unread.on_assign,
                                                           "on_revoke": unread.on_revoke}
    if o.has("partition"):
        consumer.assign([TopicPartition(topic, o.value("partition"), offset)])
    elif topic:
        consumer.subscribe([topic], **callbacks)
    else:
        consumer.subscribe([java_regex_subscription(o.value("include") or o.value("whitelist"))], **callbacks)

    def on_term(signum: int, frame: Any) -> None:
        raise _Stop()

    signal.signal(signal.SIGTERM, on_term)
    out = sys.stdout.buffer
    count = 0
    status = 0
    last = time.monotonic()
    try:
        while max_messages is None or max_messages < 0 or count < max_messages:
            wait = 0.5 if timeout_ms is None else max(0.0, min(0.5, timeout_ms / 1000.0 - (time.monotonic() - last)))
            # never take more than --max-messages still allows: librdkafka stores the offset of every record it hands
            # over, and the group commits those
            want = min(500, max_messages - count) if max_messages is not None and max_messages > 0 else 500
            batch = consumer.consume(want, wait)
            if not batch:
                if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                    _log_error("Error processing message, terminating consumer process: ",
                               "org.apache.kafka.common.errors.TimeoutException")
                    break
                continue
            last = time.monotonic()
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.fatal() or err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                     KafkaError.GROUP_AUTHORIZATION_FAILED):
                        _log_error("Error processing message, terminating consumer process: ", err.str())
                        raise StopIteration
                    print(f"WARN {err.str()}", file=sys.stderr, flush=True)
                    continue
                count += 1
                try:
                    data = formatter.format(msg.timestamp(), msg.partition(), msg.offset(), msg.headers(),
                                            msg.key(), msg.value())
                except FormatterError as e:
                    if o.has("skip-message-on-error"):
                        _log_error("Error processing message, skipping this message: ",
                                   f"org.apache.kafka.common.errors.SerializationException: {e}")
                        continue
                    _log_error("Unknown error when running consumer: ",
                               f"org.apache.kafka.common.errors.SerializationException: {e}")
                    status = 1
                    raise StopIteration from None
                try:
                    out.write(data)
                except BrokenPipeError:
                    print("Unable to write to standard out, closing consumer.", file=sys.stderr)
                    raise StopIteration from None
                if max_messages is not None and 0 <= max_messages <= count:
                    break
            try:
                out.flush()
            except BrokenPipeError:
                print("Unable to write to standard out, closing consumer.", file=sys.stderr)
                break
    except StopIteration:
        pass
    except KeyboardInterrupt:
        status = 130
    except _Stop:
        status = 143
    finally:
        try:
            out.flush()
        except (BrokenPipeError, ValueError):
            pass
        try:
            if unread is not None:
                unread.commit(consumer)
            consumer.close()
        except (KafkaException, RuntimeError):
            pass
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
