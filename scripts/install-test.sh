#!/usr/bin/env bash
# Idempotent installer of what only the tests need, on top of scripts/install.sh (run that first; scripts/test.sh
# runs both): the test packages (requirements-test.txt), kcat, Apache Kafka 3.9.1 resolved from Maven
# Central (the oracle the compatibility tests run beside our brokers) and the Java client jars of the compat tests.
# Quiet when all is well; errors are loud and stop the script.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Maven's download cache: its default, outside the checkout, so a fresh clone (CI's) copies the jars into .cache/
# without downloading them again
MAVEN_REPO="${BROKER_MAVEN_REPO:-$HOME/.m2/repository}"
say() { echo "install-test: $*" >&2; }
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
# shellcheck source=scripts/compiler-cache.sh
. scripts/compiler-cache.sh

# 1. test and tool packages (re-run pip only when a requirements file changed)
REQ_SUM="$(cat requirements.txt requirements-test.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat .venv/.requirements-test.sha256 2>/dev/null || true)" != "$REQ_SUM" ]; then
  say "installing test requirements"
  .venv/bin/python -m pip install -q -r requirements-test.txt
  echo "$REQ_SUM" > .venv/.requirements-test.sha256
fi

# 1b. the Spark pipeline's pyspark and connector jars (its tests run it)
bash scripts/install-pipeline.sh

# 2. kcat (the compat tests run it)
if ! command -v kcat > /dev/null; then
  say "installing kcat (apt-get; Debian's kcat carries librdkafka 2.0.2, used by the compat tests)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat > /dev/null
fi

# 2b. the nemesis's network tools (tests/harness/nemesis/netns.py): ip and tc (iproute2) for namespaces, cuts and
#     rate limits, nft (nftables) for lossy links, iptables for the NFQUEUE rule of delayed links, strace for
#     the EIO/EROFS injection into a running broker (tests/harness/syscall_faults.py)
#     (looked for in /usr/sbin too: a non-root PATH often lacks it)
NEM_APT=""
has_sbin() { command -v "$1" > /dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
has_sbin ip || NEM_APT="$NEM_APT iproute2"
has_sbin nft || NEM_APT="$NEM_APT nftables"
has_sbin iptables || NEM_APT="$NEM_APT iptables"
has_sbin strace || NEM_APT="$NEM_APT strace"
if [ -n "$NEM_APT" ]; then
  say "installing the nemesis's tools:$NEM_APT"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $NEM_APT > /dev/null
fi

# 3. Apache Kafka 3.9.1 (broker, tools and Kafka Streams, ZooKeeper mode) from Maven Central, the oracle some
#     compat tests run beside our brokers: compat-tests/kafka/pom.xml, jars copied into .cache/kafka-3.9.1/libs/
#     (not committed); its test-classified jars (Kafka's LocalTieredStorage) go to libs/tiered/, out of the
#     libs/*.jar that Kafka's own scripts and librdkafka's test suite glob. The .complete marker holds the pom's
#     sha256 and that layout, so a changed pom is resolved again; the new set is resolved beside the old one and
#     swapped in, so a Kafka process already running keeps its jars.
KAFKA_LIBS=".cache/kafka-3.9.1/libs"
KAFKA_POM_SUM="$(sha256sum compat-tests/kafka/pom.xml | cut -d' ' -f1) tiered/"
if [ "$(cat "$KAFKA_LIBS/.complete" 2>/dev/null || true)" != "$KAFKA_POM_SUM" ]; then
  if ! command -v mvn > /dev/null; then
    say "mvn not found: installing maven"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq maven > /dev/null
  fi
  say "resolving Apache Kafka 3.9.1 from Maven Central into $KAFKA_LIBS"
  rm -rf "$KAFKA_LIBS.new"
  mvn -q -B -Dstyle.color=never -f compat-tests/kafka/pom.xml -Dmaven.repo.local="$MAVEN_REPO" \
      dependency:copy-dependencies -DoutputDirectory="$ROOT/$KAFKA_LIBS.new" > /dev/null
  mkdir -p "$KAFKA_LIBS.new/tiered"
  mv "$KAFKA_LIBS.new"/*-test.jar "$KAFKA_LIBS.new/tiered/"
  echo "$KAFKA_POM_SUM" > "$KAFKA_LIBS.new/.complete"
  rm -rf "$KAFKA_LIBS"
  mv "$KAFKA_LIBS.new" "$KAFKA_LIBS"
fi

# >>> compat-tests Java client (owned by compat-tests/java/; edit only inside this block)
# 4. The Java client for the compat tests: a JDK (javac compiles compat-tests/java/KafkaCompat.java), then
#    kafka-clients 4.3.0 and its runtime jars from Maven Central (compat-tests/java/pom.xml) into .cache/java-libs/
#    and the harness compiled into .cache/java-build/. jars.py does the work (and is idempotent); the tests call it too.
if ! command -v javac > /dev/null; then
  say "javac not found: installing default-jdk-headless"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jdk-headless > /dev/null
fi
if ! command -v mvn > /dev/null; then
  say "mvn not found: installing maven"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq maven > /dev/null
fi
.venv/bin/python compat-tests/java/jars.py > /dev/null
# <<< compat-tests Java client

# >>> librdkafka test suite (owned by tests/harness/librdkafka_tests.py; edit only inside this block)
# 5. librdkafka 2.15.1's own test suite (tests/test-runner, C and C++ tests, and its Java helpers compiled against
#    .cache/kafka-3.9.1/libs from step 3), run by compat-tests/test_librdkafka_txn.py. The sources come from npm's
#    @confluentinc/kafka-javascript package (it bundles librdkafka with its tests/); built once into
#    .cache/librdkafka-2.15.1/ (a few minutes), a no-op afterwards. Needs npm, a C/C++ toolchain and RapidJSON.
RDK_APT=""
command -v npm > /dev/null || RDK_APT="$RDK_APT npm"
command -v g++ > /dev/null || RDK_APT="$RDK_APT g++"
command -v make > /dev/null || RDK_APT="$RDK_APT make"
[ -f /usr/include/rapidjson/schema.h ] || RDK_APT="$RDK_APT rapidjson-dev"
if [ -n "$RDK_APT" ]; then
  say "installing what librdkafka's test suite needs:$RDK_APT"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $RDK_APT > /dev/null
fi
.venv/bin/python -m tests.harness.librdkafka_tests build > /dev/null
# <<< librdkafka test suite

# >>> S3 server for the tiered-storage tests (owned by tests/harness/s3_server.py; edit only inside this block)
# 6. S3Proxy 2.6.0 (Apache-2.0; a real S3 API server over a local directory, Java 17) and its runtime jars from Maven
#    Central (tests/harness/s3proxy/pom.xml) into .cache/s3proxy-2.6.0/libs/ (not committed), as step 3 does for
#    Kafka: resolved beside the old set and swapped in, the pom's sha256 in the .complete marker. About 45 MB.
S3PROXY_LIBS=".cache/s3proxy-2.6.0/libs"
S3PROXY_POM_SUM="$(sha256sum tests/harness/s3proxy/pom.xml | cut -d' ' -f1)"
if [ "$(cat "$S3PROXY_LIBS/.complete" 2>/dev/null || true)" != "$S3PROXY_POM_SUM" ]; then
  say "resolving S3Proxy from Maven Central into $S3PROXY_LIBS"
  rm -rf "$S3PROXY_LIBS.new"
  mvn -q -B -Dstyle.color=never -f tests/harness/s3proxy/pom.xml -Dmaven.repo.local="$MAVEN_REPO" \
      dependency:copy-dependencies -DoutputDirectory="$ROOT/$S3PROXY_LIBS.new" > /dev/null
  echo "$S3PROXY_POM_SUM" > "$S3PROXY_LIBS.new/.complete"
  rm -rf "$S3PROXY_LIBS"
  mv "$S3PROXY_LIBS.new" "$S3PROXY_LIBS"
fi
# <<< S3 server for the tiered-storage tests
