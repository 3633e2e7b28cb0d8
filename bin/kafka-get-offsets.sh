#!/usr/bin/env bash
# Kafka's kafka-get-offsets.sh for this broker: offsets of partitions at a time (python -m tools.cli.get_offsets; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.get_offsets "$@"
