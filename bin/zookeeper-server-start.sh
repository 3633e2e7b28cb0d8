#!/usr/bin/env bash
# Run Debian's ZooKeeper (the `zookeeper` package) with a Kafka-style properties file.
# Usage: bin/zookeeper-server-start.sh [-daemon] config/zookeeper.properties
# Its pid goes to $LOG_DIR/zookeeper.pid (LOG_DIR default <checkout>/logs), which bin/zookeeper-server-stop.sh reads;
# with -daemon its console output goes to $LOG_DIR/zookeeper.out and it runs in its own session (a Ctrl-C in the
# terminal that started it does not reach it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ZK_JAR="${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"

DAEMON=0
if [ "${1:-}" = "-daemon" ]; then DAEMON=1; shift; fi
if [ $# -lt 1 ] || [ "$1" = "--help" ]; then
  echo "USAGE: $0 [-daemon] zookeeper.properties" >&2
  exit 1
fi
if [ ! -f "$1" ]; then echo "Config file not found: $1" >&2; exit 1; fi
CFG="$(realpath "$1")"   # relative paths resolve from the caller's directory
if [ ! -f "$ZK_JAR" ]; then
  echo "ZooKeeper is not installed ($ZK_JAR missing). Install it with: bash $ROOT/scripts/install.sh" >&2
  echo "(or: apt-get install zookeeper)" >&2
  exit 1
fi
JAVA="${JAVA:-$(command -v java || true)}"
if [ -z "$JAVA" ]; then echo "java not found on PATH: install a Java runtime (e.g. apt-get install default-jre)" >&2; exit 1; fi

CP="/etc/zookeeper/conf:$ZK_JAR"
for jar in /usr/share/java/log4j-1.2.jar /usr/share/java/slf4j-log4j12.jar; do
  if [ -f "$jar" ]; then CP="$CP:$jar"; fi
done
LOG_DIR="${LOG_DIR:-$ROOT/logs}"
mkdir -p "$LOG_DIR"
PIDFILE="$LOG_DIR/zookeeper.pid"
# shellcheck disable=SC2086  # ZK_HEAP_OPTS holds several JVM options
CMD=("$JAVA" ${ZK_HEAP_OPTS:--Xmx512m} -cp "$CP" "-Dzookeeper.log.dir=$LOG_DIR"
     -Dzookeeper.root.logger=INFO,CONSOLE -Dzookeeper.console.threshold=INFO
     org.apache.zookeeper.server.quorum.QuorumPeerMain "$CFG")

if [ "$DAEMON" = 1 ]; then
  # setsid runs java in this background child itself (not a process-group leader, so no fork): $! is java's pid
  nohup setsid "${CMD[@]}" > "$LOG_DIR/zookeeper.out" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  echo "ZooKeeper started in the background (pid $!, output in $LOG_DIR/zookeeper.out)"
else
  echo $$ > "$PIDFILE"   # exec keeps the pid
  exec "${CMD[@]}"
fi
