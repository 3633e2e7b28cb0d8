#!/usr/bin/env bash
# Kafka's kafka-broker-api-versions.sh for this broker: API versions of every broker (python -m tools.cli.broker_api_versions; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.broker_api_versions "$@"
