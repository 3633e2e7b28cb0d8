#!/usr/bin/env bash
# Stop the ZooKeeper started by bin/zookeeper-server-start.sh (pid file first, else QuorumPeerMain processes).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIDFILE="$ROOT/.run/zookeeper.pid"
PIDS=""
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  PIDS="$(cat "$PIDFILE")"
else
  PIDS="$(ps ax -o pid=,args= | grep 'org.apache.zookeeper.server.quorum.QuorumPeerMain' | grep java | grep -v grep | awk '{print $1}')"
fi
if [ -z "$PIDS" ]; then
  echo "No zookeeper server to stop"
  exit 1
fi
kill -TERM $PIDS
for _ in $(seq 1 100); do
  alive=0
  for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  sleep 0.1
done
rm -f "$PIDFILE"
