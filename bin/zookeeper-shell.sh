#!/usr/bin/env bash
# Kafka's zookeeper-shell.sh for this broker: ZooKeeper's own command-line client (org.apache.zookeeper.ZooKeeperMain
# from Debian's zookeeper package, /usr/share/java/zookeeper.jar) on a cluster's ZooKeeper, as Kafka's script runs it:
#   bin/zookeeper-shell.sh localhost:2181[/chroot] [command args]   (e.g. ls /brokers/ids; no command: interactive)
# Logging is Kafka's tools-log4j.properties (warnings on stderr; KAFKA_LOG4J_OPTS replaces it), JVM options come
# from KAFKA_HEAP_OPTS / KAFKA_OPTS. -zk-tls-config-file (Kafka's ZooKeeperMainWithTlsSupportForKafka) is refused.
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
if [ $# -lt 1 ]; then
  echo "USAGE: $0 zookeeper_host:port[/path] [-zk-tls-config-file file] [args...]"
  exit 1
fi
for arg in "$@"; do
  if [ "$arg" = "-zk-tls-config-file" ]; then
    echo "-zk-tls-config-file is not supported by this broker's tools: it needs Kafka's own ZooKeeper client class" \
         "(ZooKeeperMainWithTlsSupportForKafka); set the zookeeper.ssl.* system properties in KAFKA_OPTS instead" >&2
    exit 1
  fi
done
ZK_JAR="${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"
if [ ! -f "$ZK_JAR" ]; then
  echo "ZooKeeper is not installed ($ZK_JAR missing). Install it with: bash $ROOT/scripts/install.sh" >&2
  exit 1
fi
JAVA="${JAVA:-$(command -v java || true)}"
if [ -z "$JAVA" ]; then echo "java not found on PATH: install a Java runtime (e.g. apt-get install default-jre)" >&2; exit 1; fi
CP="$ZK_JAR"
for jar in /usr/share/java/log4j-1.2.jar /usr/share/java/slf4j-log4j12.jar; do
  if [ -f "$jar" ]; then CP="$CP:$jar"; fi
done
LOG4J_OPTS="${KAFKA_LOG4J_OPTS:--Dlog4j.configuration=file:$ROOT/config/tools-log4j.properties}"
# ZooKeeperMain.main ends every run through ServiceUtils.requestSystemExit, which logs an ERROR even for status 0;
# Kafka's ZooKeeperMainWithTlsSupportForKafka returns normally then, so that one line is dropped.
exec 2> >(grep --line-buffered -v 'ERROR Exiting JVM with code 0 (org.apache.zookeeper.util.ServiceUtils)' >&2)
# shellcheck disable=SC2086  # the option variables hold several JVM options
exec "$JAVA" ${KAFKA_HEAP_OPTS:--Xmx256M} $LOG4J_OPTS $KAFKA_OPTS -cp "$CP" org.apache.zookeeper.ZooKeeperMain \
  -server "$@"
