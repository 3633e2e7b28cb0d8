#!/usr/bin/env bash
# The project's test command (README, CI): install (scripts/install.sh: what the broker needs; then
# scripts/install-test.sh: what only the tests need), run the whole suite with the native extensions required,
# and, alongside it, the unit tests again on the pure-Python twins. Exits non-zero if either run fails (exit 5, "no tests
# collected", counts as a failure).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/install.sh || { echo "test.sh: install failed" >&2; exit 1; }
bash scripts/install-test.sh || { echo "test.sh: install of the test requirements failed" >&2; exit 1; }

# The pure-Python unit run needs little but CPU, and the full suite mostly waits on brokers and clients: run it
# alongside, into a log printed after the full suite.
PURE_LOG="$(mktemp -t pure-unit.XXXXXX)"
BROKER_NO_EXTENSIONS=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit "$@" > "$PURE_LOG" 2>&1 &
pure_pid=$!
echo "== full suite (native extensions required)"
BROKER_REQUIRE_NATIVE=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests compat-tests "$@"
rc1=$?
wait "$pure_pid"
rc2=$?
echo "== unit tests on the pure-Python twins (BROKER_NO_EXTENSIONS=1), run alongside"
cat "$PURE_LOG"
rm -f "$PURE_LOG"

echo "test.sh: full suite exit $rc1, pure-Python unit tests exit $rc2"
if [ "$rc1" != 0 ] || [ "$rc2" != 0 ]; then exit 1; fi
