#!/usr/bin/env bash
# Idempotent installer of what only the peer benchmark needs (tools/bench/broker_bench.py --peers tansu): the Tansu
# broker (crate "tansu" 0.6.0, a Kafka-compatible broker in Rust) built from crates.io into .cache/tansu-0.6.0/bin/,
# with the "dynostore" feature: without it the memory:// storage engine the benchmark runs is refused at start
# ("FeatureNotEnabled { feature: \"dynostore\" }"). The .features marker holds the features it was built with.
# Bench-only: neither CI nor scripts/install-test.sh calls it. Kafka 3.9.1, the other peer, comes from install-test.sh.
# A fresh build takes tens of minutes on a shared 2-core machine; it is skipped when the binary is there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "install-bench: $*" >&2; }
trap 'say "FAILED at line $LINENO (exit $?)"' ERR

TANSU_VERSION="0.6.0"
TANSU_ROOT=".cache/tansu-$TANSU_VERSION"
CARGO="${CARGO:-$(command -v cargo || echo /root/.cargo/bin/cargo)}"
TANSU_FEATURES="dynostore"
if [ ! -x "$TANSU_ROOT/bin/tansu" ] || [ "$(cat "$TANSU_ROOT/.features" 2>/dev/null || true)" != "$TANSU_FEATURES" ]; then
  if [ ! -x "$CARGO" ] && ! command -v "$CARGO" > /dev/null; then
    say "no cargo: install a Rust toolchain (rustup) first"
    exit 1
  fi
  say "building tansu $TANSU_VERSION into $TANSU_ROOT (cargo install, niced; tens of minutes)"
  mkdir -p "$TANSU_ROOT"
  CARGO_TARGET_DIR="$ROOT/$TANSU_ROOT/target" nice -n 19 "$CARGO" install --locked --root "$TANSU_ROOT" \
    --force --features "$TANSU_FEATURES" --version "$TANSU_VERSION" tansu
  echo "$TANSU_FEATURES" > "$TANSU_ROOT/.features"
  rm -rf "$TANSU_ROOT/target"
fi
