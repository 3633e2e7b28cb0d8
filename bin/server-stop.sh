#!/usr/bin/env bash
# Send SIGTERM to every running broker (processes whose command line is `python -m broker ...`) and wait for them
# to exit, as Kafka's kafka-server-stop.sh does for kafka.Kafka.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TIMEOUT_S="${STOP_TIMEOUT_S:-60}"
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; fi   # only list the brokers that would be stopped

PIDS=""
for f in /proc/[0-9]*/cmdline; do
  pid="${f#/proc/}"; pid="${pid%/cmdline}"
  [ "$pid" = "$$" ] && continue
  mapfile -d '' -t argv < "$f" 2>/dev/null || continue
  [ "${#argv[@]}" -ge 3 ] || continue
  case "$(basename "${argv[0]}")" in python*) ;; *) continue ;; esac
  if [ "${argv[1]}" = "-m" ] && [ "${argv[2]}" = "broker" ]; then PIDS="$PIDS $pid"; fi
done
if [ -z "${PIDS// /}" ]; then
  echo "No kafka server to stop"
  exit 1
fi
if [ "$DRY_RUN" = 1 ]; then echo "Would stop:$PIDS"; exit 0; fi
kill -TERM $PIDS
for _ in $(seq 1 $((TIMEOUT_S * 10))); do
  alive=""
  for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
  [ -z "$alive" ] && break
  sleep 0.1
done
for p in $PIDS; do rm -f "$ROOT/.run/broker-$p.pid"; done
if [ -n "${alive:-}" ]; then
  echo "Broker(s) still running after ${TIMEOUT_S}s:$alive" >&2
  exit 1
fi
