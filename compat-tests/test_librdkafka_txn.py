"""librdkafka's own transaction and read_committed tests, unchanged, against our brokers (issue 11).

librdkafka's test suite (``tests/test-runner`` of librdkafka 2.15.1, built by scripts/install-test.sh through
``tests/harness/librdkafka_tests.py``) runs as librdkafka's CI runs it against Apache Kafka: ``bootstrap.servers``
in a ``test.conf``, ``TEST_KAFKA_VERSION=3.9.1`` so the version-gated tests and sub-tests run, ``TESTS`` and
``SUBTESTS`` to pick them. Each pytest test below asserts that one librdkafka test PASSED and that every sub-test
it should run did (none skipped), so a test that quietly did less fails here.

Where they run:

- one broker with Kafka's quickstart overrides of the replicated internal topics
  (``transaction.state.log.replication.factor=1``, ``min.isr=1``) and a SASL_PLAINTEXT listener beside the
  PLAINTEXT one: 0129 (a Fetch answer holding only aborted records), 0061 (consumer lag over aborted
  transactions: the LSO), 0137's control-records sub-test (batch consume over commit/abort markers), 0081's
  ListOffsets sub-tests (``isolation.level=read_committed``), 0081's AlterConfigs and IncrementalAlterConfigs
  sub-tests (the broker resource with ``sasl.kerberos.min.time.before.relogin``, issue 17 point 10) and 0142's
  two transactional sub-tests (re-authentication, KIP-368, in the middle of a committed and an aborted
  transaction; PLAIN with ``connections.max.reauth.ms``), the five runs at once;
- three brokers (``__transaction_state`` with RF 3, min.isr 2), because these create their topics with
  replication factor 3: 0103 (the transactional producer: misuse, commit/abort, fencing, KIP-360 recovery after
  DeleteRecords, empty transactions, read_committed watermarks, the abort marker's leader epoch) with its local
  twin 0103_transactions_local, and 0098 (read_committed consumption over 17 scenarios, each once with the Java
  producer ``TransactionProducerCli`` on Kafka 3.9.1's kafka-clients and once with librdkafka's), in parallel.

Not run: the mock-cluster tests (0105 and the other ``*_mock`` tests: they never talk to a broker), 0055's
transactional latency case (librdkafka skips it on CI: latency on a shared 2-core machine is no signal), 0142's
OAUTHBEARER and share-consumer sub-tests and 0177 (share groups, KIP-932: Kafka 4.2 brokers).
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness import librdkafka_tests as rdk
from tests.harness.broker_process import free_port, running_broker
from tests.harness.cluster_ops import module_cluster
from tests.harness.security import ADMIN, ADMIN_PW, plain_jaas

SINGLE_BROKER = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "transaction.state.log.num.partitions": "8", "offsets.topic.replication.factor": "1",
                 "offsets.topic.num.partitions": "8", "group.initial.rebalance.delay.ms": "0",
                 "sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas({ADMIN: ADMIN_PW}),
                 # 0142 produces through one re-authentication per this interval
                 "connections.max.reauth.ms": "5000"}
CLUSTER = {"transaction.state.log.num.partitions": "8", "group.initial.rebalance.delay.ms": "0"}
SASL_CLIENT = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": ADMIN,
               "sasl.password": ADMIN_PW}
RUN_TIMEOUT_S = 480.0

#: librdkafka test -> the sub-tests (names without their line numbers) that must all PASS, and nothing else
EXPECTED_SUBTESTS: dict[str, list[str]] = {
    "0103_transactions": [
        "do_test_misuse_txn",
        "do_test_basic_producer_txn: without compression",
        "do_test_basic_producer_txn: with compression",
        "do_test_consumer_producer_txn: transactional test with 10 transactions",
        "do_test_fenced_txn: do not produce after fence",
        "do_test_fenced_txn: produce after fence",
        "do_test_fatal_idempo_error_without_kip360: not expecting failure since broker is >= 2.5",
        "do_test_empty_txn: don't send offsets, commit",
        "do_test_empty_txn: don't send offsets, abort",
        "do_test_empty_txn: send offsets, commit",
        "do_test_empty_txn: send offsets, abort",
        "do_test_wmark_isolation_level",
        "do_test_txn_abort_control_message_leader_epoch",
    ],
    "0103_transactions_local": ["do_test_txn_local"],
    "0098_consumer_txn": [],
    "0129_fetch_aborted_msgs": [],
    "0061_consumer_lag": ["do_test_consumer_lag: Test consumer lag without transactions",
                          "do_test_consumer_lag: Test consumer lag with transactions"],
    "0137_barrier_batch_consume": ["do_test_consume_batch_control_msgs: Testing control msgs flow"],
    "0081_admin/ListOffsets": [f"do_test_ListOffsets: 0081_admin#{client} ListOffsets with {queue}"
                   for client in ("producer-2", "consumer-6")
                   for queue in ("temp queue, request_timeout -1", "main queue, request_timeout 1500")],
    # issue 17 point 10: AlterConfigs and IncrementalAlterConfigs of the broker resource with Kafka's per-broker
    # listener key sasl.kerberos.min.time.before.relogin (once with a producer's admin client, once a consumer's)
    "0081_admin/AlterConfigs": ["do_test_AlterConfigs", "do_test_IncrementalAlterConfigs"] * 2,
    "0142_reauthentication": ["do_test_txn_producer: test reauth in the middle of a txn, txn is committed",
                              "do_test_txn_producer: test reauth in the middle of a txn, txn is aborted"],
}
#: 0098's scenarios, run once with the Java producer and once with librdkafka's
SCENARIOS_0098 = ["0", "0.1", "0.2", "1", "1.1", "1.2", "2", "2.1", "3", "3.1", "4", "4.1", "4.2", "4.3", "5", "6"]


@dataclass
class Runs:
    """The runner invocations of one fixture and the brokers' output (for failure messages)."""
    results: list[rdk.SuiteResult]
    broker_output: str

    def run_of(self, name: str, subtests: str | None = None) -> rdk.SuiteResult | None:
        """The invocation whose summary lists librdkafka test ``name`` (run with ``SUBTESTS=subtests``, if given)."""
        return next((r for r in self.results if name in r.tests
                     and (subtests is None or f"SUBTESTS={subtests!r}" in r.description)), None)


def _built() -> None:
    try:
        rdk.check_built()
    except rdk.LibrdkafkaUnavailable as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def single_broker_runs(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """The one-broker runs, started together; the broker is stopped (cleanly, checked) before the tests look."""
    _built()
    work = Path(tmp_path_factory.mktemp("rdk1"))
    port, sasl_port = free_port(), free_port()
    props = dict(SINGLE_BROKER, listeners=f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    with running_broker(work, f"{zookeeper}/rdk1-{uuid.uuid4().hex[:10]}", broker_id=0, port=port,
                        overrides=props) as b:
        runs = [rdk.SuiteRun(["0129", "0061"], b.bootstrap, work / "lsoruns", parallel=2),
                rdk.SuiteRun(["0137"], b.bootstrap, work / "batch", subtests="control msgs"),
                rdk.SuiteRun(["0081"], b.bootstrap, work / "admin", subtests="ListOffsets"),
                rdk.SuiteRun(["0081"], b.bootstrap, work / "alterconfigs", subtests="AlterConfigs"),
                rdk.SuiteRun(["0142"], f"127.0.0.1:{sasl_port}", work / "reauth",
                             subtests="reauth in the middle of a txn", extra_conf=SASL_CLIENT)]
        results = rdk.run_suites(runs, RUN_TIMEOUT_S)
        broker_out = b.output()
    yield Runs(results, broker_out)


@pytest.fixture(scope="module")
def cluster_runs(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """0103 and 0098 in one runner (-p3) against three brokers."""
    _built()
    work = Path(tmp_path_factory.mktemp("rdk3"))
    with module_cluster(work, zookeeper, 3, overrides=CLUSTER) as c:
        results = rdk.run_suites([rdk.SuiteRun(["0103", "0098"], c.bootstrap, work / "txn", parallel=3)],
                                  RUN_TIMEOUT_S)
        broker_out = "\n".join(f"--- broker {b.broker_id}\n{b.output()[-3000:]}" for b in c.brokers)
    yield Runs(results, broker_out)


def _subtest_key(name: str) -> str:
    """``do_test_x:123: what`` -> ``do_test_x: what`` (line numbers move between librdkafka releases)."""
    return re.sub(r":\d+(?=:|$)", "", name)


def _check(runs: Runs, name: str, subtests: str | None = None) -> rdk.RdkTestResult:
    """Assert that librdkafka test ``name`` (of the run with ``SUBTESTS=subtests``, if given) passed and ran exactly
    its expected sub-tests: ``EXPECTED_SUBTESTS[name]``, or ``EXPECTED_SUBTESTS[f"{name}/{subtests}"]``."""
    result = runs.run_of(name, subtests)
    if result is None:
        tails = "\n".join(f"--- {r.description}, exit {r.returncode}:\n{r.output[-3000:]}" for r in runs.results)
        pytest.fail(f"librdkafka test {name} is missing from the runners' summaries:\n{tails}", pytrace=False)
    res = result.tests[name]
    context = (f"{result.description}, runner exit {result.returncode}\n--- {name} log (tail):\n{res.tail(80)}\n"
               f"--- broker output (tail):\n{runs.broker_output[-3000:]}")
    assert res.state == "PASSED", f"librdkafka {name}: {res.state} {res.reason!r}\n{context}"
    assert not res.subtests_skipped, f"librdkafka {name} skipped sub-tests {res.subtests_skipped}\n{context}"
    passed = sorted(_subtest_key(s) for s in res.subtests_passed)
    expected = EXPECTED_SUBTESTS[f"{name}/{subtests}" if subtests else name]
    assert passed == sorted(expected), f"librdkafka {name} sub-tests that passed: {passed}\n{context}"
    return res


def test_0103_transactional_producer(cluster_runs: Runs) -> None:
    """Commit/abort, fencing, KIP-360 recovery after DeleteRecords, empty transactions, read_committed hwmarks."""
    _check(cluster_runs, "0103_transactions")


def test_0103_transactions_local(cluster_runs: Runs) -> None:
    _check(cluster_runs, "0103_transactions_local")


def test_0098_read_committed_consumer_java_and_librdkafka_producers(cluster_runs: Runs) -> None:
    res = _check(cluster_runs, "0098_consumer_txn")
    run = cluster_runs.run_of("0098_consumer_txn")
    assert run is not None
    headers = [i for i, line in enumerate(res.lines) if line.startswith("[ Consumer transaction tests using ")]
    assert [res.lines[i].split()[5] for i in headers] == ["java", "librdkafka"], res.tail(40)
    for start, end, producer in ((headers[0], headers[1], "java"), (headers[1], len(res.lines), "librdkafka")):
        ran = [m.group(1) for line in res.lines[start:end] if (m := re.match(r"^Test ([\d.]+)\b", line))]
        assert ran == SCENARIOS_0098, f"0098 with the {producer} producer ran scenarios {ran}"
    # the Java producer really ran (TEST_WARN on a failed java start would otherwise only print a warning)
    assert "TransactionProducerCli.java: command: 'producer1, -1, 0x0, 5, BeginCommit, DoFlush'" in run.output
    warnings = [line for line in res.lines if line.startswith("WARN:")]
    assert not warnings, f"0098 printed warnings: {warnings}"


def test_0129_fetch_of_only_aborted_records(single_broker_runs: Runs) -> None:
    _check(single_broker_runs, "0129_fetch_aborted_msgs")


def test_0061_consumer_lag_over_aborted_transactions(single_broker_runs: Runs) -> None:
    _check(single_broker_runs, "0061_consumer_lag")


def test_0137_batch_consume_over_control_records(single_broker_runs: Runs) -> None:
    _check(single_broker_runs, "0137_barrier_batch_consume")


def test_0081_list_offsets_read_committed(single_broker_runs: Runs) -> None:
    _check(single_broker_runs, "0081_admin", subtests="ListOffsets")


def test_0081_alter_configs_of_the_broker_resource(single_broker_runs: Runs) -> None:
    """Both config-altering APIs with a topic, the broker id (sasl.kerberos.min.time.before.relogin, which the
    broker once refused as unknown) and a missing topic; the GROUP resource (KIP-848) is refused, as Kafka 3.9.1's
    ZooKeeper mode refuses it, with "Unknown resource type 32" (0081 only warns)."""
    _check(single_broker_runs, "0081_admin", subtests="AlterConfigs")


def test_0142_reauthentication_inside_transactions(single_broker_runs: Runs) -> None:
    _check(single_broker_runs, "0142_reauthentication")
