#!/usr/bin/env bash
# Stop the ZooKeeper that bin/zookeeper-server-start.sh started with this LOG_DIR ($LOG_DIR/zookeeper.pid; default
# <checkout>/logs): SIGTERM, then wait. --all stops every ZooKeeper (QuorumPeerMain) of the machine, as Kafka's
# zookeeper-server-stop.sh does. Prints "No zookeeper server to stop" and exits 1 when there is none.
# Usage: bin/zookeeper-server-stop.sh [--all]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG_DIR="${LOG_DIR:-$ROOT/logs}"
PIDFILE="$LOG_DIR/zookeeper.pid"
TIMEOUT_S="${STOP_TIMEOUT_S:-30}"
SIGNAL="${SIGNAL:-TERM}"

is_zookeeper() {  # a live ZooKeeper server process (not a reused pid)
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' < "/proc/$1/cmdline" | grep -q 'org.apache.zookeeper.server.quorum.QuorumPeerMain'
}

case "${1:-}" in
  "") PIDS=""
      if [ -f "$PIDFILE" ]; then
        pid="$(cat "$PIDFILE")"
        if is_zookeeper "$pid"; then PIDS="$pid"; else rm -f "$PIDFILE"; fi
      fi ;;
  --all) PIDS="$(ps ax -o pid=,args= | grep 'org.apache.zookeeper.server.quorum.QuorumPeerMain' | grep java \
                 | grep -v grep | awk '{print $1}' | tr '\n' ' ')" ;;
  *) echo "USAGE: $0 [--all]" >&2; exit 1 ;;
esac
if [ -z "${PIDS// /}" ]; then
  echo "No zookeeper server to stop"
  exit 1
fi
# shellcheck disable=SC2086  # several pids
kill -s "$SIGNAL" $PIDS
alive="$PIDS"
for _ in $(seq 1 $((TIMEOUT_S * 10))); do
  alive=""
  for p in $PIDS; do is_zookeeper "$p" && alive="$alive $p"; done
  [ -z "$alive" ] && break
  sleep 0.1
done
if [ -n "${alive// /}" ]; then
  echo "ZooKeeper still running after ${TIMEOUT_S}s:$alive" >&2
  exit 1
fi
if [ -f "$PIDFILE" ] && ! is_zookeeper "$(cat "$PIDFILE")"; then rm -f "$PIDFILE"; fi
