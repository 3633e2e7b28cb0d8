#!/usr/bin/env bash
# The project's test command (README, CI): install (scripts/install.sh: what the broker needs; then
# scripts/install-test.sh: what only the tests need), then every test: the process tests (integration and
# compatibility, native extensions required, in three lanes) and, alongside them, the unit tests, native and then
# on the pure-Python twins. Exits non-zero if any run fails (exit 5, "no tests collected", counts as a failure).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/install.sh || { echo "test.sh: install failed" >&2; exit 1; }
bash scripts/install-test.sh || { echo "test.sh: install of the test requirements failed" >&2; exit 1; }
# the packaging tests build the extensions again, in copies: through the compiler cache too
# shellcheck source=scripts/compiler-cache.sh
. scripts/compiler-cache.sh

# The unit tests need little but CPU, and the process tests (real brokers, ZooKeeper, clients) mostly wait on
# them: the unit tests run in a lane of their own alongside, first with the native extensions required, then on
# the pure-Python twins, into a log printed after the process tests.
UNIT_LOG="$(mktemp -t unit-lane.XXXXXX)"
(
  echo "== unit tests (native extensions required), run alongside"
  BROKER_REQUIRE_NATIVE=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit "$@"
  rc_native=$?
  # modules marked twin_independent import no code that has a native twin (mypy and the layering checks, keystores,
  # TLS, ACLs, the install scripts): they ran above, and their summary line counts them as deselected here
  echo "== unit tests on the pure-Python twins (BROKER_NO_EXTENSIONS=1; twin-independent modules ran above), run alongside"
  BROKER_NO_EXTENSIONS=1 .venv/bin/python -m pytest -q -p no:cacheprovider -m "not twin_independent" tests/unit "$@"
  rc_pure=$?
  echo "unit lane: native exit $rc_native, pure-Python exit $rc_pure"
  [ "$rc_native" = 0 ] && [ "$rc_pure" = 0 ]
) > "$UNIT_LOG" 2>&1 &
unit_pid=$!
# The process tests run in three lanes (pytest-xdist: three workers, whole files each, the long files first; see
# tests/harness/lane_order.py): most of their time is spent waiting on brokers, sessions and timeouts. With two lanes
# a clean clone's run kept 1.28 of the 2 cores busy (1,803 s); with three, 1.51 (1,472 s), every test passing.
echo "== process tests: integration and compatibility (native extensions required), three lanes"
BROKER_REQUIRE_NATIVE=1 .venv/bin/python -m pytest -q -p no:cacheprovider -p tests.harness.lane_order \
  -n "${PROCESS_LANES:-3}" --dist loadfile tests compat-tests --ignore=tests/unit "$@"
rc1=$?
wait "$unit_pid"
rc2=$?
cat "$UNIT_LOG"
rm -f "$UNIT_LOG"

echo "test.sh: process tests exit $rc1, unit lane (native and pure-Python) exit $rc2"
if [ "$rc1" != 0 ] || [ "$rc2" != 0 ]; then exit 1; fi
