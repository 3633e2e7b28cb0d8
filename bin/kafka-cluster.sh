#!/usr/bin/env bash
# ZooKeeper and N brokers on this machine for development, each broker its own process, port and log dir.
# Usage: bin/kafka-cluster.sh start [--brokers 3] [--dir .cluster] [--base-port 9092] [--override key=value ...]
#        bin/kafka-cluster.sh status|stop [--dir .cluster]
#        bin/kafka-cluster.sh start|stop|restart --broker ID [--dir .cluster]   (one broker; --broker repeatable)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  echo "No virtualenv at $ROOT/.venv: run bash $ROOT/scripts/install.sh first" >&2
  exit 1
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$ROOT/.venv/bin/python" -m tools.cluster "$@"
