"""``kafka-server-stop [--all] [--dry-run]``: stop the brokers started here, as Kafka's kafka-server-stop.sh.

By default it stops the brokers whose pid files are in LOG_DIR (default ``<install>/logs``; every broker started
by ``bin/kafka-server-start.sh`` or ``kafka-server-start`` with that LOG_DIR writes one), so one user's or one
test run's brokers are never touched by another's. ``--all`` is Kafka's own behaviour: every broker process of
the machine. The signal is SIGTERM (``SIGNAL=KILL`` etc. as Kafka's script allows), which makes a broker shut down
in a controlled way; unlike Kafka's script this one waits (``--timeout``, default 60 s) until they have exited.
A broker's controlled shutdown takes at most ``controlled.shutdown.max.retries x request.timeout.ms + (max.retries
- 1) x controlled.shutdown.retry.backoff.ms`` (100 s with the defaults, when no controller answers), and at most
``(max.retries - 1) x backoff`` (10 s) when its ZooKeeper is gone (see BrokerServer.controlled_shutdown).
Prints "No kafka server to stop" and exits 1 when there is none, as Kafka's does.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import List, Optional

from broker.log_setup import log_dir
from broker.pid_files import all_broker_processes, is_broker_process, recorded_brokers


def _signal(name: str) -> signal.Signals:
    name = name.upper()
    return signal.Signals[name if name.startswith("SIG") else "SIG" + name]


def wait_gone(pids: List[int], timeout_s: float) -> List[int]:
    """The pids still running after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if is_broker_process(p)]
    return alive


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=os.environ.get("BROKER_PROG", "kafka-server-stop"),
                                     description="Stop the brokers started with this LOG_DIR (SIGTERM, then wait).")
    parser.add_argument("--all", action="store_true",
                        help="every broker process of this machine (Kafka's behaviour), not only this LOG_DIR's")
    parser.add_argument("--dry-run", action="store_true", help="only print the pids that would be signalled")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("STOP_TIMEOUT_S", "60")),
                        help="seconds to wait for the brokers to exit (default 60)")
    parser.add_argument("--process-role", help="KRaft only: refused (this broker runs in ZooKeeper mode)")
    parser.add_argument("--node-id", help="KRaft only: refused (this broker runs in ZooKeeper mode)")
    args = parser.parse_args(argv)
    if args.process_role or args.node_id:
        print("--process-role and --node-id select KRaft processes; this broker runs in ZooKeeper mode",
              file=sys.stderr)
        return 1
    try:
        sig = _signal(os.environ.get("SIGNAL", "TERM"))
    except KeyError:
        print(f"Unknown signal {os.environ.get('SIGNAL')!r} (SIGNAL)", file=sys.stderr)
        return 1
    pids = all_broker_processes() if args.all else recorded_brokers(log_dir())
    if not pids:
        print("No kafka server to stop")
        return 1
    if args.dry_run:
        print("Would stop: " + " ".join(str(p) for p in pids))
        return 0
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    left = wait_gone(pids, args.timeout)
    if left:
        print(f"Broker(s) still running after {args.timeout:g}s: {' '.join(map(str, left))} (a controlled shutdown "
              f"that no controller answers takes up to 100 s with the default settings: wait, or pass --timeout)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
