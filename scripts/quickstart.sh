#!/usr/bin/env bash
# One command from a fresh checkout to a running broker: install, start ZooKeeper if needed, start the broker.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/install.sh

zk_ok() {
  python3 - <<'PY'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", 2181), timeout=1) as s:
        s.sendall(b"ruok")
        sys.exit(0 if s.recv(4) == b"imok" else 1)
except OSError:
    sys.exit(1)
PY
}

if ! zk_ok; then
  bin/zookeeper-server-start.sh -daemon config/zookeeper.properties
  for _ in $(seq 1 300); do zk_ok && break; sleep 0.2; done
  zk_ok || { echo "ZooKeeper did not start; see logs/zookeeper.out" >&2; exit 1; }
fi
exec bin/server-start.sh config/server.properties "$@"
