#!/usr/bin/env bash
# Kafka's kafka-producer-perf-test.sh for this broker: producer load test (python -m tools.cli.producer_perf_test; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.producer_perf_test "$@"
