#!/usr/bin/env bash
# Start the broker in the foreground (or with -daemon in the background).
# Usage: bin/server-start.sh [-daemon] config/server.properties [--override key=value ...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

DAEMON=0
if [ "${1:-}" = "-daemon" ]; then DAEMON=1; shift; fi
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] server.properties [--override property=value]*" >&2
  exit 1
fi
CFG="$(realpath "$1")"   # relative paths resolve from the caller's directory
shift
if [ ! -f "$CFG" ]; then echo "Config file not found: $CFG" >&2; exit 1; fi
if [ ! -f "$ROOT/.venv/bin/activate" ]; then
  echo "No virtualenv at $ROOT/.venv: run bash $ROOT/scripts/install.sh first" >&2
  exit 1
fi
# shellcheck disable=SC1091
. "$ROOT/.venv/bin/activate"
export BROKER_REQUIRE_NATIVE=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export BROKER_LOG_DIR="${BROKER_LOG_DIR:-${LOG_DIR:-$ROOT/logs}}"
export BROKER_LOG_CONFIG="${BROKER_LOG_CONFIG:-$ROOT/config/logging.ini}"
mkdir -p "$BROKER_LOG_DIR"

if [ "$DAEMON" = 1 ]; then
  mkdir -p "$ROOT/.run"
  nohup python -m broker "$CFG" "$@" > "$BROKER_LOG_DIR/kafkaServer.out" 2>&1 < /dev/null &
  echo $! > "$ROOT/.run/broker-$!.pid"
  echo "Broker started in the background (pid $!, log $BROKER_LOG_DIR/kafkaServer.out)"
else
  exec python -m broker "$CFG" "$@"
fi
