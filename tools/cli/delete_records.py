"""kafka-delete-records.sh: delete the records of partitions below given offsets, as Kafka 3.9's
DeleteRecordsCommand.

    kafka-delete-records.sh --bootstrap-server localhost:9092 --offset-json-file offsets.json

with ``{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}`` (offset -1 means the high
watermark). Prints ``Executing records delete operation``, ``Records delete operation completed:`` and per
partition ``partition: foo-1<TAB>low_watermark: 1`` or ``partition: foo-1<TAB>error: <exception>``, in the order
of the Java HashMap Kafka's tool collects them in.

Built on confluent-kafka's AdminClient (DeleteRecords to each leader). Difference from Kafka: a partition that
does not exist fails at once with UnknownTopicOrPartitionException, where Kafka's admin client retries until
its ``default.api.timeout.ms`` and then reports a TimeoutException.
"""
from __future__ import annotations

import json
import sys
from typing import Any, List, Optional, Sequence, Tuple

from .command import admin_client, client_config, kafka_error_code, kafka_error_text, tool_main
from .java_format import exception_line, hashmap_order, topic_partition_hash
from .options import CommandError, OptionParser

SUMMARY = "This tool helps to delete records of the given partitions down to the specified offset."


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("bootstrap-server", "REQUIRED: The server to connect to.", "server(s) to use for bootstrapping")
    p.arg("offset-json-file", "REQUIRED: The JSON file with offset per partition. The format to use is:\n"
                              "{\"partitions\":\n  [{\"topic\": \"foo\", \"partition\": 1, \"offset\": 1}],\n"
                              " \"version\":1\n}", "Offset json file path")
    p.arg("command-config", "A property file containing configs to be passed to Admin Client.",
          "command config property file path")
    return p


def parse_offsets(text: str) -> List[Tuple[str, int, int]]:
    """(topic, partition, offset) from Kafka's offset JSON; errors as Kafka words them."""
    try:
        data = json.loads(text)
    except ValueError:
        raise CommandError("The input string is not a valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise CommandError("Missing partitions field") if isinstance(data, dict) else \
            CommandError("The input string is not a valid JSON")
    version = data.get("version", 1)
    if version != 1:
        raise CommandError(f"Not supported version field value {version}")
    out = []
    for entry in data["partitions"]:
        try:
            out.append((str(entry["topic"]), int(entry["partition"]), int(entry["offset"])))
        except (KeyError, TypeError, ValueError):
            raise CommandError(f"Invalid partition entry: {json.dumps(entry)}") from None
    seen = set()
    dups = []
    for t, p, _ in out:
        if (t, p) in seen and f"{t}-{p}" not in dups:
            dups.append(f"{t}-{p}")
        seen.add((t, p))
    if dups:
        raise CommandError(f"Offset json file contains duplicate topic partitions: {','.join(dups)}")
    return out


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    from confluent_kafka import TopicPartition

    o = parser.parse(argv)
    parser.check_required(o, "bootstrap-server", "offset-json-file")
    try:
        with open(o.value("offset-json-file"), encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CommandError(f"java.nio.file.NoSuchFileException: {o.value('offset-json-file')}"
                           if isinstance(e, FileNotFoundError) else str(e)) from None
    entries = parse_offsets(text)
    cfg = client_config(o)
    admin = admin_client(cfg)
    timeout_s = cfg.default_api_timeout_ms / 1000.0
    print("Executing records delete operation")
    futures = admin.delete_records([TopicPartition(t, p, off) for t, p, off in entries],
                                   request_timeout=timeout_s, operation_timeout=cfg.request_timeout_ms / 1000.0)
    results: List[Tuple[Tuple[str, int], str]] = []
    for tp, f in futures.items():
        key = (tp.topic, tp.partition)
        try:
            r: Any = f.result(timeout=timeout_s + 5)
            results.append((key, f"low_watermark: {r.low_watermark}"))
        except Exception as e:
            code = kafka_error_code(e)
            if code is not None and code > 0:
                results.append((key, f"error: {exception_line(code)}"))
            elif code == -190:  # librdkafka's _UNKNOWN_PARTITION: Kafka's broker would answer this
                results.append((key, f"error: {exception_line(3)}"))
            else:
                results.append((key, f"error: {kafka_error_text(e)}"))
    print("Records delete operation completed:")
    for (t, p), text in hashmap_order(results, key=lambda r: r[0], hash_fn=lambda k: topic_partition_hash(*k)):
        print(f"partition: {t}-{p}\t{text}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
