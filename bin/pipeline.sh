#!/usr/bin/env bash
# The Spark data pipeline (pipeline/): generator, Structured Streaming job, batch job, against a local cluster.
# Usage: bin/pipeline.sh [run] [--bootstrap host:port] [--brokers 1] [--events 3000] [--rate 500] [--work-dir .pipeline]
#        bin/pipeline.sh generate|stream|batch --bootstrap host:port ...   (python -m pipeline --help)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# installs what is missing (the broker's install, then pyspark and the connector jars); quiet when all is there
bash "$ROOT/scripts/install.sh"
bash "$ROOT/scripts/install-pipeline.sh"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$ROOT/.venv/bin/python" -m pipeline "$@"
