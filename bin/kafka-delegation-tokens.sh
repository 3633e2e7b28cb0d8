#!/usr/bin/env bash
# Kafka's kafka-delegation-tokens.sh for this broker: create, renew, expire and describe delegation tokens (python -m tools.cli.delegation_tokens; its docstring has the details).
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -P -m tools.cli.delegation_tokens "$@"
