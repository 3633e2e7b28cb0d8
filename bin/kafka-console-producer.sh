#!/usr/bin/env bash
# Kafka's kafka-console-producer.sh for this broker: one record per line of standard input (python -m tools.cli.console_producer; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.console_producer "$@"
