"""The project's Kafka tools (bin/kafka-*.sh, run as subprocesses) against the project's broker: output in Kafka's
format and the effect on the broker, checked with a stock client (confluent-kafka)."""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.protocol.api import ApiKey
from tests.harness.broker_process import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.broker.wire import RawClient
from tests.integration.tools.kafka_tools import run_tool

pytestmark = pytest.mark.slow


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def produce(bootstrap: str, topic: str, records: List[Tuple[bytes | None, bytes]], partition: int | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
    for key, value in records:
        kwargs = {"key": key, "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        p.produce(topic, **kwargs)
    assert p.flush(30) == 0


def committed(bootstrap: str, group: str) -> Dict[Tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    r = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in r.topic_partitions if tp.offset >= 0}


def commit(bootstrap: str, group: str, offsets: Dict[Tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def ok(run, *needles: str):
    assert run.code == 0, f"exit {run.code}\nstdout: {run.stdout}\nstderr: {run.stderr}"
    for n in needles:
        assert n in run.stdout, f"{n!r} not in {run.stdout!r}"
    return run


# ------------------------------------------------------------------------------------------------ kafka-topics
def test_topics_create_describe_alter_delete(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    t = topic_name("tp")
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "3",
                "--replication-factor", "1", "--config", "retention.ms=100000", "--config", "cleanup.policy=delete"),
       f"Created topic {t}.")
    again = run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "1")
    assert again.code == 1 and again.stdout == f"Error while executing topic command : Topic '{t}' already exists.\n"
    assert ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--if-not-exists")).stdout == ""

    d = ok(run_tool("topics", f"--bootstrap-server={bs}", "--describe", "--topic", t)).lines()
    assert re.fullmatch(rf"Topic: {t}\tTopicId: [A-Za-z0-9_-]{{22}}\tPartitionCount: 3\tReplicationFactor: 1\t"
                        r"Configs: cleanup.policy=delete,retention.ms=100000", d[0]), d[0]
    assert d[1:] == [f"\tTopic: {t}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A"
                     for p in range(3)]

    ok(run_tool("topics", "--bootstrap-server", bs, "--alter", "--topic", t, "--partitions", "5"))
    assert len(AdminClient({"bootstrap.servers": bs}).list_topics(t, timeout=10).topics[t].partitions) == 5
    shrink = run_tool("topics", "--bootstrap-server", bs, "--alter", "--topic", t, "--partitions", "2")
    assert shrink.code == 1 and "Topic currently has 5 partitions, which is higher than the requested 2." in \
        shrink.stdout

    listed = ok(run_tool("topics", "--bootstrap-server", bs, "--list")).lines()
    assert t in listed and listed == sorted(listed)
    ok(run_tool("topics", "--bootstrap-server", bs, "--delete", "--topic", t))
    wait_for(lambda: t not in run_tool("topics", "--bootstrap-server", bs, "--list").lines(), 30, "topic deleted")
    gone = run_tool("topics", "--bootstrap-server", bs, "--delete", "--topic", t)
    assert gone.code == 1 and gone.stdout == \
        f"Error while executing topic command : Topic 'Optional[{t}]' does not exist as expected\n"
    assert ok(run_tool("topics", "--bootstrap-server", bs, "--delete", "--topic", t, "--if-exists")).stdout == ""


def test_topics_replica_assignment_reports_and_filters(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    plain, strict, dotted = topic_name("ra"), topic_name("minisr"), topic_name("x.y_z")
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", plain, "--replica-assignment", "0,0,0"),
       f"Created topic {plain}.")
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", strict, "--partitions", "2",
                "--config", "min.insync.replicas=2"))
    warned = ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", dotted))
    assert warned.lines()[0].startswith("WARNING: Due to limitations in metric names, topics with a period ('.')")
    both = f"{plain}|{strict}"
    d = ok(run_tool("topics", "--bootstrap-server", bs, "--describe", "--topic", both)).stdout
    assert f"Topic: {plain}\t" in d and "PartitionCount: 3\tReplicationFactor: 1\tConfigs: \n" in d
    # one broker, replication factor 1: nothing under-replicated or unavailable; every partition at min ISR 1,
    # the min.insync.replicas=2 topic's partitions under it
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert ok(run_tool("topics", "--bootstrap-server", bs, "--describe", "--topic", both, flag)).stdout == ""
    at_min = ok(run_tool("topics", "--bootstrap-server", bs, "--describe", "--topic", both,
                         "--at-min-isr-partitions")).lines()
    assert at_min == [f"\tTopic: {plain}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\t"
                      f"LastKnownElr: N/A" for p in range(3)]
    under = ok(run_tool("topics", "--bootstrap-server", bs, "--describe", "--topic", both,
                        "--under-min-isr-partitions")).lines()
    assert [line.split("\t")[1:3] for line in under] == [[f"Topic: {strict}", f"Partition: {p}"] for p in range(2)]
    overrides = ok(run_tool("topics", "--bootstrap-server", bs, "--describe", "--topic", both,
                            "--topics-with-overrides")).lines()
    assert len(overrides) == 1 and overrides[0].startswith(f"Topic: {strict}\t")
    assert overrides[0].endswith("Configs: min.insync.replicas=2")
    internal = run_tool("topics", "--bootstrap-server", bs, "--list", "--exclude-internal").lines()
    assert "__consumer_offsets" not in internal and plain in internal


def test_topics_command_line_errors(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    r = run_tool("topics", "--bootstrap-server", bs)
    assert r.code == 1 and r.stderr.startswith("Command must include exactly one action: --list, --describe, "
                                               "--create, --alter or --delete\nOption ")
    r = run_tool("topics", "--bootstrap-server", bs, "--list", "--bogus")
    assert r.code == 1 and r.stderr.startswith("bogus is not a recognized option\nOption")
    r = run_tool("topics", "--list")
    assert r.code == 1 and r.stderr == "--bootstrap-server must be specified\n"
    r = run_tool("topics", "--bootstrap-server", bs, "--create")
    assert r.code == 1 and r.stderr.startswith('Missing required argument "[topic]"')
    r = run_tool("topics", "--bootstrap-server", bs, "--alter", "--topic", "x", "--delete-config", "a")
    assert r.code == 1 and r.stderr.startswith("--delete-config is not supported by this broker's tools: ")
    r = run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", "y", "--partitions", "0")
    assert r.code == 1 and r.stdout == "Error while executing topic command : The partitions must be greater than 0\n"
    r = run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", "y", "--config", "foo=bar")
    assert r.code == 1 and r.stdout == "Error while executing topic command : Unknown topic config name: foo\n"
    h = run_tool("topics", "--help")
    assert h.code == 1 and h.stderr.startswith("This tool helps to create, delete, describe, or change a topic.\n")


# ------------------------------------------------------------------------------------------------ console tools
def test_console_producer_keys_headers_and_console_consumer_formatter(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    t = topic_name("cons")
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "3"))
    lines = "".join(f"h1:v{i},h2:NIL\tkey-{i % 3}\tvalue-{i}\n" for i in range(9)) + "NIL\tNIL\tNIL\n"
    ok(run_tool("console-producer", "--bootstrap-server", bs, "--topic", t, "--property", "parse.key=true",
                "--property", "parse.headers=true", "--property", "null.marker=NIL", "--compression-codec",
                "lz4", "--sync", input=lines))
    r = run_tool("console-consumer", "--bootstrap-server", bs, "--topic", t, "--from-beginning", "--max-messages",
                 "10", "--property", "print.key=true", "--property", "print.headers=true", "--property",
                 "print.partition=true", "--property", "print.offset=true", "--property", "print.timestamp=true",
                 "--property", "key.separator=|", "--timeout-ms", "30000")
    ok(r)
    assert r.stderr.strip().endswith("Processed a total of 10 messages")
    rows = r.lines()
    assert len(rows) == 10
    parsed = [re.fullmatch(r"CreateTime:(\d+)\|Partition:(\d)\|Offset:(\d+)\|(.*)\|(.*)\|(.*)", row) for row in rows]
    assert all(parsed), rows
    by_key: Dict[str, set] = {}
    for m in parsed:
        key, value = m.group(5), m.group(6)
        if value == "null":
            assert (m.group(4), key) == ("NO_HEADERS", "null")
            continue
        i = int(value.split("-")[1])
        assert m.group(4) == f"h1:v{i},h2:null" and key == f"key-{i % 3}"
        by_key.setdefault(key, set()).add(m.group(2))
    assert all(len(parts) == 1 for parts in by_key.values()), by_key  # a key always lands in one partition

    # one partition from an offset, and the default formatter (values only)
    p, off = parsed[0].group(2), parsed[0].group(3)
    one = ok(run_tool("console-consumer", "--bootstrap-server", bs, "--topic", t, "--partition", p, "--offset", off,
                      "--max-messages", "1"))
    assert one.stdout == parsed[0].group(6) + "\n" and "Processed a total of 1 messages" in one.stderr

    bad = run_tool("console-producer", "--bootstrap-server", bs, "--topic", t, "--property", "parse.key=true",
                   input="no separator here\n")
    assert bad.code == 1 and "No key separator found on line number 1: 'no separator here'" in bad.stderr


def test_console_consumer_group_include_and_timeout(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    a, b = topic_name("inc-a"), topic_name("inc-b")
    for t in (a, b):
        produce(bs, t, [(None, f"{t}-{i}".encode()) for i in range(3)])
    group = f"cc-{uuid.uuid4().hex[:6]}"
    prefix = a.split("-")[0]
    r = run_tool("console-consumer", "--bootstrap-server", bs, "--include", f"{prefix}-(a|b)-.*", "--group", group,
                 "--from-beginning", "--max-messages", "6", "--timeout-ms", "30000")
    ok(r)
    assert sorted(r.lines()) == sorted(f"{t}-{i}" for t in (a, b) for i in range(3))
    wait_for(lambda: committed(bs, group) == {(a, 0): 3, (b, 0): 3}, 20, "the console consumer's commits")
    idle = run_tool("console-consumer", "--bootstrap-server", bs, "--topic", a, "--group", group, "--timeout-ms",
                    "1500")
    assert idle.code == 0 and idle.stdout == ""
    assert "ERROR Error processing message, terminating consumer process:" in idle.stderr
    assert idle.stderr.strip().endswith("Processed a total of 0 messages")
    usage = run_tool("console-consumer", "--bootstrap-server", bs)
    assert usage.code == 1 and usage.stderr.startswith("Exactly one of --include/--topic is required. \n")


# ------------------------------------------------------------------------------------------------ consumer groups
class LiveMember:
    """A confluent-kafka consumer in a group, polling in a thread until stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "live-client",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.subscribe([topic])
        self.assigned = threading.Event()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.2)
            if self.consumer.assignment():
                self.assigned.set()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(10)
        self.consumer.close()


@pytest.fixture
def live(broker: BrokerProcess) -> Iterator[Tuple[str, str]]:
    t, g = topic_name("live"), f"live-{uuid.uuid4().hex[:6]}"
    ok(run_tool("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", t, "--partitions", "2"))
    m = LiveMember(broker.bootstrap, g, t)
    assert m.assigned.wait(30), "the live member got no assignment"
    try:
        yield t, g
    finally:
        m.close()


def test_consumer_groups_describe_an_active_group(broker: BrokerProcess, live: Tuple[str, str]) -> None:
    bs = broker.bootstrap
    t, g = live
    assert g in ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--list")).lines()
    states = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--list", "--state", "stable")).lines()
    assert states[0].split() == ["GROUP", "STATE"] and [g, "Stable"] in [s.split() for s in states[1:]]

    d = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--describe", "--group", g))
    rows = d.stdout.split("\n")
    assert rows[0] == "" and rows[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                                 "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert not d.stdout.endswith("\n")  # Kafka 3.9 starts each row with the line break
    cells = sorted(r.split() for r in rows[2:])
    assert [c[:6] for c in cells] == [[g, t, "0", "-", "0", "-"], [g, t, "1", "-", "0", "-"]]
    assert all(c[6].startswith("live-client-") and c[8] == "live-client" for c in cells)

    m = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--describe", "--group", g, "--members",
                    "--verbose")).stdout.split("\n")
    assert m[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert m[2].split()[0] == g and m[2].split()[-2:] == ["2", f"{t}(0,1)"]
    s = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--describe", "--group", g, "--state")).stdout
    assert s.split("\n")[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert s.split("\n")[2].split() == [g, bs, "(0)", "range", "Stable", "1"]
    refused = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--reset-offsets", "--group", g, "--topic", t,
                          "--to-earliest", "--execute"))
    assert refused.stdout.startswith(f"\nError: Assignments can only be reset if the group '{g}' is inactive, but "
                                     "the current state is Stable.\n")


def test_consumer_groups_reset_offsets_every_strategy(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t, g = topic_name("reset"), f"reset-{uuid.uuid4().hex[:6]}"
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "2"))
    for p in (0, 1):
        produce(bs, t, [(None, b"v%d" % i) for i in range(10)], partition=p)
    commit(bs, g, {(t, 0): 5, (t, 1): 5})
    base = ["--bootstrap-server", bs, "--reset-offsets", "--group", g]

    def reset(*args: str) -> Dict[Tuple[str, int], int]:
        r = ok(run_tool("consumer-groups", *base, *args))
        assert "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     " in r.stdout
        return committed(bs, g)

    dry = ok(run_tool("consumer-groups", *base, "--topic", t, "--to-earliest", "--dry-run"))
    assert f"{g:<30} {t:<30} {1:<10} {0:<15}" in dry.stdout and committed(bs, g) == {(t, 0): 5, (t, 1): 5}
    default_dry = run_tool("consumer-groups", *base, "--topic", t, "--to-latest")
    assert "WARN: No action will be performed as the --execute option is missing." in default_dry.stderr
    assert committed(bs, g) == {(t, 0): 5, (t, 1): 5}

    assert reset("--topic", t, "--to-earliest", "--execute") == {(t, 0): 0, (t, 1): 0}
    assert reset("--topic", t, "--to-latest", "--execute") == {(t, 0): 10, (t, 1): 10}
    assert reset("--topic", f"{t}:1", "--to-offset", "3", "--execute") == {(t, 0): 10, (t, 1): 3}
    assert reset("--all-topics", "--shift-by", "-2", "--execute") == {(t, 0): 8, (t, 1): 1}
    assert reset("--topic", t, "--to-current", "--execute") == {(t, 0): 8, (t, 1): 1}
    assert reset("--topic", t, "--to-offset", "99", "--execute") == {(t, 0): 10, (t, 1): 10}  # clamped to the end
    assert reset("--topic", t, "--by-duration", "P1D", "--execute") == {(t, 0): 0, (t, 1): 0}
    future = ok(run_tool("consumer-groups", *base, "--topic", t, "--to-datetime", "2999-01-01T00:00:00.000",
                         "--execute"))
    assert f"\nWarn: Partition 0 from topic {t} is empty. Falling back to latest known offset.\n" in future.stdout
    assert committed(bs, g) == {(t, 0): 10, (t, 1): 10}
    assert reset("--topic", t, "--to-datetime", "2000-01-01T00:00:00.000Z", "--execute") == {(t, 0): 0, (t, 1): 0}
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{t},0,4\n{t},1,6\n")
    assert reset("--from-file", str(plan), "--execute") == {(t, 0): 4, (t, 1): 6}

    exported = ok(run_tool("consumer-groups", *base, "--topic", t, "--to-offset", "2", "--export", "--dry-run"))
    assert sorted(exported.stdout.split()) == [f"{t},0,2", f"{t},1,2"]
    shift_none = run_tool("consumer-groups", *base, "--topic", "nosuch-topic:0", "--shift-by", "1", "--execute")
    assert shift_none.code == 1 and "Cannot shift offset for partition nosuch-topic-0 since there is no current " \
        "committed offset" in shift_none.stderr


def test_consumer_groups_delete_offsets_and_groups(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    t, g = topic_name("del"), f"del-{uuid.uuid4().hex[:6]}"
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "2"))
    commit(bs, g, {(t, 0): 0, (t, 1): 0})
    r = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--delete-offsets", "--group", g, "--topic", t))
    assert r.stdout.split("\n")[0] == f"Request succeed for deleting offsets with topic {t} group {g}"
    assert f"{t:<30} {0:<15} {'Successful':<15}" in r.stdout and f"{t:<30} {1:<15} {'Successful':<15}" in r.stdout
    assert committed(bs, g) == {}
    commit(bs, g, {(t, 0): 1})
    ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--delete", "--group", g),
       f"Deletion of requested consumer groups ('{g}') was successful.")
    missing = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--delete", "--group", g))
    assert missing.stdout == ("\nError: Deletion of some consumer groups failed:\n"
                              f"* Group '{g}' could not be deleted due to: java.util.concurrent.ExecutionException: "
                              "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.\n")
    nothing = ok(run_tool("consumer-groups", "--bootstrap-server", bs, "--describe", "--group", g))
    assert nothing.stdout == f"\nError: Consumer group '{g}' does not exist.\n"


# ------------------------------------------------------------------------------------------------ kafka-configs
def test_configs_topics_and_brokers(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = topic_name("cfg")
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t))
    base = ["--bootstrap-server", bs]
    ok(run_tool("configs", *base, "--alter", "--entity-type", "topics", "--entity-name", t, "--add-config",
                "segment.bytes=1048576,cleanup.policy=[compact,delete]"), f"Completed updating config for topic {t}.")
    d = ok(run_tool("configs", *base, "--describe", "--entity-type", "topics", "--entity-name", t)).lines()
    assert d == [f"Dynamic configs for topic {t} are:",
                 "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy="
                 "compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
                 "  segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1048576, "
                 "DEFAULT_CONFIG:log.segment.bytes=1073741824}"]
    extra = tmp_path / "extra.properties"
    extra.write_text("max.message.bytes=4000\n")
    ok(run_tool("configs", *base, "--alter", "--topic", t, "--add-config-file", str(extra), "--delete-config",
                "cleanup.policy"))
    assert "  max.message.bytes=4000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=4000, " \
           "DEFAULT_CONFIG:message.max.bytes=1048588}" in \
        ok(run_tool("configs", *base, "--describe", "--topic", t)).lines()
    d = ok(run_tool("configs", *base, "--describe", "--entity-type", "topics", "--entity-name", t, "--all")).lines()
    assert d[0] == f"All configs for topic {t} are:" and len(d) > 30
    assert "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}" in d
    bad = run_tool("configs", *base, "--alter", "--entity-type", "topics", "--entity-name", t, "--delete-config",
                   "retention.ms")
    assert bad.code == 1 and bad.stderr == "Invalid config(s): retention.ms\n"
    unknown = run_tool("configs", *base, "--alter", "--entity-type", "topics", "--entity-name", t, "--add-config",
                       "foo=bar")
    assert unknown.code == 1 and unknown.stderr.endswith(
        "org.apache.kafka.common.errors.InvalidConfigurationException: Unknown topic config name: foo\n")

    ok(run_tool("configs", *base, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                "log.cleaner.threads=2"), "Completed updating default config for brokers in the cluster.")
    ok(run_tool("configs", *base, "--alter", "--entity-type", "brokers", "--entity-name", "0", "--add-config",
                "log.cleaner.threads=3"), "Completed updating config for broker 0.")
    d = ok(run_tool("configs", *base, "--describe", "--entity-type", "brokers")).lines()
    assert d == ["Dynamic configs for broker 0 are:",
                 "  log.cleaner.threads=3 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=3, "
                 "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}",
                 "Default configs for brokers in the cluster are:",
                 "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
                 "log.cleaner.threads=2}"]
    ok(run_tool("configs", *base, "--alter", "--broker", "0", "--delete-config", "log.cleaner.threads"))
    ok(run_tool("configs", *base, "--alter", "--broker-defaults", "--delete-config", "log.cleaner.threads"))
    assert ok(run_tool("configs", *base, "--describe", "--entity-type", "brokers", "--entity-name", "0")).lines() == \
        ["Dynamic configs for broker 0 are:"]
    loggers = ok(run_tool("configs", *base, "--describe", "--entity-type", "broker-loggers", "--entity-name", "0"))
    assert loggers.lines()[0] == "Dynamic configs for broker-logger 0 are:" and len(loggers.lines()) > 1


def test_configs_quotas_and_scram_credentials(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    base = ["--bootstrap-server", bs]
    user = f"u{uuid.uuid4().hex[:6]}"
    ok(run_tool("configs", *base, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
                "producer_byte_rate=10485760,consumer_byte_rate=2048"), f"Completed updating config for user {user}.")
    ok(run_tool("configs", *base, "--alter", "--entity-type", "users", "--entity-name", user, "--entity-type",
                "clients", "--entity-name", "c1", "--add-config", "request_percentage=50"))
    ok(run_tool("configs", *base, "--alter", "--entity-type", "clients", "--entity-default", "--add-config",
                "producer_byte_rate=1000"), "Completed updating default config for clients in the cluster.")
    ok(run_tool("configs", *base, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=pw],SCRAM-SHA-512=[password=pw]"))
    d = ok(run_tool("configs", *base, "--describe", "--entity-type", "users", "--entity-name", user)).lines()
    assert d == [f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0, "
                 "producer_byte_rate=1.048576E7",
                 f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192, "
                 "SCRAM-SHA-512=iterations=4096"]
    d = ok(run_tool("configs", *base, "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type",
                    "clients")).lines()
    assert d == [f"Quota configs for user-principal '{user}', client-id 'c1' are request_percentage=50.0"]
    assert "Quota configs for the default client-id are producer_byte_rate=1000.0" in \
        ok(run_tool("configs", *base, "--describe", "--entity-type", "clients")).lines()
    both = run_tool("configs", *base, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
                    "producer_byte_rate=1,SCRAM-SHA-256=[password=x]")
    assert both.code == 1 and both.stderr == \
        "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server.\n"
    ok(run_tool("configs", *base, "--alter", "--entity-type", "users", "--entity-name", user, "--delete-config",
                "SCRAM-SHA-512"))
    ok(run_tool("configs", *base, "--alter", "--entity-type", "users", "--entity-name", user, "--delete-config",
                "producer_byte_rate"))
    assert ok(run_tool("configs", *base, "--describe", "--entity-type", "users", "--entity-name", user)).lines() == \
        [f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0",
         f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192"]
    ok(run_tool("configs", *base, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.9", "--add-config",
                "connection_creation_rate=10"))
    assert "Quota configs for ip '127.0.0.9' are connection_creation_rate=10.0" in \
        ok(run_tool("configs", *base, "--describe", "--entity-type", "ips")).lines()
    ok(run_tool("configs", *base, "--alter", "--entity-type", "clients", "--entity-default", "--delete-config",
                "producer_byte_rate"))
    zk = run_tool("configs", "--zookeeper", "localhost:2181", "--describe", "--entity-type", "users")
    assert zk.code == 1 and zk.stderr.startswith("--zookeeper is not supported by this broker's tools: ")


# ------------------------------------------------------------------------------------------------ offsets, records
def test_get_offsets_and_delete_records(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = topic_name("off")
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "2"))
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    now = int(time.time() * 1000)
    for i in range(5):  # increasing timestamps: the max-timestamp record is the last one
        p.produce(t, value=b"x", partition=0, timestamp=now - 5000 + i * 1000)
    assert p.flush(30) == 0
    assert ok(run_tool("get-offsets", "--bootstrap-server", bs, "--topic", t)).lines() == [f"{t}:0:5", f"{t}:1:0"]
    assert ok(run_tool("get-offsets", "--bootstrap-server", bs, "--topic-partitions", f"{t}:0",
                       "--time", "-3")).lines() == [f"{t}:0:4"]
    assert ok(run_tool("get-offsets", "--bootstrap-server", bs, "--topic", t, "--partitions", "0",
                       "--time", "9999999999999")).lines() == []
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 2},
                                               {"topic": t, "partition": 1, "offset": -1}], "version": 1}))
    r = ok(run_tool("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec)))
    assert r.lines()[:2] == ["Executing records delete operation", "Records delete operation completed:"]
    assert sorted(r.lines()[2:]) == [f"partition: {t}-0\tlow_watermark: 2", f"partition: {t}-1\tlow_watermark: 0"]
    assert ok(run_tool("get-offsets", "--bootstrap-server", bs, "--topic", t, "--time", "earliest")).lines() == \
        [f"{t}:0:2", f"{t}:1:0"]
    none = run_tool("get-offsets", "--bootstrap-server", bs, "--topic", "no-such-topic-at-all")
    assert none.code == 1 and none.stderr == \
        "Error occurred: Could not match any topic-partitions with the specified filters\n"


def test_broker_api_versions_lists_what_the_broker_advertises(broker: BrokerProcess) -> None:
    r = ok(run_tool("broker-api-versions", "--bootstrap-server", broker.bootstrap))
    lines = r.lines()
    assert lines[0] == f"{broker.bootstrap} (id: 0 rack: null) -> (" and lines[-1] == ")"
    with RawClient(broker.bootstrap) as c:
        advertised = {k.api_key: (k.min_version, k.max_version) for k in c.request(ApiKey.API_VERSIONS, 3, {}).api_keys}
    for key, (lo, hi) in advertised.items():
        name = ApiKey(key).name.title().replace("_", "")
        assert any(re.fullmatch(rf"\t\w+\({key}\): {lo}( to {hi})? \[usable: \d+\],?", line) for line in lines), name
    assert "\tDescribeQuorum(55): UNSUPPORTED," in lines


# ------------------------------------------------------------------------------------------------ perf tests
def test_perf_tests_with_kafkas_flags(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    t = topic_name("perf")
    ok(run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "2"))
    p = ok(run_tool("producer-perf-test", "--topic", t, "--num-records", "3000", "--record-size", "100",
                    "--throughput", "-1", "--producer-props", f"bootstrap.servers={bs}", "acks=all", "linger.ms=5",
                    "--print-metrics"))
    assert re.search(r"^3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max "
                     r"latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.$", p.stdout, re.M), p.stdout
    assert re.search(r"^producer-metrics:record-send-total:\{client-id=perf-producer-client\} +: 3000\.000$",
                     p.stdout, re.M)
    offsets = ok(run_tool("get-offsets", "--bootstrap-server", bs, "--topic", t)).lines()
    assert sum(int(line.rsplit(":", 1)[1]) for line in offsets) == 3000
    c = ok(run_tool("consumer-perf-test", "--bootstrap-server", bs, "--topic", t, "--messages", "3000",
                    "--timeout", "30000"))
    assert c.lines()[0] == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                            "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    cells = c.lines()[1].split(", ")
    assert cells[2] == f"{3000 * 100 / 2 ** 20:.4f}" and cells[4] == "3000"
    detailed = ok(run_tool("consumer-perf-test", "--bootstrap-server", bs, "--topic", t, "--messages", "3000",
                           "--show-detailed-stats", "--reporting-interval", "1", "--hide-header"))
    assert detailed.lines() and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, 0, [\d.]+, [\d.]+, \d+, "
                                                 r"[\d.]+, \d+, \d+, [\d.]+, [\d.]+", line) for line in detailed.lines())
    tx = topic_name("txperf")
    ok(run_tool("producer-perf-test", "--topic", tx, "--num-records", "300", "--payload-monotonic", "--throughput",
                "-1", "--producer-props", f"bootstrap.servers={bs}", "--transaction-duration-ms", "50",
                "--transactional-id", f"perf-{tx}"), "300 records sent, ")
    read = ok(run_tool("console-consumer", "--bootstrap-server", bs, "--topic", tx, "--from-beginning",
                       "--isolation-level", "read_committed", "--max-messages", "300", "--timeout-ms", "30000"))
    assert sorted(int(v) for v in read.lines()) == list(range(300))  # every committed record, payloads 0..299
    usage = run_tool("producer-perf-test", "--topic", t, "--num-records", "1", "--throughput", "-1")
    assert usage.code == 1 and usage.stderr.startswith("usage: producer-performance")
    assert "error: one of the arguments --record-size --payload-file --payload-monotonic is required" in usage.stderr


def test_run_class_maps_kafkas_class_names(broker: BrokerProcess) -> None:
    listed = run_tool("run-class", "kafka.admin.TopicCommand", "--bootstrap-server", broker.bootstrap, "--list")
    assert listed.code == 0 and "__consumer_offsets" in listed.lines()
    other = run_tool("run-class", "kafka.tools.DumpLogSegments", "--files", "x")
    assert other.code == 1 and other.stderr.startswith("kafka.tools.DumpLogSegments is not available in this "
                                                       "broker's tools")
