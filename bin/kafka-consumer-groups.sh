#!/usr/bin/env bash
# Kafka's kafka-consumer-groups.sh for this broker: list, describe, delete consumer groups and reset their offsets (python -m tools.cli.consumer_groups; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.consumer_groups "$@"
