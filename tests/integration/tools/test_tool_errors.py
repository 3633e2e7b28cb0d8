"""How the project's tools fail (issue 17), as Apache Kafka 3.9.1's tools fail: a bootstrap server nobody listens on,
a cluster none of whose brokers can be reached, a console producer whose records cannot be sent, a consumer-group
listing that finds no broker, and a 3-broker cluster right after kill -9 of its controller.

Each run asserts the exit status, Kafka's one final error line, no Python traceback and no raw librdkafka log line
(``%3|...|FAIL|rdkafka#...``), and bounds the connection warnings by what Kafka's client prints in the same time
(one per attempt at its reconnect backoff: 50 ms doubling to 1 s, ±20% jitter), per unreachable node. Timeouts are
made short with Kafka's own settings (``default.api.timeout.ms`` through ``--command-config``, ``--timeout``,
``--max-block-ms``), so no run waits a minute. ``test_same_lines_as_kafkas_tools`` runs Kafka's tools the same way
and compares what they print.
"""
from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import pytest

from tests.harness.broker_process import BrokerProcess
from tests.harness.cluster_ops import all_brokers_agree, controller_id, module_cluster
from tests.integration.tools.kafka_tools import ToolRun, run_kafka_batch, run_tool
from tools.cluster import ROOT, LocalCluster, free_port

pytestmark = pytest.mark.slow

_WARN = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] WARN \[(\w+) clientId=[^\]]*\] Connection to node "
                   r"(-?\d+) \(([^)]*)\) could not be established\. Node may not be available\. "
                   r"\(org\.apache\.kafka\.clients\.NetworkClient\)$")
_LOG = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (WARN|ERROR) ")
API_TIMEOUT_MS = 2500
NO_NODE = "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. Call: "


def kafka_lines_upper_bound(seconds: float) -> int:
    """The most connection warnings Kafka's client logs for one node in ``seconds``: one per attempt, attempts
    ``reconnect.backoff.ms`` (50) doubling up to ``reconnect.backoff.max.ms`` (1000) apart, jitter down to 80%."""
    t, n, delay = 0.0, 1, 50.0
    while True:
        t += delay * 0.8 / 1000.0
        if t > seconds:
            return n
        n += 1
        delay = min(delay * 2, 1000.0)


def test_the_bound_is_kafkas_rate() -> None:
    # the measurement: Kafka's kafka-topics printed about 66 warnings in 60 s
    assert 60 <= kafka_lines_upper_bound(60.0) <= 85
    assert kafka_lines_upper_bound(2.5) <= 9


@pytest.fixture(scope="module")
def dead() -> str:
    """An address nothing listens on."""
    return f"localhost:{free_port()}"


@pytest.fixture(scope="module")
def fast_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tool-errors") / "fast.properties"
    path.write_text(f"default.api.timeout.ms={API_TIMEOUT_MS}\nrequest.timeout.ms=2000\n")
    return str(path)


def timed(tool: str, *args: str, input: Optional[str] = None) -> Tuple[ToolRun, float]:
    start = time.monotonic()
    run = run_tool(tool, *args, input=input, timeout_s=120)
    return run, time.monotonic() - start


def warnings_of(run: ToolRun) -> List[Tuple[str, int, str]]:
    return [(m.group(1), int(m.group(2)), m.group(3)) for m in map(_WARN.match, run.stderr.splitlines()) if m]


def assert_failed_like_kafka(run: ToolRun, elapsed: float, code: int, final: str, stream: str = "stderr",
                             nodes: int = 1, label: str = "AdminClient") -> None:
    """Exit status ``code``; ``final`` is the last line of ``stream`` (the only non-log line there); no traceback, no
    raw librdkafka line; connection warnings present and within Kafka's count for ``elapsed`` seconds per node."""
    text = run.stdout + run.stderr
    assert "Traceback" not in text and "%3|" not in text and "rdkafka#" not in text, text[-3000:]
    assert run.code == code, f"exit {run.code}\nstdout: {run.stdout}\nstderr: {run.stderr[-3000:]}"
    out = (run.stderr if stream == "stderr" else run.stdout).splitlines()
    assert out and out[-1] == final, f"last {stream} line: {out[-1:]!r}, expected {final!r}\n{text[-3000:]}"
    warns = warnings_of(run)
    assert warns, f"no connection warning logged:\n{run.stderr[-3000:]}"
    assert {w[0] for w in warns} == {label}, warns[:3]
    per_node = {n: sum(1 for w in warns if w[1] == n) for n in {w[1] for w in warns}}
    assert len(per_node) <= nodes, per_node
    bound = kafka_lines_upper_bound(elapsed)
    assert all(c <= bound for c in per_node.values()), (per_node, bound, elapsed)
    # every stderr line is a log line, the line or two an ERROR log spans, the final error (Kafka's tools print at
    # most one line before it: a header or the exception's message)
    others = [line for line in run.stderr.splitlines() if not _LOG.match(line) and line != final]
    assert len(others) <= 2 * sum(1 for line in run.stderr.splitlines() if " ERROR " in line) + 1, others


# ------------------------------------------------------------------------------------------------ wrong port
def test_topics_list_and_describe_to_a_wrong_port(dead: str, fast_config: str) -> None:
    for action, call in ((["--list"], "listTopics"), (["--describe", "--topic", "t"], "listTopics"),
                         (["--create", "--topic", "t"], "createTopics")):
        run, elapsed = timed("topics", "--bootstrap-server", dead, *action, "--command-config", fast_config)
        assert_failed_like_kafka(run, elapsed, 1, "Error while executing topic command : Timed out waiting for a "
                                                  f"node assignment. Call: {call}", stream="stdout")
        # Kafka's TopicCommand also logs the exception (an ApiException: no stack frames)
        errors = [line for line in run.stderr.splitlines() if " ERROR " in line]
        assert len(errors) == 1 and errors[0].endswith(f"ERROR {NO_NODE}{call}"), run.stderr[-2000:]
        assert run.stderr.endswith("\n (org.apache.kafka.tools.TopicCommand)\n")
        assert API_TIMEOUT_MS / 1000.0 - 0.2 <= elapsed <= API_TIMEOUT_MS / 1000.0 + 10, elapsed
        host, port = dead.split(":")
        assert warnings_of(run)[0][1:] == (-1, f"{host}/127.0.0.1:{port}")


def test_get_offsets_to_a_wrong_port(dead: str, fast_config: str) -> None:
    run, elapsed = timed("get-offsets", "--bootstrap-server", dead, "--command-config", fast_config)
    assert_failed_like_kafka(run, elapsed, 1, f"Error occurred: {NO_NODE}listTopics")
    assert run.stdout == ""
    assert all("clientId=GetOffsetShell]" in line for line in run.stderr.splitlines() if " WARN " in line)


def test_an_unreachable_cluster_warns_per_node(fast_config: str) -> None:
    """Three bootstrap servers, none listening: each is a node (-1, -2, -3) with its own backoff."""
    servers = ",".join(f"127.0.0.1:{free_port()}" for _ in range(3))
    run, elapsed = timed("topics", "--bootstrap-server", servers, "--describe", "--command-config", fast_config)
    assert_failed_like_kafka(run, elapsed, 1, "Error while executing topic command : Timed out waiting for a node "
                                              "assignment. Call: listTopics", stream="stdout", nodes=3)
    assert {w[1] for w in warnings_of(run)} == {-1, -2, -3}
    assert warnings_of(run)[0][2].startswith("/127.0.0.1:")  # an IP literal prints as Java's InetSocketAddress


@pytest.mark.parametrize("tool, args, code, final, stream", [
    ("configs", ["--describe", "--entity-type", "topics"], 1, f"java.util.concurrent.ExecutionException: {NO_NODE}"
                                                              "listTopics", "stderr"),
    ("acls", ["--list"], 1, f"Error while executing ACL command: {NO_NODE}describeAcls", "stdout"),
    ("log-dirs", ["--describe"], 1, f"java.util.concurrent.ExecutionException: {NO_NODE}listNodes", "stderr"),
    ("reassign-partitions", ["--list"], 1, f"Error: {NO_NODE}listPartitionReassignments", "stdout"),
    ("delegation-tokens", ["--describe"], 1, f"java.util.concurrent.ExecutionException: {NO_NODE}"
                                             "describeDelegationToken", "stderr"),
    ("transactions", ["list"], 1, "Failed to list transactions: Timed out waiting for a node assignment. Call: "
                                  "listTransactions(api=METADATA). Enable debug logging for additional detail.",
     "stderr"),
])
def test_other_admin_tools_to_a_wrong_port(dead: str, fast_config: str, tool: str, args: List[str], code: int,
                                           final: str, stream: str) -> None:
    """The tools on the project's protocol client retry as Kafka's admin client does and end with its line."""
    cc = ["--command-config", fast_config]
    argv = ["--bootstrap-server", dead] + (cc + args if tool == "transactions" else args + cc)
    run, elapsed = timed(tool, *argv)
    assert_failed_like_kafka(run, elapsed, code, final, stream)


def test_broker_api_versions_to_a_wrong_port_fails_at_once(dead: str) -> None:
    """Kafka's BrokerApiVersionsCommand tries each bootstrap server once."""
    run, elapsed = timed("broker-api-versions", "--bootstrap-server", dead)
    assert_failed_like_kafka(run, elapsed, 1, 'Exception in thread "main" java.lang.RuntimeException: Request '
                                              f"METADATA failed on brokers List({dead} (id: -1 rack: null))",
                             label="LegacyAdminClient")
    assert len(warnings_of(run)) == 1 and elapsed < 10


# ------------------------------------------------------------------------------------------------ consumer groups
@pytest.mark.parametrize("args, cause", [
    (["--list"], "java.util.concurrent.ExecutionException: org.apache.kafka.common.KafkaException: Failed to find "
                 "brokers to send ListGroups"),
    (["--list", "--state"], "org.apache.kafka.common.KafkaException: Failed to find brokers to send ListGroups"),
    (["--describe", "--group", "g"], f"{NO_NODE}describeConsumerGroups(api=FIND_COORDINATOR)"),
])
def test_consumer_groups_to_a_wrong_port(dead: str, args: List[str], cause: str) -> None:
    """Kafka prints ``Error: ...`` on stdout (and a stack trace) and, as Kafka 3.9 does, exits 0."""
    run, elapsed = timed("consumer-groups", "--bootstrap-server", dead, *args, "--timeout", "2000")
    assert_failed_like_kafka(run, elapsed, 0, f"Error: Executing consumer group command failed due to {cause}",
                             stream="stdout")
    assert run.stdout == f"\nError: Executing consumer group command failed due to {cause}\n"


# ------------------------------------------------------------------------------------------------ console producer
def _callback_lines(run: ToolRun) -> List[Tuple[str, str]]:
    """(ERROR line, the exception line after it) of each ErrorLoggingCallback report."""
    lines = run.stderr.splitlines()
    return [(line, lines[i + 1] if i + 1 < len(lines) else "") for i, line in enumerate(lines)
            if " ERROR Error when sending message" in line]


def test_console_producer_reports_every_failed_send_and_exits_1(dead: str) -> None:
    run, elapsed = timed("console-producer", "--bootstrap-server", dead, "--topic", "t1", "--max-block-ms", "1500",
                         input="hello\nworld!\n")
    lost = "org.apache.kafka.common.errors.TimeoutException: Topic t1 not present in metadata after 1500 ms."
    assert_failed_like_kafka(run, elapsed, 1, lost, label="Producer")
    reports = _callback_lines(run)
    assert [r[1] for r in reports] == [lost, lost]
    for (line, _), size in zip(reports, (5, 6)):
        assert re.fullmatch(r"\[[\d\- :,]+\] ERROR Error when sending message to topic t1 with key: null, value: "
                            rf"{size} bytes with error: \(org\.apache\.kafka\.clients\.producer\.internals\."
                            r"ErrorLoggingCallback\)", line), line
    assert 2 * 1.5 <= elapsed < 30


def test_console_producer_key_sizes_and_sync_mode(dead: str) -> None:
    run, elapsed = timed("console-producer", "--bootstrap-server", dead, "--topic", "t1", "--max-block-ms", "1000",
                         "--property", "parse.key=true", "--property", "key.separator=:", input="abc:de\n")
    assert run.code == 1 and "with key: 3 bytes, value: 2 bytes with error:" in _callback_lines(run)[0][0]
    run, elapsed = timed("console-producer", "--bootstrap-server", dead, "--topic", "t1", "--max-block-ms", "1000",
                         "--sync", input="a\nb\nc\n")
    # --sync: the first failure ends the tool, as Kafka's (which prints the ExecutionException and its stack trace)
    assert_failed_like_kafka(run, elapsed, 1, "java.util.concurrent.ExecutionException: org.apache.kafka.common."
                                              "errors.TimeoutException: Topic t1 not present in metadata after 1000 "
                                              "ms.", label="Producer")
    assert _callback_lines(run) == [] and elapsed < 20


def test_console_producer_reports_records_the_broker_refuses(broker: BrokerProcess) -> None:
    """A record larger than the topic takes: ErrorLoggingCallback with Kafka's exception, exit 1."""
    topic = f"refuse-{uuid.uuid4().hex[:6]}"
    assert run_tool("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--config",
                    "max.message.bytes=1000").code == 0
    assert run_tool("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                    input="small\n").code == 0
    run, _ = timed("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                   input="x" * 5000 + "\n")
    assert run.code == 1 and "Traceback" not in run.stderr, run.stderr
    reports = _callback_lines(run)
    assert len(reports) == 1 and "value: 5000 bytes with error:" in reports[0][0], run.stderr
    assert reports[0][1] == ("org.apache.kafka.common.errors.RecordTooLargeException: The request included a message "
                             "larger than the max message size the server will accept."), reports
    offsets = run_tool("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic)
    assert offsets.lines() == [f"{topic}:0:1"], offsets


# ------------------------------------------------------------------------------------------------ get-offsets order
def test_get_offsets_orders_partitions_as_kafka(broker: BrokerProcess) -> None:
    """Kafka's GetOffsetShell sorts by TopicPartition.toString ("t-10" before "t-2"), not by partition number."""
    topic = f"order-{uuid.uuid4().hex[:6]}"
    assert run_tool("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--partitions",
                    "12").code == 0
    run = run_tool("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", f"{topic}.*")
    assert run.code == 0, run.stderr
    assert [line.split(":")[1] for line in run.lines()] == ["0", "1", "10", "11", "2", "3", "4", "5", "6", "7", "8",
                                                            "9"]


# ------------------------------------------------------------------------------------------------ Kafka's tools
def test_same_lines_as_kafkas_tools(dead: str, fast_config: str, broker: BrokerProcess) -> None:
    """Kafka 3.9.1's tools on the same failures: the same final lines, and no fewer warnings than ours."""
    topic = f"kord-{uuid.uuid4().hex[:6]}"
    assert run_tool("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--partitions",
                    "11").code == 0
    cc = ["--command-config", fast_config]
    commands: List[Tuple[str, Sequence[str], Optional[str]]] = [
        ("topics", ["--bootstrap-server", dead, "--list", *cc], None),
        ("get-offsets", ["--bootstrap-server", dead, *cc], None),
        ("consumer-groups", ["--bootstrap-server", dead, "--list", "--timeout", "2000"], None),
        ("console-producer", ["--bootstrap-server", dead, "--topic", "t1", "--max-block-ms", "1500"], "hello\n"),
        ("get-offsets", ["--bootstrap-server", broker.bootstrap, "--topic", topic], None),
    ]
    theirs = run_kafka_batch(commands)
    ours = [run_tool(tool, *args, input=stdin) for tool, args, stdin in commands]

    def first_error(text: str) -> List[str]:
        """The first line that is neither a log line nor part of a Java stack trace (which ours leave out)."""
        lines = text.splitlines() + [""]
        return [line for i, line in enumerate(lines[:-1]) if not _LOG.match(line) and not line.startswith("\tat ")
                and not lines[i + 1].startswith("\tat ") and not line.startswith("Caused by")
                and not re.match(r"^\s*\.\.\. \d+ more", line)][:1]

    for (tool, args, _), k, o in zip(commands, theirs, ours):
        what = f"kafka-{tool} {' '.join(args)}"
        assert o.stdout == k.stdout, f"{what}\nours: {o.stdout!r}\nKafka's: {k.stdout!r}"
        assert first_error(o.stderr) == first_error(k.stderr), f"{what}\nours: {o.stderr}\nKafka's: {k.stderr}"
        assert len(warnings_of(o)) <= len(warnings_of(k)) + 1, f"{what}\nours: {o.stderr}\nKafka's: {k.stderr}"
    # the ErrorLoggingCallback report is the same (Kafka's async producer then exits 0, ours 1: FINDINGS.md)
    assert [re.sub(r"^\[[^\]]*\]", "", line) for pair in _callback_lines(ours[3]) for line in pair] == \
           [re.sub(r"^\[[^\]]*\]", "", line) for pair in _callback_lines(theirs[3]) for line in pair]
    assert (theirs[3].code, ours[3].code) == (0, 1)


# ------------------------------------------------------------------------------------------------ controller killed
@pytest.fixture
def cluster(zookeeper: str, tmp_path: Path) -> Iterator[LocalCluster]:
    with module_cluster(tmp_path / "cluster", zookeeper, 3) as c:
        yield c


def _spawn(tool: str, *args: str) -> Tuple[subprocess.Popen, float]:
    return (subprocess.Popen([str(ROOT / "bin" / f"kafka-{tool}.sh"), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd="/"), time.monotonic())


def _finish(proc_start: Tuple[subprocess.Popen, float]) -> Tuple[ToolRun, float]:
    proc, start = proc_start
    out, err = proc.communicate(timeout=120)
    return ToolRun(proc.returncode, out, err), time.monotonic() - start


def test_describe_and_list_do_not_wait_for_a_killed_controller(cluster: LocalCluster, tmp_path: Path) -> None:
    """kill -9 of the controller: describe and list answer at once from the live brokers; create waits for a
    controller until default.api.timeout.ms and fails with Kafka's line, or succeeds once a new one is elected."""
    bs = cluster.bootstrap
    assert run_tool("topics", "--bootstrap-server", bs, "--create", "--topic", "r3", "--partitions", "3",
                    "--replication-factor", "3").code == 0
    # CreateTopics answers once the broker it went to knows the topic; the others learn it from the controller's
    # UpdateMetadata, which a controller killed too soon never sends (Kafka alike). Kill it after all three know r3.
    deadline = time.monotonic() + 30
    while all_brokers_agree(cluster, "r3", lambda ps: len(ps) == 3 and all(p.leader >= 0 for p in ps.values())) is None:
        assert time.monotonic() < deadline, "r3 never reached every broker's metadata"
        time.sleep(0.05)
    short = tmp_path / "short.properties"
    short.write_text("default.api.timeout.ms=1500\n")
    victim = controller_id(cluster)
    cluster.broker(victim).kill()
    # a new controller comes after the ZooKeeper session timeout (4 s here): create must fail before that
    create = _spawn("topics", "--bootstrap-server", bs, "--create", "--topic", "new1", "--command-config", str(short))
    patient = _spawn("topics", "--bootstrap-server", bs, "--create", "--topic", "new2", "--replication-factor",
                     "2")
    describe, took = timed("topics", "--bootstrap-server", bs, "--describe", "--topic", "r3")
    assert describe.code == 0 and "Traceback" not in describe.stderr, describe
    assert describe.lines()[0].startswith("Topic: r3\tTopicId: ") and len(describe.lines()) == 4, describe.stdout
    assert took < 10, took  # (before: 60 s, then "Timed out waiting for controller")
    listed, took = timed("topics", "--bootstrap-server", bs, "--list")
    assert listed.code == 0 and "r3" in listed.lines() and took < 10, (listed, took)

    failed, elapsed = _finish(create)
    assert_failed_like_kafka(failed, elapsed, 1, "Error while executing topic command : Timed out waiting for a "
                                                 "node assignment. Call: createTopics", stream="stdout", nodes=2)
    # the warnings are about the dead controller, found in the live brokers' metadata (and about the dead broker's
    # bootstrap entry, when it comes first)
    bootstrap_node = -(bs.split(",").index(cluster.broker(victim).bootstrap) + 1)
    assert victim in {w[1] for w in warnings_of(failed)} <= {victim, bootstrap_node}
    assert elapsed >= 1.4
    created, elapsed = _finish(patient)
    assert created.code == 0 and created.stdout == "Created topic new2.\n", created
    assert elapsed < 60
