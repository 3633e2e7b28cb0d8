"""The console scripts of the installed distribution: each runs the ``main()`` of one module of ``broker/`` or
``tools/`` after :func:`kafka_broker_py.activate` has made those importable (pyproject.toml's [project.scripts]
names the functions below, one per entry of :data:`TOOLS`).

A tool that cannot run because a module it needs is not installed prints one line naming what to install and
exits 1 (``tools.missing_module_line``), never a traceback.
"""
from __future__ import annotations

import importlib
import sys
from typing import Callable, Dict

from kafka_broker_py import activate

#: console script -> the module whose main(argv=None) -> int it runs (the same modules as bin/'s scripts)
TOOLS: Dict[str, str] = {
    "kafka-server-start": "broker.__main__",
    "kafka-server-stop": "tools.server_stop",
    "kafka-cluster": "tools.cluster",
    "kafka-producer-perf-test": "tools.cli.producer_perf_test",
    "kafka-consumer-perf-test": "tools.cli.consumer_perf_test",
    "kafka-topics": "tools.cli.topics",
    "kafka-console-producer": "tools.cli.console_producer",
    "kafka-console-consumer": "tools.cli.console_consumer",
    "kafka-consumer-groups": "tools.cli.consumer_groups",
    "kafka-configs": "tools.cli.configs",
    "kafka-get-offsets": "tools.cli.get_offsets",
    "kafka-dump-log": "tools.cli.dump_log",
    "kafka-log-dirs": "tools.cli.log_dirs",
    "kafka-features": "tools.cli.features",
    "kafka-delete-records": "tools.cli.delete_records",
    "kafka-broker-api-versions": "tools.cli.broker_api_versions",
    "kafka-acls": "tools.cli.acls",
    "kafka-delegation-tokens": "tools.cli.delegation_tokens",
    "kafka-transactions": "tools.cli.transactions",
    "kafka-leader-election": "tools.cli.leader_election",
    "kafka-reassign-partitions": "tools.cli.reassign_partitions",
    "kafka-run-class": "tools.cli.run_class",
}


def launch(module: str, script: str) -> int:
    """Run ``module``'s ``main()`` as the console script ``script``; its exit status."""
    activate()
    try:
        return int(importlib.import_module(module).main() or 0)
    except ModuleNotFoundError as exc:
        try:
            from tools import missing_module_line
            line = missing_module_line(exc, script)
        except ImportError:  # the distribution itself is incomplete
            line = f"{script}: {exc}; reinstall it: pip install --force-reinstall kafka-broker-py"
        print(line, file=sys.stderr)
        return 1


def _entry(script: str) -> Callable[[], int]:
    module = TOOLS[script]

    def entry() -> int:
        return launch(module, script)

    entry.__name__ = entry.__qualname__ = script.replace("-", "_")
    entry.__doc__ = f"The console script {script}: {module}.main()."
    return entry


globals().update({script.replace("-", "_"): _entry(script) for script in TOOLS})
