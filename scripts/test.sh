#!/usr/bin/env bash
# The project's test command (README, CI): install (scripts/install.sh: what the broker needs; then
# scripts/install-test.sh: what only the tests need), then run every test with the native extensions required, and
# the unit tests again on the pure-Python twins. Exits non-zero if any run fails (exit 5, "no tests collected",
# counts as a failure).
#
# The suite mostly waits on brokers, ZooKeeper, JVMs and client timeouts, so on CI's 2 cores most of it runs as two
# lanes at once (34 min in one lane, the 45-minute CI budget minus a 8-minute install was too close):
#   lane 1: the multi-broker cluster tests and compat-tests (stock clients, mixed clusters with Kafka 3.9.1);
#   lane 2: the rest of tests/ but Spark and the tools, then the pure-Python unit pass.
# Then, alone: the Spark connector tests and the tools judged against Kafka's own (CPU-heavy JVMs and timed
# micro-batches, which flaked when they shared the 2 cores with lane 1).
# Arguments (pytest options or paths) run a single lane instead: bash scripts/test.sh tests/unit -x
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/install.sh || { echo "test.sh: install failed" >&2; exit 1; }
bash scripts/install-test.sh || { echo "test.sh: install of the test requirements failed" >&2; exit 1; }

PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider)
if [ "$#" -gt 0 ]; then
  BROKER_REQUIRE_NATIVE=1 "${PYTEST[@]}" "$@"
  exit $?
fi

LANE2_LOG="$(mktemp -t lane2.XXXXXX)"
# Each lane has its own pytest temp root, so neither cleans up the other's directories.
TMP1="$(mktemp -d -t lane1.XXXXXX)"
TMP2="$(mktemp -d -t lane2.XXXXXX)"
(
  echo "== lane 2: tests/ except the cluster, Spark and tools tests (native extensions required)"
  BROKER_REQUIRE_NATIVE=1 "${PYTEST[@]}" --basetemp="$TMP2/native" --durations=15 tests --ignore=tests/integration/cluster \
    --ignore=tests/integration/spark --ignore=tests/integration/tools
  rc=$?
  echo "== lane 2: unit tests on the pure-Python twins (BROKER_NO_EXTENSIONS=1)"
  BROKER_NO_EXTENSIONS=1 "${PYTEST[@]}" --basetemp="$TMP2/pure" tests/unit
  rc2=$?
  echo "lane 2: tests exit $rc, pure-Python unit tests exit $rc2"
  [ "$rc" = 0 ] && [ "$rc2" = 0 ]
) > "$LANE2_LOG" 2>&1 &
lane2_pid=$!
echo "== lane 1: tests/integration/cluster and compat-tests (native extensions required)"
BROKER_REQUIRE_NATIVE=1 "${PYTEST[@]}" --basetemp="$TMP1" --durations=15 tests/integration/cluster compat-tests
rc1=$?
wait "$lane2_pid"
rc2=$?
cat "$LANE2_LOG"
echo "== alone: the Spark connector and tools tests (native extensions required)"
BROKER_REQUIRE_NATIVE=1 "${PYTEST[@]}" --basetemp="$TMP1/alone" --durations=15 tests/integration/spark \
  tests/integration/tools
rc3=$?
rm -rf "$LANE2_LOG" "$TMP1" "$TMP2"

echo "test.sh: lane 1 exit $rc1, lane 2 exit $rc2, Spark and tools exit $rc3"
if [ "$rc1" != 0 ] || [ "$rc2" != 0 ] || [ "$rc3" != 0 ]; then exit 1; fi
