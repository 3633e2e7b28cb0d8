#!/usr/bin/env bash
# Kafka's name for bin/server-start.sh: [-daemon] server.properties [--override property=value]*
BROKER_PROG="${BROKER_PROG:-$(basename "$0")}" exec "$(dirname "${BASH_SOURCE[0]}")/server-start.sh" "$@"
