#!/usr/bin/env bash
# Kafka's kafka-delete-records.sh for this broker: delete records below given offsets (python -m tools.cli.delete_records; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.delete_records "$@"
