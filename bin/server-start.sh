#!/usr/bin/env bash
# Start the broker: in the foreground, or with -daemon in the background (console output in $LOG_DIR/kafkaServer.out).
# Usage: bin/server-start.sh [-daemon] server.properties [--override property=value]*   (also --help, --version)
# The command line is handled by the broker itself (python -m broker, the same as the installed kafka-server-start).
# LOG_DIR (default <checkout>/logs) holds server.log, controller.log, state-change.log, log-cleaner.log,
# kafka-request.log, kafka-authorizer.log and the pid files bin/kafka-server-stop.sh reads.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  echo "No virtualenv at $ROOT/.venv: run bash $ROOT/scripts/install.sh first" >&2
  exit 1
fi
export BROKER_PROG="${BROKER_PROG:-$(basename "$0")}"
export BROKER_REQUIRE_NATIVE=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export LOG_DIR="${LOG_DIR:-$ROOT/logs}"
exec "$ROOT/.venv/bin/python" -P -m broker "$@"   # -P: the checkout's broker (PYTHONPATH), not one in the cwd
