#!/usr/bin/env bash
# Kafka's name for bin/server-stop.sh: stops the brokers of this LOG_DIR; --all stops every broker of the machine.
BROKER_PROG="${BROKER_PROG:-$(basename "$0")}" exec "$(dirname "${BASH_SOURCE[0]}")/server-stop.sh" "$@"
