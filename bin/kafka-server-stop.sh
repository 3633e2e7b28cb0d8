#!/usr/bin/env bash
# Kafka's name for bin/server-stop.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/server-stop.sh" "$@"
