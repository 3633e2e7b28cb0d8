#!/usr/bin/env bash
# Stop the brokers started with this LOG_DIR (their pid files; default <checkout>/logs): SIGTERM, then wait.
# Usage: bin/server-stop.sh [--all] [--dry-run] [--timeout S]
#   --all  every broker process of the machine, as Kafka's kafka-server-stop.sh does for kafka.Kafka
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  echo "No virtualenv at $ROOT/.venv: run bash $ROOT/scripts/install.sh first" >&2
  exit 1
fi
export BROKER_PROG="${BROKER_PROG:-$(basename "$0")}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export LOG_DIR="${LOG_DIR:-$ROOT/logs}"
exec "$ROOT/.venv/bin/python" -P -m tools.server_stop "$@"
