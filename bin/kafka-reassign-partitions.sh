#!/usr/bin/env bash
# Kafka's kafka-reassign-partitions.sh for this broker: moving partitions between brokers (python -m tools.cli.reassign_partitions; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.reassign_partitions "$@"
