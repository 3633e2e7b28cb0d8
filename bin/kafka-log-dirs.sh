#!/usr/bin/env bash
# Kafka's kafka-log-dirs.sh for this broker: log directories of brokers and their partitions (python -m tools.cli.log_dirs; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.log_dirs "$@"
