"""The librdkafka test-suite harness: parsing test-runner output (as librdkafka 2.15.1 prints it) and the
"not built" failure. The parse decides what compat-tests/test_librdkafka_txn.py asserts, so a wrong parse would
hide a failing or skipped librdkafka test."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import librdkafka_tests as rdk

C, G, R, Y, M, X = "\x1b[36m", "\x1b[32m", "\x1b[31m", "\x1b[33m", "\x1b[35m", "\x1b[0m"

PASSING_RUN = f"""{X}{C}[<MAIN>                      /  0.000s] Tests to run     : 0103,0142
{X}{C}[0103_transactions           /  0.000s] ================= Running test 0103_transactions =================
{X}{C}[0103_transactions           /  0.000s] {M}[ do_test_misuse_txn:596 ]
{X}{C}[0103_transactions           /  1.144s] {G}[ do_test_misuse_txn:596: PASS (1.14s) ]
{X}{C}[0103_transactions           / 13.696s] {G}[ do_test_basic_producer_txn:130: without compression: PASS (12.55s) ]
%3|1795421245.110|FAIL|0103_transactions#producer-1| [thrd:x]: a librdkafka log line, untagged
{X}{C}[0103_transactions           / 14.000s] {Y}[ do_test_fatal_idempo_error_without_kip360:857: not on AK 2.4: SKIP: can't trigger ]
{X}{C}[0103_transactions           / 49.083s] {G}================= Test 0103_transactions PASSED ================={X}
{X}{Y}[0142_reauthentication       /  0.000s] WARN: SKIPPING TEST: Test requires SASL_PLAINTEXT or SASL_SSL, got plaintext
{X}{C}[0142_reauthentication       /  0.000s] ================= Test 0142_reauthentication SKIPPED =================
TEST 20261123074819 (bare, scenario default) SUMMARY
#==================================================================#
|{G} <MAIN>                                   |     PASSED |  57.046s {X}|
|{G} 0103_transactions                        |     PASSED |  49.083s {X}|
|{C} 0142_reauthentication                    |    SKIPPED |   0.000s {X}|{C} Test requires SASL_PLAINTEXT{X}
#==================================================================#
"""

ABORTED_RUN = f"""{X}{C}[0129_fetch_aborted_msgs     /  0.000s] ================= Running test 0129_fetch_aborted_msgs ====
{C}[<MAIN>                      /  1.000s] 1 test(s) running:{X} 0129_fetch_aborted_msgs
{C}[0129_fetch_aborted_msgs     / 18.671s] TEST FAILURE
{X}{R}### Test "0129_fetch_aborted_msgs" failed at test.c:5351:test_admin_create_topic() at Mon Nov 23: ###
Test assertion failed: "rkev": Timed out waiting for CreateTopics result
{C}[<MAIN>                      / 20.006s] TEST FAILURE
{X}{R}### Test "<MAIN>" failed at test.c:1950:test_wait_exit() at Mon Nov 23: ###
4 thread(s) still active in librdkafka
test-runner: test.c:7706: test_fail0: Assertion `0' failed.
"""


def test_summary_table_gives_states_and_tagged_lines_give_subtests() -> None:
    tests = rdk.parse_output(PASSING_RUN)
    assert set(tests) == {"0103_transactions", "0142_reauthentication"}
    t = tests["0103_transactions"]
    assert (t.state, t.duration_s, t.reason) == ("PASSED", 49.083, "")
    assert t.subtests_passed == ["do_test_misuse_txn:596", "do_test_basic_producer_txn:130: without compression"]
    assert t.subtests_skipped == [("do_test_fatal_idempo_error_without_kip360:857: not on AK 2.4", "can't trigger")]
    assert "a librdkafka log line, untagged" not in t.tail()
    s = tests["0142_reauthentication"]
    assert (s.state, s.reason) == ("SKIPPED", "Test requires SASL_PLAINTEXT")


def test_a_runner_that_aborted_before_its_summary_still_reports_the_failure() -> None:
    tests = rdk.parse_output(ABORTED_RUN)
    assert set(tests) == {"0129_fetch_aborted_msgs"}
    t = tests["0129_fetch_aborted_msgs"]
    assert t.state == "FAILED"
    assert "test_admin_create_topic()" in t.reason and "Timed out waiting for CreateTopics result" in t.reason
    assert "thread(s) still active" not in t.reason


def test_a_test_cut_off_mid_run_is_running_not_passed() -> None:
    out = f"{C}[0098_consumer_txn           /  0.000s] ================= Running test 0098_consumer_txn ===\n"
    assert rdk.parse_output(out)["0098_consumer_txn"].state == "RUNNING"


def test_a_missing_or_stale_build_names_the_install_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rdk, "MARKER", tmp_path / ".complete")
    monkeypatch.setattr(rdk, "RUNNER", tmp_path / "test-runner")
    with pytest.raises(rdk.LibrdkafkaUnavailable, match="scripts/install-test.sh"):
        rdk.check_built()
    (tmp_path / "test-runner").write_text("")
    (tmp_path / ".complete").write_text("a key of another build\n")
    with pytest.raises(rdk.LibrdkafkaUnavailable, match="stale"):
        rdk.check_built()
    (tmp_path / ".complete").write_text(rdk.build_key() + "\n")
    assert rdk.is_built()
