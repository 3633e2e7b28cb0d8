"""kafka-consumer-perf-test.sh: a consumer load test with Kafka 3.9's ConsumerPerformance flags and output.

    kafka-consumer-perf-test.sh --bootstrap-server localhost:9092 --topic t --messages 1000000 \\
        [--group g] [--from-latest] [--show-detailed-stats --reporting-interval 1000] [--timeout 10000] \\
        [--consumer.config c.properties] [--print-metrics] [--hide-header] [--date-format 'yyyy-MM-dd HH:mm:ss:SSS']

Subscribes (as Kafka's tool does, in group ``perf-consumer-<n>`` unless ``--group``) and reads until ``--messages``
records or ``--timeout`` ms without one. Prints Kafka's header and summary line (``start.time, end.time,
data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec,
fetch.nMsg.sec``; MB = 2^20 bytes of keys and values); with ``--show-detailed-stats`` a progress line every
``--reporting-interval`` ms instead of the summary, as Kafka does. ``--threads`` and ``--num-fetch-threads`` are
accepted and ignored (Kafka deprecated them).

The consumer is confluent-kafka's; ``--print-metrics`` prints its counters under Kafka's metric names.
``tools/consumer_perf.py`` (the benchmarks' module API) is separate and unchanged.
"""
from __future__ import annotations

import datetime
import json
import random
import re
import sys
import time
from typing import Any, Dict, Optional, Sequence

from .client_config import build_client_config, load_properties_file
from .command import tool_main
from .options import CommandError, OptionParser, UsageError
from .producer_perf_test import print_metrics

SUMMARY = "This tool is used to verify the consumer performance."
_MB = 1024.0 * 1024.0
_HEADER = ("rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("bootstrap-server", "REQUIRED unless --broker-list(deprecated) is specified. The server(s) to connect to.",
          "server to connect to")
    p.arg("broker-list", "DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified. The "
                         "broker list string in the form HOST1:PORT1,HOST2:PORT2.", "broker-list")
    p.arg("topic", "REQUIRED: The topic to consume from.", "topic")
    p.arg("group", "The group id to consume on.", "gid", default=f"perf-consumer-{random.randrange(100000)}")
    p.arg("fetch-size", "The amount of data to fetch in a single request.", "size", "Integer", default=1048576)
    p.flag("from-latest", "If the consumer does not already have an established offset to consume from, start with "
                          "the latest message present in the log rather than the earliest message.")
    p.arg("socket-buffer-size", "The size of the tcp RECV size.", "size", "Integer", default=2097152)
    p.arg("threads", "DEPRECATED AND IGNORED: Number of processing threads.", "count", "Integer", default=10)
    p.arg("num-fetch-threads", "DEPRECATED AND IGNORED: Number of fetcher threads.", "count", "Integer", default=1)
    p.arg("consumer.config", "Consumer config properties file.", "config file")
    p.flag("print-metrics", "Print out the metrics.")
    p.flag("show-detailed-stats", "If set, stats are reported for each reporting interval as configured by "
                                  "reporting-interval")
    p.arg("messages", "REQUIRED: The number of messages to send or consume", "count", "Long")
    p.arg("reporting-interval", "Interval in milliseconds at which to print progress info.", "interval_ms", "Long",
          default=5000)
    p.arg("date-format", "The date format to use for formatting the time field. See java.text.SimpleDateFormat for "
                         "options.", "date format", default="yyyy-MM-dd HH:mm:ss:SSS")
    p.flag("hide-header", "If set, skips printing the header for the stats ")
    p.arg("timeout", "The maximum allowed time in milliseconds between returned records.", "milliseconds", "Long",
          default=10000, optional=True)
    return p


def java_date_format(pattern: str) -> Any:
    """A formatter for the SimpleDateFormat letters used in practice (y M d H h m s S a E z Z), quotes as literals."""
    tokens = re.findall(r"'[^']*'|y+|M+|d+|H+|h+|m+|s+|S+|a+|E+|z+|Z+|X+|.", pattern)

    def fmt(ms: int) -> str:
        t = datetime.datetime.fromtimestamp(ms / 1000.0).astimezone()
        out = []
        for tok in tokens:
            c = tok[0]
            n = len(tok)
            if c == "'":
                out.append(tok[1:-1] or "'")
            elif c == "y":
                out.append(str(t.year)[-2:] if n == 2 else str(t.year).zfill(n))
            elif c == "M":
                out.append(t.strftime("%B") if n >= 4 else t.strftime("%b") if n == 3 else str(t.month).zfill(n))
            elif c == "d":
                out.append(str(t.day).zfill(n))
            elif c == "H":
                out.append(str(t.hour).zfill(n))
            elif c == "h":
                out.append(str(t.hour % 12 or 12).zfill(n))
            elif c == "m":
                out.append(str(t.minute).zfill(n))
            elif c == "s":
                out.append(str(t.second).zfill(n))
            elif c == "S":
                out.append(str(t.microsecond // 1000).zfill(n))
            elif c == "a":
                out.append(t.strftime("%p"))
            elif c == "E":
                out.append(t.strftime("%A") if n >= 4 else t.strftime("%a"))
            elif c in "zZX":
                out.append(t.strftime("%Z") if c == "z" else t.strftime("%z"))
            else:
                out.append(tok)
        return "".join(out)
    return fmt


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    from confluent_kafka import Consumer, KafkaException

    o = parser.parse(argv)
    parser.check_required(o, "topic", "messages")
    bootstrap = o.value("bootstrap-server") or o.value("broker-list")
    if not bootstrap:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    props: Dict[str, str] = {}
    if o.has("consumer.config"):
        props.update(load_properties_file(o.value("consumer.config")))
    props.setdefault("group.id", o.value("group"))
    if o.has("group"):
        props["group.id"] = o.value("group")
    props["receive.buffer.bytes"] = str(o.value("socket-buffer-size"))
    props["max.partition.fetch.bytes"] = str(o.value("fetch-size"))
    props["auto.offset.reset"] = "latest" if o.has("from-latest") else "earliest"
    props.setdefault("client.id", "perf-consumer-client")
    cfg = build_client_config(props, "consumer", bootstrap)
    conf = dict(cfg.librdkafka)
    conf["enable.auto.commit"] = False if "enable.auto.commit" not in props else conf["enable.auto.commit"]
    stats_box: Dict[str, Any] = {}
    if o.has("print-metrics"):
        conf["statistics.interval.ms"] = 1000
        conf["stats_cb"] = lambda s: stats_box.__setitem__("last", s)
    fmt = java_date_format(o.value("date-format"))
    detailed = o.has("show-detailed-stats")
    count = o.value("messages")
    timeout_ms = o.value("timeout")
    interval_ms = o.value("reporting-interval")
    if not o.has("hide-header"):
        print(("time, threadId, " if detailed else "start.time, end.time, ")
              + "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, " + _HEADER)
    join = {"start": time.time(), "ms": 0, "round": 0}

    def on_assign(consumer: Any, partitions: Any) -> None:
        elapsed = int((time.time() - join["start"]) * 1000)
        join["ms"] += elapsed
        join["round"] += elapsed

    def on_revoke(consumer: Any, partitions: Any) -> None:
        join["start"] = time.time()

    try:
        from .client_log import with_kafka_log

        consumer = Consumer(with_kafka_log(conf, "Consumer", "perf-consumer-client", conf.get("group.id")))
    except KafkaException as e:
        raise CommandError(f"org.apache.kafka.common.KafkaException: {e.args[0].str() if e.args else e}") from None
    start_ms = int(time.time() * 1000)
    consumer.subscribe([o.value("topic")], on_assign=on_assign, on_revoke=on_revoke)
    messages = bytes_read = last_messages = last_bytes = 0
    last_report = last_consumed = int(time.time() * 1000)
    now = last_consumed
    try:
        while messages < count and now - last_consumed <= timeout_ms:
            batch = consumer.consume(min(10000, max(1, count - messages)), 0.1)
            now = int(time.time() * 1000)
            if batch:
                last_consumed = now
            for m in batch:
                if m.error():
                    continue
                messages += 1
                bytes_read += len(m.key() or b"") + len(m.value() or b"")
                if now - last_report >= interval_ms:
                    if detailed:
                        _progress(fmt, bytes_read, last_bytes, messages, last_messages, last_report, now,
                                  join["round"])
                    join["round"] = 0
                    last_report, last_messages, last_bytes = now, messages, bytes_read
        if messages < count:
            print(f"WARNING: Exiting before consuming the expected number of messages: timeout ({timeout_ms} ms) "
                  "exceeded. You can use the --timeout option to increase the timeout.")
    except KeyboardInterrupt:
        pass
    end_ms = int(time.time() * 1000)
    if not detailed:
        elapsed_s = max((end_ms - start_ms) / 1000.0, 1e-9)
        fetch_ms = max(end_ms - start_ms - join["ms"], 1)
        mb = bytes_read / _MB
        print(f"{fmt(start_ms)}, {fmt(end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, {messages}, {messages / elapsed_s:.4f}, "
              f"{join['ms']}, {fetch_ms}, {mb / (fetch_ms / 1000.0):.4f}, {messages / (fetch_ms / 1000.0):.4f}")
    if o.has("print-metrics"):
        consumer.poll(1.1)
        print_metrics(consumer_metrics(stats_box.get("last"), props["client.id"], messages, bytes_read))
    consumer.close()
    return 0


def _progress(fmt: Any, bytes_read: int, last_bytes: int, messages: int, last_messages: int, start_ms: int,
              end_ms: int, join_ms: int) -> None:
    """Kafka's printConsumerProgress: basic and extended interval figures on one line."""
    elapsed = max(end_ms - start_ms, 1)
    total_mb = bytes_read / _MB
    interval_mb = (bytes_read - last_bytes) / _MB
    interval_msgs = messages - last_messages
    fetch_ms = max(elapsed - join_ms, 1)
    print(f"{fmt(end_ms)}, 0, {total_mb:.4f}, {1000.0 * interval_mb / elapsed:.4f}, {messages}, "
          f"{interval_msgs / elapsed * 1000.0:.4f}, {join_ms}, {fetch_ms}, {interval_mb * 1000.0 / fetch_ms:.4f}, "
          f"{interval_msgs * 1000.0 / fetch_ms:.4f}", flush=True)


def consumer_metrics(stats_json: Optional[str], client_id: str, messages: int, nbytes: int) -> Dict[str, Any]:
    tags = f"{{client-id={client_id}}}"
    out: Dict[str, Any] = {f"consumer-fetch-manager-metrics:records-consumed-total:{tags}": float(messages),
                           f"consumer-fetch-manager-metrics:bytes-consumed-total:{tags}": float(nbytes)}
    if stats_json:
        s = json.loads(stats_json)
        out[f"consumer-metrics:request-total:{tags}"] = float(s.get("tx", 0))
        out[f"consumer-metrics:response-total:{tags}"] = float(s.get("rx", 0))
        out[f"consumer-metrics:incoming-byte-total:{tags}"] = float(s.get("rx_bytes", 0))
        out[f"consumer-metrics:outgoing-byte-total:{tags}"] = float(s.get("tx_bytes", 0))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
