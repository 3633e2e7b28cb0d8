#!/usr/bin/env bash
# Run Debian's ZooKeeper (the `zookeeper` package) with a Kafka-style properties file.
# Usage: bin/zookeeper-server-start.sh [-daemon] config/zookeeper.properties
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ZK_JAR="${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"

DAEMON=0
if [ "${1:-}" = "-daemon" ]; then DAEMON=1; shift; fi
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] zookeeper.properties" >&2
  exit 1
fi
CFG="$(realpath "$1")"
if [ ! -f "$CFG" ]; then echo "Config file not found: $1" >&2; exit 1; fi
if [ ! -f "$ZK_JAR" ]; then
  echo "ZooKeeper is not installed ($ZK_JAR missing). Install it with: bash $ROOT/scripts/install.sh" >&2
  echo "(or: apt-get install zookeeper)" >&2
  exit 1
fi
JAVA="${JAVA:-$(command -v java || true)}"
if [ -z "$JAVA" ]; then echo "java not found on PATH: install a Java runtime (e.g. apt-get install default-jre)" >&2; exit 1; fi

CP="/etc/zookeeper/conf:$ZK_JAR"
for jar in /usr/share/java/log4j-1.2.jar /usr/share/java/slf4j-log4j12.jar; do
  [ -f "$jar" ] && CP="$CP:$jar"
done
LOG_DIR="${LOG_DIR:-$ROOT/logs}"
mkdir -p "$LOG_DIR"
CMD=("$JAVA" ${ZK_HEAP_OPTS:--Xmx512m} -cp "$CP" "-Dzookeeper.log.dir=$LOG_DIR"
     -Dzookeeper.root.logger=INFO,CONSOLE -Dzookeeper.console.threshold=INFO
     org.apache.zookeeper.server.quorum.QuorumPeerMain "$CFG")

if [ "$DAEMON" = 1 ]; then
  mkdir -p "$ROOT/.run"
  nohup "${CMD[@]}" > "$LOG_DIR/zookeeper.out" 2>&1 < /dev/null &
  echo $! > "$ROOT/.run/zookeeper.pid"
  echo "ZooKeeper started in the background (pid $!, log $LOG_DIR/zookeeper.out)"
else
  exec "${CMD[@]}"
fi
