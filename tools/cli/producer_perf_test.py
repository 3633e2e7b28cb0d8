"""kafka-producer-perf-test.sh: a producer load test with Kafka 3.9's ProducerPerformance flags and output.

    kafka-producer-perf-test.sh --topic t --num-records 1000000 --record-size 100 --throughput -1 \\
        --producer-props bootstrap.servers=localhost:9092 acks=all [--producer.config p.properties] \\
        [--payload-file f --payload-delimiter ,] [--payload-monotonic] [--print-metrics] \\
        [--transactional-id id --transaction-duration-ms 1000]

Every 5 s it prints Kafka's progress line (``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max
latency.``) and at the end Kafka's summary with the 50th/95th/99th/99.9th latency percentiles (latency = send to
acknowledgement, sampled as Kafka samples it; MB = 2^20 bytes). Payloads are as Kafka makes them: random upper-case
letters of ``--record-size``, a random line of ``--payload-file``, or the record's index. ``--throughput`` caps
records/s (-1: no cap). ``--transaction-duration-ms`` > 0 wraps the sends in transactions committed at that age.

The producer is confluent-kafka's (``--producer-props``/``--producer.config`` in Kafka's Java names, see
``tools.cli.client_config``); ``--print-metrics`` prints the producer's counters under Kafka's metric names, those
librdkafka keeps. The parser is argparse, shaped like Kafka's argparse4j one: no arguments print the help and exit
0, ``--help`` prints it and exits 1, a bad argument prints the usage and the error on stderr and exits 1.

``tools/producer_perf.py`` (the benchmarks' module API) is separate and unchanged.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any, Dict, List, NoReturn, Optional, Sequence

from tools import invoked_as, missing_module_line

from .client_config import build_client_config, load_properties_file
from .options import CommandError

PROG = "producer-performance"
DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"
_MB = 1024.0 * 1024.0
_REPORTING_INTERVAL_MS = 5000


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(1)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="This tool is used to verify the producer performance.", add_help=False,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-h", "--help", action="store_true", help="show this help message and exit")
    p.add_argument("--topic", required=True, metavar="TOPIC", help="produce messages to this topic")
    p.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS",
                   help="number of messages to produce")
    p.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER",
                   help="provides delimiter to be used when --payload-file is provided. Defaults to new line. Note "
                        "that this parameter will be ignored if --payload-file is not provided. (default: \\n)")
    p.add_argument("--throughput", required=True, type=float, metavar="THROUGHPUT",
                   help="throttle maximum message throughput to *approximately* THROUGHPUT messages/sec. Set this "
                        "to -1 to disable throttling.")
    p.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                   help="kafka producer related configuration properties like bootstrap.servers,client.id etc. These "
                        "configs take precedence over those passed via --producer.config.")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE",
                   help="producer config properties file.")
    p.add_argument("--print-metrics", action="store_true", help="print out metrics at the end of the test. "
                                                                "(default: false)")
    p.add_argument("--transactional-id", default=DEFAULT_TRANSACTIONAL_ID, metavar="TRANSACTIONAL-ID",
                   help="The transactionalId to use if transaction-duration-ms is > 0. Useful when testing the "
                        f"performance of concurrent transactions. (default: {DEFAULT_TRANSACTIONAL_ID})")
    p.add_argument("--transaction-duration-ms", type=int, default=0, metavar="TRANSACTION-DURATION",
                   help="The max age of each transaction. The commitTransaction will be called after this time has "
                        "elapsed. Transactions are only enabled if this value is positive. (default: 0)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--record-size", type=int, metavar="RECORD-SIZE",
                   help="message size in bytes. Note that you must provide exactly one of --record-size or "
                        "--payload-file or --payload-monotonic.")
    g.add_argument("--payload-file", metavar="PAYLOAD-FILE",
                   help="file to read the message payloads from. This works only for UTF-8 encoded text files. "
                        "Payloads will be read from this file and a payload will be randomly selected when sending "
                        "messages.")
    g.add_argument("--payload-monotonic", action="store_true",
                   help="payload is monotonically increasing integer. (default: false)")
    return p


class Stats:
    """Kafka's ProducerPerformance.Stats: windowed progress lines and the final summary with sampled percentiles."""

    def __init__(self, num_records: int, reporting_interval_ms: int = _REPORTING_INTERVAL_MS) -> None:
        self.start = time.monotonic()
        self.window_start = self.start
        self.iteration = 0
        self.sampling = max(1, num_records // max(1, min(num_records, 500000)))
        self.latencies: List[int] = []
        self.max_latency = 0
        self.total_latency = 0
        self.window_count = self.window_max_latency = self.window_total_latency = self.window_bytes = 0
        self.count = self.bytes = 0
        self.reporting_interval_ms = reporting_interval_ms

    def record(self, latency_ms: int, size: int, now: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency_ms
        self.window_max_latency = max(self.window_max_latency, latency_ms)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.iteration += 1
        if (now - self.window_start) * 1000 >= self.reporting_interval_ms:
            self.print_window(now)
            self.window_start = now
            self.window_count = self.window_max_latency = self.window_total_latency = self.window_bytes = 0

    def print_window(self, now: float) -> None:
        elapsed_ms = max((now - self.window_start) * 1000.0, 1e-9)
        rate = 1000.0 * self.window_count / elapsed_ms
        mb = 1000.0 * self.window_bytes / elapsed_ms / _MB
        avg = self.window_total_latency / self.window_count if self.window_count else 0.0
        print(f"{self.window_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), {avg:.1f} ms avg "
              f"latency, {float(self.window_max_latency):.1f} ms max latency.", flush=True)

    def summary(self) -> str:
        elapsed_ms = max((time.monotonic() - self.start) * 1000.0, 1e-9)
        rate = 1000.0 * self.count / elapsed_ms
        mb = 1000.0 * self.bytes / elapsed_ms / _MB
        avg = self.total_latency / self.count if self.count else 0.0
        lat = sorted(self.latencies)

        def pct(q: float) -> int:
            return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0
        return (f"{self.count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), {avg:.2f} ms avg latency, "
                f"{float(self.max_latency):.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
                f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.")


class Throttler:
    """Kafka's ThroughputThrottler: sleep when ahead of ``target`` records/s (no cap when negative)."""

    def __init__(self, target: float, start: float) -> None:
        self.target = target
        self.start = start

    def throttle(self, sent: int, now: float) -> None:
        if self.target <= 0:
            return
        ahead = sent / self.target - (now - self.start)
        if ahead > 0:
            time.sleep(ahead)


def payload_source(a: argparse.Namespace) -> Any:
    """A function index -> payload bytes, as Kafka builds payloads."""
    if a.record_size is not None:
        data = bytes(random.randrange(26) + 65 for _ in range(a.record_size))
        return lambda i: data
    if a.payload_monotonic:
        return lambda i: str(i).encode()
    delimiter = a.payload_delimiter.encode().decode("unicode_escape")
    try:
        with open(a.payload_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CommandError(f"java.nio.file.NoSuchFileException: {a.payload_file}" if isinstance(e, FileNotFoundError)
                           else str(e)) from None
    payloads = [p.encode("utf-8") for p in text.split(delimiter) if p]
    if not payloads:
        raise CommandError(f"File does not contain any payloads: {a.payload_file}")
    print(f"Reading payloads from: {a.payload_file}")
    print(f"Number of messages read: {len(payloads)}")
    return lambda i: random.choice(payloads)


def producer_props(a: argparse.Namespace) -> Dict[str, str]:
    if a.producer_props is None and a.producer_config is None:
        raise argparse.ArgumentError(None, "Either --producer-props or --producer.config must be specified.")
    props: Dict[str, str] = {}
    if a.producer_config:
        props.update(load_properties_file(a.producer_config))
    for item in a.producer_props or []:
        key, eq, value = item.partition("=")
        if not eq:
            raise CommandError(f"Invalid property: {item}")
        props[key.strip()] = value.strip()
    props.setdefault("client.id", "perf-producer-client")
    if a.transaction_duration_ms > 0:
        props.setdefault("transactional.id", a.transactional_id)
    return props


def run(a: argparse.Namespace, out: Any = None) -> int:
    from confluent_kafka import KafkaException, Producer

    props = producer_props(a)
    cfg = build_client_config(props, "producer")
    conf = dict(cfg.librdkafka)
    conf.setdefault("partitioner", "murmur2_random")
    stats_box: Dict[str, Any] = {}
    if a.print_metrics:
        conf["statistics.interval.ms"] = 1000
        conf["stats_cb"] = lambda s: stats_box.__setitem__("last", s)
    from .client_log import with_kafka_log

    producer = Producer(with_kafka_log(conf, "Producer", "perf-producer-client"))
    transactional = a.transaction_duration_ms > 0 and "transactional.id" in conf
    if transactional:
        producer.init_transactions()
        producer.begin_transaction()
    payload = payload_source(a)
    stats = Stats(a.num_records)
    errors: List[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err.str())
            if len(errors) <= 10:
                print(f"org.apache.kafka.common.KafkaException: {err.str()}", file=sys.stderr)
            return
        latency_ms = int((msg.latency() or 0.0) * 1000)
        stats.record(latency_ms, len(msg.value() or b""), time.monotonic())

    throttler = Throttler(a.throughput, time.monotonic())
    tx_start = time.monotonic()
    try:
        for i in range(a.num_records):
            if transactional and (time.monotonic() - tx_start) * 1000 >= a.transaction_duration_ms:
                producer.commit_transaction()
                producer.begin_transaction()
                tx_start = time.monotonic()
            value = payload(i)
            while True:
                try:
                    producer.produce(a.topic, value=value, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            throttler.throttle(i + 1, time.monotonic())
        if transactional:
            producer.commit_transaction()
        left = producer.flush(max(60.0, cfg.request_timeout_ms / 1000.0))
    except KafkaException as e:
        raise CommandError(f"org.apache.kafka.common.KafkaException: {e.args[0].str() if e.args else e}") from None
    print(stats.summary(), flush=True)
    if a.print_metrics:
        print_metrics(producer_metrics(stats_box.get("last"), conf.get("client.id", "rdkafka"), stats, len(errors)))
    return 1 if left or errors else 0


def producer_metrics(stats_json: Optional[str], client_id: str, stats: Stats, errors: int) -> Dict[str, Any]:
    """Kafka's producer metric names for the counters librdkafka and this tool keep."""
    tags = f"{{client-id={client_id}}}"
    out: Dict[str, Any] = {
        f"producer-metrics:record-send-total:{tags}": float(stats.count),
        f"producer-metrics:record-error-total:{tags}": float(errors),
        f"producer-metrics:request-latency-max:{tags}": float(stats.max_latency),
    }
    if stats_json:
        s = json.loads(stats_json)
        out[f"producer-metrics:request-total:{tags}"] = float(s.get("tx", 0))
        out[f"producer-metrics:response-total:{tags}"] = float(s.get("rx", 0))
        out[f"producer-metrics:outgoing-byte-total:{tags}"] = float(s.get("tx_bytes", 0))
        out[f"producer-metrics:incoming-byte-total:{tags}"] = float(s.get("rx_bytes", 0))
        rtts = [b["rtt"]["avg"] / 1000.0 for b in s.get("brokers", {}).values() if b.get("rtt", {}).get("cnt")]
        if rtts:
            out[f"producer-metrics:request-latency-avg:{tags}"] = sum(rtts) / len(rtts)
    return out


def print_metrics(metrics: Dict[str, Any]) -> None:
    """Kafka's ToolsUtils.printMetrics layout."""
    if not metrics:
        return
    width = max(len(k) for k in metrics)
    print(f"\n{'Metric Name':<{width}}   Value")
    for name in sorted(metrics):
        value = metrics[name]
        print(f"{name:<{width}} : {value:.3f}" if isinstance(value, float) else f"{name:<{width}} : {value}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args:
        parser.print_help()
        return 0
    if "-h" in args or "--help" in args:
        parser.print_help()
        return 1
    try:
        a = parser.parse_args(args)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        return run(a)
    except argparse.ArgumentError as e:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: {e.message}", file=sys.stderr)
        return 1
    except CommandError as e:
        print(str(e), file=sys.stderr)
        return e.exit_code
    except ModuleNotFoundError as e:
        print(missing_module_line(e, invoked_as("tools.cli.producer_perf_test")), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
