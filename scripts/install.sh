#!/usr/bin/env bash
# Idempotent installer of what running the broker needs, for a fresh Debian machine that has only Python 3:
#   ZooKeeper (Debian package) and a Java runtime for it, the project's .venv with requirements.txt, and the Cython
#   extensions. What only the tests need (kcat, a JDK, Apache Kafka 3.9.1 from Maven Central, the Java client jars,
#   requirements-test.txt) is scripts/install-test.sh's, which scripts/test.sh runs after this one.
#   Quiet when all is well; errors are loud and stop the script.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "install: $*" >&2; }
trap 'say "FAILED at line $LINENO (exit $?)"' ERR

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# 1. ZooKeeper, and the Java runtime it runs on
if [ ! -f /usr/share/java/zookeeper.jar ]; then
  say "installing zookeeper (apt-get)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zookeeper > /dev/null
fi
if ! command -v java > /dev/null; then
  say "java not found: installing default-jre-headless"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jre-headless > /dev/null
fi

# 2. virtualenv + requirements (re-run pip only when requirements.txt changed)
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
REQ_SUM="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [ "$(cat .venv/.requirements.sha256 2>/dev/null || true)" != "$REQ_SUM" ]; then
  say "installing requirements"
  .venv/bin/python -m pip install -q -r requirements.txt
  echo "$REQ_SUM" > .venv/.requirements.sha256
fi

# 3. Cython extensions
if [ -f setup.py ]; then
  BUILD_LOG="$(mktemp)"
  if ! .venv/bin/python setup.py -q build_ext --inplace > "$BUILD_LOG" 2>&1; then
    cat "$BUILD_LOG" >&2
    rm -f "$BUILD_LOG"
    say "building the Cython extensions failed"
    exit 1
  fi
  rm -f "$BUILD_LOG"
else
  say "warning: no setup.py yet; Cython extensions not built"
fi

# >>> pipeline: Spark's Kafka connector (owned by pipeline/; edit only inside this block)
# 5. org.apache.spark:spark-sql-kafka-0-10_2.13 at the version of the pyspark pinned in requirements.txt, with its
#    runtime dependencies (spark-token-provider-kafka-0-10, kafka-clients, commons-pool2), from Maven Central into
#    .cache/spark-kafka-<version>/jars/ (pipeline/maven/pom.xml); pipeline/connector.py hands them to spark.jars.
SPARK_VERSION="$(sed -n 's/^pyspark==\([0-9][0-9.]*\).*/\1/p' requirements.txt)"
if [ -z "$SPARK_VERSION" ]; then
  say "requirements.txt does not pin pyspark==<version>"
  exit 1
fi
SPARK_KAFKA_JARS=".cache/spark-kafka-$SPARK_VERSION/jars"
if [ ! -f "$SPARK_KAFKA_JARS/.complete" ]; then
  if ! command -v mvn > /dev/null; then
    say "mvn not found: installing maven"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq maven > /dev/null
  fi
  say "resolving org.apache.spark:spark-sql-kafka-0-10_2.13:$SPARK_VERSION from Maven Central into $SPARK_KAFKA_JARS"
  rm -rf "$SPARK_KAFKA_JARS"
  mvn -q -B -Dstyle.color=never -s pipeline/maven/settings.xml -f pipeline/maven/pom.xml \
      -Dmaven.repo.local="$ROOT/.cache/m2" -Dspark.version="$SPARK_VERSION" \
      dependency:copy-dependencies -DoutputDirectory="$ROOT/$SPARK_KAFKA_JARS" > /dev/null
  touch "$SPARK_KAFKA_JARS/.complete"
fi
# <<< pipeline: Spark's Kafka connector
