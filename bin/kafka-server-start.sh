#!/usr/bin/env bash
# Kafka's name for bin/server-start.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/server-start.sh" "$@"
