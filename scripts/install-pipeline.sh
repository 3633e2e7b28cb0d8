#!/usr/bin/env bash
# Idempotent installer of what the Spark pipeline (pipeline/, bin/pipeline.sh) needs on top of scripts/install.sh:
#   pyspark (requirements-pipeline.txt, ~300 MB, so not part of the broker's own install) and Spark's Kafka connector
#   jars from Maven Central. bin/pipeline.sh and scripts/install-test.sh run it. Quiet when all is well.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Maven's download cache: its default, outside the checkout, so a fresh clone (CI's) copies the jars into .cache/
# without downloading them again
MAVEN_REPO="${BROKER_MAVEN_REPO:-$HOME/.m2/repository}"
say() { echo "install-pipeline: $*" >&2; }
# Plain text, also when the output is captured through a terminal (a CI log, script(1)): no colour escape codes from
# pip (its rich output keeps bold even with --no-color; TERM=dumb drops it), apt 3, gcc or librdkafka's configure, and
# no "new release of pip" notice about the .venv's own pip.
export TERM=dumb NO_COLOR=1 PIP_NO_COLOR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
trap 'say "FAILED at line $LINENO (exit $?)"' ERR

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if [ ! -x .venv/bin/python ]; then
  say "no .venv: run bash scripts/install.sh first"
  exit 1
fi

# 4. pyspark (re-run pip only when requirements-pipeline.txt changed)
REQ_SUM="$(sha256sum requirements-pipeline.txt | cut -d' ' -f1)"
if [ "$(cat .venv/.requirements-pipeline.sha256 2>/dev/null || true)" != "$REQ_SUM" ]; then
  say "installing pipeline requirements (pyspark)"
  .venv/bin/python -m pip install -q -r requirements-pipeline.txt
  echo "$REQ_SUM" > .venv/.requirements-pipeline.sha256
fi

# >>> pipeline: Spark's Kafka connector (owned by pipeline/; edit only inside this block)
# 5. org.apache.spark:spark-sql-kafka-0-10_2.13 at the version of the pyspark pinned in requirements-pipeline.txt, with its
#    runtime dependencies (spark-token-provider-kafka-0-10, kafka-clients, commons-pool2), from Maven Central into
#    .cache/spark-kafka-<version>/jars/ (pipeline/maven/pom.xml); pipeline/connector.py hands them to spark.jars.
SPARK_VERSION="$(sed -n 's/^pyspark==\([0-9][0-9.]*\).*/\1/p' requirements-pipeline.txt)"
if [ -z "$SPARK_VERSION" ]; then
  say "requirements-pipeline.txt does not pin pyspark==<version>"
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
      -Dmaven.repo.local="$MAVEN_REPO" -Dspark.version="$SPARK_VERSION" \
      dependency:copy-dependencies -DoutputDirectory="$ROOT/$SPARK_KAFKA_JARS" > /dev/null
  touch "$SPARK_KAFKA_JARS/.complete"
fi
# <<< pipeline: Spark's Kafka connector
