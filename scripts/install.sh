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
# Plain text, also when the output is captured through a terminal (a CI log, script(1)): no colour escape codes from
# pip (its rich output keeps bold even with --no-color; TERM=dumb drops it), apt 3, gcc or librdkafka's configure, and
# no "new release of pip" notice about the .venv's own pip.
export TERM=dumb NO_COLOR=1 PIP_NO_COLOR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
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

# 1b. ccache: a fresh clone rebuilds the extensions from the compiler cache (scripts/compiler-cache.sh)
if ! command -v ccache > /dev/null; then
  say "installing ccache (apt-get)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ccache > /dev/null
fi
# shellcheck source=scripts/compiler-cache.sh
. scripts/compiler-cache.sh

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
