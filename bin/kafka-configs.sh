#!/usr/bin/env bash
# Kafka's kafka-configs.sh for this broker: describe and alter topic, broker, user, client and ip configs (python -m tools.cli.configs; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.configs "$@"
