"""The broker's command-line tools (Kafka's, in ``tools/cli/``; the dev cluster; ``kafka-server-stop``), and what
their entry points share: the name a tool was invoked by, and the one line a tool prints when a module it needs is
not installed."""
from __future__ import annotations

import os
import sys
from pathlib import Path

#: import name -> the distribution that provides it (requirements.txt's runtime section; uvloop is optional)
DISTRIBUTIONS = {"confluent_kafka": "confluent-kafka", "kazoo": "kazoo", "crcmod": "crcmod", "snappy": "python-snappy",
                 "lz4": "lz4", "zstandard": "zstandard", "cryptography": "cryptography",
                 "prometheus_client": "prometheus-client", "uvloop": "uvloop"}
#: the checkout's installer, when the tools run from a checkout (bin/)
INSTALL_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install.sh"


def invoked_as(module: str) -> str:
    """The name the running tool was invoked by, which is how Kafka's scripts name themselves (``$0``): a console
    script's own name (``kafka-cluster``), else that of the bin/ script that runs ``module`` (``tools.cluster`` ->
    ``kafka-cluster.sh``, ``tools.cli.run_class`` -> ``kafka-run-class.sh``)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if name.startswith("kafka-"):
        return name
    return "kafka-" + module.rsplit(".", 1)[-1].replace("_", "-") + ".sh"


def main_module(fallback: str = "tool") -> str:
    """The dotted name of the module running as ``__main__`` (``python -m tools.cli.topics``), else ``fallback``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name if spec is not None and spec.name.startswith("tools.") else fallback


def missing_module_line(exc: ModuleNotFoundError, prog: str) -> str:
    """One line for a tool that cannot run because ``exc.name`` is not installed, naming what to install."""
    top = (exc.name or "").split(".")[0]
    if top in ("broker", "tools", "kafka_broker_py"):
        return f"{prog}: this installation is incomplete ({exc}); reinstall it" + (
            f": bash {INSTALL_SCRIPT}" if INSTALL_SCRIPT.is_file() else ": pip install --force-reinstall kafka-broker-py")
    dist = DISTRIBUTIONS.get(top, top or str(exc))
    if INSTALL_SCRIPT.is_file():
        how = f"run bash {INSTALL_SCRIPT} (or pip install {dist})"
    else:
        how = f"run pip install {dist}"
    return f"{prog}: {dist} is not installed; {how}"
