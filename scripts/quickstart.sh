#!/usr/bin/env bash
# One command from a fresh checkout to a running broker: install what running it needs (scripts/install.sh; nothing
# the tests alone need), start ZooKeeper unless one already answers on its port, then the broker in the foreground.
#
# Stop it with Ctrl-C, or with bin/kafka-server-stop.sh from another terminal: the broker shuts down cleanly, then
# this script stops the ZooKeeper it started (a ZooKeeper that was already running is left alone).
#
# Usage: bash scripts/quickstart.sh [--override key=value ...]      (overrides go to the broker)
# Environment: LOG_DIR (logs and pid files, default logs/), ZOOKEEPER_CONFIG (default config/zookeeper.properties),
#              SERVER_CONFIG (default config/server.properties).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/install.sh

ZK_CFG="${ZOOKEEPER_CONFIG:-config/zookeeper.properties}"
SERVER_CFG="${SERVER_CONFIG:-config/server.properties}"
ZK_PORT="$(sed -n 's/^clientPort=\([0-9][0-9]*\).*/\1/p' "$ZK_CFG" | tail -n 1)"
ZK_PORT="${ZK_PORT:-2181}"
export LOG_DIR="${LOG_DIR:-$ROOT/logs}"

zk_ok() {
  .venv/bin/python - "$ZK_PORT" <<'PY'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1) as s:
        s.sendall(b"ruok")
        sys.exit(0 if s.recv(4) == b"imok" else 1)
except OSError:
    sys.exit(1)
PY
}

STARTED_ZK=0
stop_started_zookeeper() {
  if [ "$STARTED_ZK" = 1 ]; then
    echo "quickstart: stopping the ZooKeeper it started"
    bin/zookeeper-server-stop.sh > /dev/null || true
  fi
}
trap stop_started_zookeeper EXIT

if ! zk_ok; then
  bin/zookeeper-server-start.sh -daemon "$ZK_CFG"
  STARTED_ZK=1
  for _ in $(seq 1 300); do zk_ok && break; sleep 0.2; done
  zk_ok || { echo "ZooKeeper did not start on port $ZK_PORT; see $LOG_DIR/zookeeper.out" >&2; exit 1; }
fi

# The broker runs as a child (not exec) so that this script is still there to stop ZooKeeper after it.
bin/kafka-server-start.sh "$SERVER_CFG" "$@" &
BROKER_PID=$!
trap 'kill -TERM "$BROKER_PID" 2> /dev/null || true' INT TERM
status=0
while kill -0 "$BROKER_PID" 2> /dev/null; do
  status=0
  wait "$BROKER_PID" || status=$?
done
exit "$status"
